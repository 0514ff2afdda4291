// The keys CLI (issue 24 item 2) against a running embedded service, spawned as an operator starts
// it: create prints the key once, list shows no secrets, update and revoke take effect; --direct
// appends to the log while the service is stopped (and refuses while it runs); a restart keeps
// every change; `replay --keys` shows them without secrets.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, runToEnd, spawnService, type ServiceProcess } from '../helpers/spawn-service.js';
import { removeDir } from '../helpers/service.js';

const dataDir = mkdtempSync(join(tmpdir(), 'cm-keys-cli-'));
const env = { DATA_DIR: dataDir, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' };
let service: ServiceProcess | undefined;

const keys = (...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/keys.ts'), ...args], env);
const replay = (...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], env);
const basic = (key: string) => `Basic ${Buffer.from(key).toString('base64')}`;

async function start(): Promise<string> {
  service = spawnService({ env: { ...env, LOG_LEVEL: 'info' } });
  return `http://127.0.0.1:${await service.listening}`;
}
async function stop(): Promise<void> {
  service?.child.kill('SIGTERM');
  await service?.exited;
  service = undefined;
}
afterAll(async () => {
  await stop();
  removeDir(dataDir);
});

const publish = (url: string, key: string) =>
  fetch(`${url}/channels/cli-room/messages`, { method: 'POST', headers: { authorization: basic(key), 'content-type': 'application/json' }, body: '{"name":"n"}' });

describe('keys CLI', () => {
  it('--help names the command as typed and every subcommand; bad arguments exit 2', async () => {
    const help = await keys('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: npx tsx src\/cli\/keys.ts <command>/);
    for (const word of ['npm run -s keys', 'create', 'list', 'update <keyId>', 'revoke <keyId>', '--capability', '--revocable-tokens', '--management', '--direct', '--key']) expect(help.stdout).toContain(word);
    for (const [args, message] of [
      [[], 'give a command'],
      [['frob'], 'unknown command "frob"'],
      [['revoke'], 'revoke needs the key'],
      [['create', '--capability', '{nope'], '--capability must be JSON'],
      [['create', '--capability', '{"*":["fly"]}'], 'capability for "*" must be'],
      [['list', '--name', 'x'], 'list takes no'],
      [['create', '--management', '--no-management'], 'together'],
      [['list', '--key', 'nonsense'], '--key (MANAGEMENT_KEY) must look like'],
    ] as [string[], string][]) {
      const r = await keys(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(message);
    }
  });

  it('through the running service: create prints the key once, list has no secrets, update and revoke take effect', async () => {
    const url = await start();
    const root = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')).key as string;

    const created = await keys('create', '--url', url, '--name', 'publisher', '--capability', '{"cli-room":["publish"]}', '--revocable-tokens');
    expect(created.code, created.stderr).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(/^[^.:]+\.[^.:]+:.+$/);
    expect(created.stderr).toContain('shown this once');
    expect((await publish(url, key)).status).toBe(201);

    const listed = await keys('list', '--url', url);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(key.split(':')[0]);
    expect(listed.stdout).toContain('"publisher"');
    expect(listed.stdout).not.toContain(key.split(':')[1]);
    expect(listed.stdout).not.toContain(root.split(':')[1]);
    const asJson = JSON.parse((await keys('list', '--url', url, '--json')).stdout) as { keyName: string; revocableTokens: boolean }[];
    expect(asJson.find((k) => k.keyName === key.split(':')[0])).toMatchObject({ revocableTokens: true });

    const keyId = key.split(':')[0].split('.')[1];
    const updated = await keys('update', keyId, '--url', url, '--capability', '{"elsewhere":["publish"]}');
    expect(updated.code, updated.stderr).toBe(0);
    expect((await publish(url, key)).status).toBe(401);

    // A key without the management right is refused, in the service's words.
    const plain = (await keys('create', '--url', url)).stdout.trim();
    const refused = await keys('list', '--url', url, '--key', plain);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/no management right.*\(40160, HTTP 401\)/);

    const revoked = await keys('revoke', keyId, '--url', url);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stderr).toContain('REVOKED');
    const res = await publish(url, key);
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(40131);

    // --direct refuses while the service holds DATA_DIR.
    const locked = await keys('create', '--direct');
    expect(locked.code).toBe(1);
    expect(locked.stderr).toContain('is in use (by the service, or another command holding it): if the service runs, drop --direct');
  }, 60_000);

  it('--direct while the service is stopped; a restart keeps every change; replay --keys shows them without secrets', async () => {
    const stopped = `http://127.0.0.1:${await service!.listening}`;
    await stop();
    const refused = await keys('list', '--url', stopped);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`no service answers at ${stopped} (ECONNREFUSED)`);
    const made = await keys('create', '--direct', '--name', 'offline');
    expect(made.code, made.stderr).toBe(0);
    const offline = made.stdout.trim();
    const before = JSON.parse((await keys('list', '--direct', '--json')).stdout) as { keyName: string; status: number }[];
    expect(before.map((k) => k.keyName)).toContain(offline.split(':')[0]);

    const url = await start();
    expect((await publish(url, offline)).status).toBe(201);
    const after = JSON.parse((await keys('list', '--url', url, '--json')).stdout) as typeof before;
    expect(after).toEqual(before);
    expect(after.filter((k) => k.status === 1)).toHaveLength(1); // the key revoked before the restart

    const appId = offline.split('.')[0];
    const history = await replay('--app', appId, '--keys');
    expect(history.code, history.stderr).toBe(0);
    const events = history.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { event: { type: string; key?: { name?: string } } }).event);
    expect(events.map((e) => e.type)).toEqual(['key.created', 'key.updated', 'key.created', 'key.revoked', 'key.created']);
    expect(events[0].key?.name).toBe('publisher');
    expect(history.stdout).not.toContain(offline.split(':')[1]);
    expect(history.stdout).not.toContain('keySecret');
  }, 60_000);
});
