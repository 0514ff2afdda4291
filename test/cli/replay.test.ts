// The replay CLI (issue 13): util.parseArgs, --help, refusals with exit code 2, no data directory
// created, a warning when nothing matched, and clean NDJSON on stdout however it is started.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT, runToEnd } from '../helpers/spawn-service.js';
import { startTestService, uniqueChannel } from '../helpers/service.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { replayScope } from '../../src/audit/replay-scope.js';

const replay = (...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], { KAFKA_BROKERS: '', CLICKHOUSE_URL: '' });

/** A data directory whose log holds two messages on one channel of the default app. */
async function dataWithMessages(): Promise<{ dataDir: string; appId: string; channel: string }> {
  const t = await startTestService();
  const channel = uniqueChannel('audit');
  for (const name of ['a', 'b']) {
    const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: { name } });
    expect(res.statusCode).toBe(201);
  }
  const appId = t.service.registry.all()[0].appId;
  await t.close();
  return { dataDir: t.dataDir, appId, channel };
}

describe('replay CLI', () => {
  it('--help prints the usage on stdout, naming the command as it was typed, and exits 0', async () => {
    const r = await replay('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: npx tsx src\/cli\/replay.ts --app <appId> \(--channel <name> \| --prefix <p> \| --all-channels\)/);
    expect(r.stderr).toBe('');
    // As npm runs the `replay` script (npm sets these two; the script names the file).
    const viaNpm = await runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), '--help'], { npm_lifecycle_event: 'replay', npm_lifecycle_script: 'tsx src/cli/replay.ts' });
    expect(viaNpm.stdout).toMatch(/^Usage: npm run replay -- --app <appId> \(--channel <name>/);
    expect(viaNpm.stdout).toContain('npm run -s');
  });

  it('refuses --from later than --to (exit 2)', async () => {
    const r = await replay('--app', 'a', '--channel', 'c', '--from', '2026-11-21T00:00:00Z', '--to', '2026-11-20T00:00:00Z');
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('replay: --from (2026-11-21T00:00:00.000Z) is later than --to (2026-11-20T00:00:00.000Z)');
    expect(r.stdout).toBe('');
  });

  it.each(['yesterday', '2026-13-45', '12abc', '2026-11-20Tnoon'])('refuses the unparseable date %s (exit 2)', async (date) => {
    const r = await replay('--app', 'a', '--channel', 'c', '--from', date);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--from must be ms since the epoch or an ISO 8601 date (2026-11-20T00:00:00Z), not "${date}"`);
  });

  it('refuses unknown options, a missing --app or scope, two scopes and an unknown --include (exit 2)', async () => {
    // Five processes started at once: one after another they outlast the timeout on a loaded machine.
    const [form, r, noScope, two, kind] = await Promise.all([
      replay('--app', 'a', '--channel', 'c', '--form', '1'),
      replay('--channel', 'c'),
      replay('--app', 'a'),
      replay('--app', 'a', '--channel', 'c', '--prefix', 'p'),
      replay('--app', 'a', '--all-channels', '--include', 'messages,stats'),
    ]);
    expect(form.stderr).toContain('unknown option --form (see --help)');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--app is required');
    expect(noScope.code).toBe(2);
    expect(noScope.stderr).toContain('--app and --channel are required (or --prefix, or --all-channels');
    expect(two.code).toBe(2);
    expect(two.stderr).toContain('--channel, --prefix and --all-channels are one scope');
    expect(kind.code).toBe(2);
    expect(kind.stderr.trim()).toBe('replay: --include takes messages, presence, app-events (comma-separated), not "stats"');
  }, 60_000);

  it('never creates a missing data directory (exit 1, one line)', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'cm-replay-'));
    const missing = join(parent, 'no-such-dir');
    const r = await replay('--app', 'a', '--channel', 'c', '--data-dir', missing);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(`replay failed: DATA_DIR=${missing} does not exist`);
    expect(existsSync(missing)).toBe(false);
  });

  it('gives up on a Kafka that does not answer after STARTUP_TIMEOUT_MS, with one line (exit 1)', async () => {
    const r = await runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), '--app', 'a', '--channel', 'c'], {
      KAFKA_BROKERS: '127.0.0.1:9',
      CLICKHOUSE_URL: 'http://127.0.0.1:9',
      STARTUP_TIMEOUT_MS: '500',
    });
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^replay failed: no Kafka broker of KAFKA_BROKERS=127\.0\.0\.1:9 answered within 500 ms/);
    expect(r.stdout).toBe('');
  });

  it('refuses a directory that holds no log, and creates nothing in it', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'cm-replay-empty-'));
    const r = await replay('--app', 'a', '--channel', 'c', '--data-dir', empty);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/holds no log/);
    expect(readdirSync(empty)).toEqual([]);
  });

  it('an unknown app, or a channel with no record in the range, is an error (exit 3); an empty prefix a warning', async () => {
    const { dataDir, appId, channel } = await dataWithMessages();
    const r = await replay('--app', appId, '--channel', 'never-used', '--data-dir', dataDir);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^replay: no record of messages of app .* \(channel never-used\) from the beginning to the end in the embedded log: an unknown channel, or none in the range/m);
    const late = await replay('--app', appId, '--channel', channel, '--from', String(Date.now() + 3_600_000), '--data-dir', dataDir);
    expect(late.code).toBe(3);
    const other = await replay('--app', 'no-such-app', '--channel', 'c', '--data-dir', dataDir);
    expect(other.code).toBe(3);
    expect(other.stderr.trim()).toBe('replay: unknown app "no-such-app": neither the configuration (APPS_FILE, DATA_DIR\'s default app) nor the embedded log\'s apps topic names it');
    const prefix = await replay('--app', appId, '--prefix', 'nothing-here:', '--data-dir', dataDir);
    expect(prefix.code).toBe(0);
    expect(prefix.stderr).toMatch(/^replay: warning: no record of messages of app .* \(channels nothing-here:\*\)/m);
  }, 60_000);

  it('replays a prefix, every channel and the app\'s events, each line naming its place, time and credential', async () => {
    const t = await startTestService();
    const base = uniqueChannel('scope');
    const post = async (channel: string, name: string) => {
      const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: { name } });
      expect(res.statusCode).toBe(201);
    };
    await post(`${base}:a`, 'a1');
    await post(`other-${base}`, 'o1');
    await post(`${base}:b`, 'b1');
    await post(`${base}:a`, 'a2');
    const made = await t.service.app.inject({ method: 'POST', url: `/apps/${t.service.registry.all()[0].appId}/keys`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: { name: 'auditor' } });
    expect(made.statusCode, made.body).toBeLessThan(300);
    const appId = t.service.registry.all()[0].appId;
    const keyName = Buffer.from(t.auth.slice('Basic '.length), 'base64').toString().split(':')[0];
    await t.close();

    type Line = { topic: string; partition: number; offset: number; time: number; event: { type: string; channel?: string; messages?: { name: string }[]; key?: Record<string, unknown> }; credential?: { keyName?: string } };
    const lines = (stdout: string): Line[] => stdout.trim().split('\n').map((l) => JSON.parse(l) as Line);
    const prefix = await replay('--app', appId, '--prefix', `${base}:`, '--data-dir', t.dataDir);
    expect(prefix.code, prefix.stderr).toBe(0);
    const byChannel = (ls: Line[], ch: string) => ls.filter((l) => l.event.channel === ch).map((l) => l.event.messages![0].name);
    expect(byChannel(lines(prefix.stdout), `${base}:a`)).toEqual(['a1', 'a2']);
    expect(byChannel(lines(prefix.stdout), `${base}:b`)).toEqual(['b1']);
    expect(lines(prefix.stdout).some((l) => l.event.channel === `other-${base}`)).toBe(false);
    for (const l of lines(prefix.stdout)) {
      expect(l).toMatchObject({ topic: 'messages', partition: expect.any(Number), offset: expect.any(Number), time: expect.any(Number), credential: { keyName } });
    }

    const all = await replay('--app', appId, '--all-channels', '--include', 'messages,app-events', '--data-dir', t.dataDir);
    expect(all.code, all.stderr).toBe(0);
    const everything = lines(all.stdout);
    // Lifecycle events on the metachannel are on the messages topic too, as the announcer made them.
    expect(everything.filter((l) => l.topic === 'messages' && !l.event.channel?.startsWith('[meta]')).map((l) => l.event.messages![0].name).sort()).toEqual(['a1', 'a2', 'b1', 'o1']);
    const created = everything.find((l) => l.event.type === 'key.created');
    expect(created).toMatchObject({ topic: 'apps', event: { key: { name: 'auditor' } } });
    expect(all.stdout).not.toContain('keySecret');
    // Every channel: lifecycle events on the metachannel are messages too.
    expect(all.stderr).toMatch(/^replay: \d+ records of messages, app-events of app /m);
  }, 60_000);

  it('`npm run -s replay` writes clean NDJSON on stdout (no npm banner), progress and summary on stderr', async () => {
    const { dataDir, appId, channel } = await dataWithMessages();
    const { stdout, stderr } = await promisify(execFile)('npm', ['run', '-s', 'replay', '--', '--app', appId, '--channel', channel, '--data-dir', dataDir], {
      cwd: ROOT,
      env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' },
    });
    const lines = stdout.trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { event: { messages: { name: string }[] } }).event.messages[0].name)).toEqual(['a', 'b']);
    // Not a terminal: no progress bar, one summary line.
    expect(stderr).not.toContain('[#');
    expect(stderr).toMatch(/^replay: 2 records of messages of app /m);
  }, 60_000);

  it('a reader that stops early (`| head`): one line on stderr saying the output is incomplete, exit code 141 as for SIGPIPE, no stack trace', async () => {
    const t = await startTestService();
    const channel = uniqueChannel('audit-pipe');
    for (let i = 0; i < 4; i++) {
      const messages = Array.from({ length: 400 }, (_, j) => ({ name: `m${i}-${j}`, data: 'x'.repeat(200) }));
      const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: messages });
      expect(res.statusCode).toBe(201);
    }
    const appId = t.service.registry.all()[0].appId;
    await t.close();
    const command = `${process.execPath} --import tsx src/cli/replay.ts --app ${appId} --channel ${channel} --data-dir ${t.dataDir} | head -c 100 > /dev/null; echo "exit \${PIPESTATUS[0]}"`;
    const { stdout, stderr } = await promisify(execFile)('bash', ['-c', command], { cwd: ROOT, env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' } });
    expect(stdout.trim()).toBe('exit 141');
    expect(stderr).toContain('replay: stdout was closed before the end (EPIPE): the output is incomplete');
    expect(stderr).not.toMatch(/\n\s+at /);
  }, 60_000);

  // util-linux `script` runs the replay on a pseudo-terminal; its stdout goes to a file.
  it.runIf(process.platform === 'linux' && existsSync('/usr/bin/script'))('on a terminal, the progress bar is drawn on stderr', async () => {
    const { dataDir, appId, channel } = await dataWithMessages();
    const out = join(mkdtempSync(join(tmpdir(), 'cm-replay-tty-')), 'audit.ndjson');
    const command = `${process.execPath} --import tsx src/cli/replay.ts --app ${appId} --channel ${channel} --data-dir ${dataDir} > ${out}`;
    const { stdout: terminal } = await promisify(execFile)('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' } });
    expect(terminal).toMatch(/\[#+\] 100\.0%  records read \d+\/\d+  2 found/);
    expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(2);
  }, 60_000);

  it('--include presence reads the presence topic: each change with the connection and clientId that made it', async () => {
    const log = new EmbeddedLog({ path: ':memory:', partitions: 4 });
    const change = (appId: string, channel: string, clientId: string, timestamp: number) => ({
      key: `${appId}:${channel}`,
      timestamp,
      value: encodeEvent({ type: 'presence.changed', appId, channel, event: { action: 'enter', id: `c1:${timestamp}`, timestamp, clientId, connectionId: 'conn-1' } }),
    });
    await log.append(Topics.presence, [change('app1', 'room', 'ann', 10), change('app2', 'room', 'bob', 11), change('app1', 'room', 'cy', 12)]);
    const seen = [];
    for await (const { line } of replayScope(log, { appId: 'app1', channels: { kind: 'channel', name: 'room' }, include: new Set(['presence' as const]), from: 0, to: 11 })) seen.push(line);
    await log.close();
    expect(seen).toEqual([
      { topic: 'presence', partition: expect.any(Number), offset: 0, time: 10, event: { type: 'presence.changed', appId: 'app1', channel: 'room', action: 'enter', event: { id: 'c1:10', timestamp: 10, clientId: 'ann', connectionId: 'conn-1', action: 'enter' } }, credential: { connectionId: 'conn-1', clientId: 'ann' } },
    ]);
  });
});
