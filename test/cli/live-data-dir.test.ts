// The command-line tools against the DATA_DIR of a service that is running on it (README: Replay for
// audits, Rebuilding a projection, keys): replay, its export and --verify read the log read-only and
// write nothing to log.db, whatever EMBEDDED_PARTITIONS they are given; the rebuild reads it the same
// way; keys --direct, a writer, is refused while the service holds the directory; the export's
// progress names the records it read.
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import Database from '../../src/stores/sqlite/driver.mjs';
import { ROOT, runToEnd, spawnService, type ServiceProcess } from '../helpers/spawn-service.js';
import { basic, removeDir, uniqueChannel } from '../helpers/service.js';
import { partitionFor } from '../../src/log/partitioner.js';

const NO_KAFKA = { KAFKA_BROKERS: '', CLICKHOUSE_URL: '' };
const cli = (script: string, env: Record<string, string>, ...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, `src/cli/${script}.ts`), ...args], { ...NO_KAFKA, ...env });

/** What the tools must leave as it is: log_meta and log_streams, as rows. */
function logTables(dataDir: string): { meta: unknown[]; streams: unknown[] } {
  const db = new Database(join(dataDir, 'log.db'), { readonly: true });
  try {
    return {
      meta: db.prepare('SELECT topic, partitions FROM log_meta ORDER BY topic').all(),
      streams: db.prepare('SELECT stream, topic, partition FROM log_streams ORDER BY stream').all(),
    };
  } finally {
    db.close();
  }
}

/**
 * log.db and its WAL, byte for byte (the -shm is where every reader marks its place; an empty WAL,
 * which a reader of a stopped service's log makes, is none).
 */
function logBytes(dataDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ['log.db', 'log.db-wal']) {
    const path = join(dataDir, name);
    out[name] = existsSync(path) && statSync(path).size > 0 ? createHash('sha256').update(readFileSync(path)).digest('hex') : 'none';
  }
  return out;
}

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));

describe('the CLIs on the DATA_DIR of a running embedded service', () => {
  let service: ServiceProcess | undefined;
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
  });

  it('replay, --with-proof and --verify given EMBEDDED_PARTITIONS=4 beside a service run with 2: the stored counts are used, nothing is written, the export says what it read; keys --direct is refused in one line', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-live-'));
    dirs.push(dataDir);
    service = spawnService({ env: { DATA_DIR: dataDir, EMBEDDED_PARTITIONS: '2', ...NO_KAFKA } });
    const url = await service.url('');
    const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { key: string; appId: string };
    // Two channels whose records lie in different partitions of the service's two.
    const channels: string[] = [];
    while (channels.length < 2) {
      const c = uniqueChannel('live');
      if (channels.length === 0 || partitionFor(`${app.appId}:${c}`, 2) !== partitionFor(`${app.appId}:${channels[0]}`, 2)) channels.push(c);
    }
    const publish = async (channel: string, name: string): Promise<void> => {
      const res = await fetch(`${url}/channels/${channel}/messages`, { method: 'POST', headers: { authorization: basic(app.key), 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
      expect(res.status).toBe(201);
    };
    for (let i = 0; i < 3; i++) for (const c of channels) await publish(c, `m${i}`);
    // The service's first signed checkpoint (AUDIT_CHECKPOINT_INTERVAL_MS after the log moved) makes
    // the audit topic's rows: the service's own write, which under load landed between the two readings.
    for (let i = 0; i < 300 && !logTables(dataDir).meta.some((m) => (m as { topic: string }).topic === 'audit'); i++) await new Promise((r) => setTimeout(r, 100));
    const before = logTables(dataDir);
    expect(before.meta).toContainEqual({ topic: 'audit', partitions: 2 });
    expect(before.meta).toContainEqual({ topic: 'messages', partitions: 2 });

    const env = { DATA_DIR: dataDir, EMBEDDED_PARTITIONS: '4' };
    const [plain, proof, verify] = await Promise.all([
      cli('replay', env, '--app', app.appId, '--channel', channels[1]),
      cli('replay', env, '--app', app.appId, '--channel', channels[1], '--with-proof'),
      cli('replay', env, '--app', app.appId, '--channel', channels[1], '--verify'),
    ]);
    // Read in the partition the service wrote the channel to (with 4 the channel's partition is another, or one that does not exist).
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { event: { messages: { name: string }[] } }).event.messages[0].name)).toEqual(['m0', 'm1', 'm2']);
    expect(proof.code, proof.stderr).toBe(0);
    // The export reads the audit topic and the channel's partition whole: every record, of as many.
    const summary = /replay: 3 records of messages of app \S+ \(channel \S+\) from the beginning to the end, (\d+)\/(\d+) log records read/.exec(proof.stderr);
    expect(summary, proof.stderr).not.toBeNull();
    expect(Number(summary![1])).toBeGreaterThanOrEqual(3);
    expect(summary![1]).toBe(summary![2]);
    expect(proof.stdout.trim().split('\n').length).toBeGreaterThan(3);
    expect([0, 5]).toContain(verify.code); // 5: records after the newest checkpoint, which --require-sealed alone fails on
    expect(verify.stderr).toMatch(/replay: verified the embedded log's partitions of messages/);

    // keys --direct, which appends, is refused while the service holds DATA_DIR: one line, exit 1.
    const direct = await cli('keys', { DATA_DIR: dataDir }, 'create', '--direct');
    expect(direct.code).toBe(1);
    expect(direct.stderr).toBe(`keys: DATA_DIR=${dataDir} is in use (by the service, or another command holding it): if the service runs, drop --direct to go through it (the route applies the change on every instance); otherwise try again once the other command is done\n`);

    expect(logTables(dataDir)).toEqual(before);
    // The service goes on as it was: a publish to each channel lands in its partition.
    for (const c of channels) await publish(c, 'after');
    const again = await cli('replay', { DATA_DIR: dataDir }, '--app', app.appId, '--prefix', 'live-');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { event: { channel: string } }).event.channel).sort()).toEqual([...channels, ...channels, ...channels, ...channels].sort());
  }, 120_000);
});

describe('the CLIs on a log with a topic the service never numbered', () => {
  it('replay, --with-proof, --verify and the rebuild write nothing to log.db (no log_meta row with their EMBEDDED_PARTITIONS), and the rebuild makes no default app', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-live-'));
    dirs.push(dataDir);
    const service = spawnService({ env: { DATA_DIR: dataDir, ...NO_KAFKA } });
    const url = await service.url('');
    const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { key: string; appId: string };
    const channel = uniqueChannel('old');
    for (const name of ['a', 'b']) {
      const res = await fetch(`${url}/channels/${channel}/messages`, { method: 'POST', headers: { authorization: basic(app.key), 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
      expect(res.status).toBe(201);
    }
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    // As a log written before the presence topic was numbered (an older version, or a service
    // stopped before its first read of it): no log_meta row, no stream.
    const db = new Database(join(dataDir, 'log.db'));
    expect(db.prepare(`SELECT count(*) FROM log_segments WHERE topic = 'presence'`).pluck().get()).toBe(0);
    db.exec(`DELETE FROM log_meta WHERE topic = 'presence'; DELETE FROM log_streams WHERE topic = 'presence'`);
    db.close();
    const tables = logTables(dataDir);
    const bytes = logBytes(dataDir);
    const defaultApp = readFileSync(join(dataDir, 'default-app.json'), 'utf8');

    const env = { DATA_DIR: dataDir, EMBEDDED_PARTITIONS: '4' };
    const runs = [
      await cli('replay', env, '--app', app.appId, '--channel', channel, '--include', 'messages,presence'),
      await cli('replay', env, '--app', app.appId, '--channel', channel, '--include', 'messages,presence', '--with-proof'),
      await cli('replay', env, '--app', app.appId, '--channel', channel, '--include', 'messages,presence', '--verify'),
      await cli('rebuild', env, '--projection', 'stats'),
      await cli('rebuild', env, '--projection', 'presence'),
    ];
    for (const r of runs) expect([0, 5], r.stderr).toContain(r.code);
    expect(runs[0].stdout.trim().split('\n')).toHaveLength(2);
    expect(logTables(dataDir)).toEqual(tables);
    expect(logBytes(dataDir)).toEqual(bytes);
    expect(readFileSync(join(dataDir, 'default-app.json'), 'utf8')).toBe(defaultApp);

    // The rebuild takes the default app as it is and makes none where there is none (a DATA_DIR run with an APPS_FILE).
    rmSync(join(dataDir, 'default-app.json'));
    const rebuilt = await cli('rebuild', env, '--projection', 'stats');
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(existsSync(join(dataDir, 'default-app.json'))).toBe(false);
    expect(logBytes(dataDir)).toEqual(bytes);
  }, 120_000);
});

/** The replay run by another account (nobody), which may read DATA_DIR and not write it: an auditor's. */
const asNobody = (dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const env = { PATH: process.env.PATH ?? '', HOME: tmpdir(), DATA_DIR: dataDir, ...NO_KAFKA };
    execFile('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], { cwd: ROOT, env }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });

describe.runIf(process.getuid?.() === 0 && existsSync('/usr/bin/setpriv'))('the replay by an account that may only read DATA_DIR', () => {
  it('reads beside the running service; with the service stopped, says in one line why it cannot (SQLite must make the WAL files) and what to do', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-live-'));
    dirs.push(dataDir);
    chmodSync(dataDir, 0o755);
    const service = spawnService({ env: { DATA_DIR: dataDir, ...NO_KAFKA } });
    const url = await service.url('');
    const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { key: string; appId: string };
    chmodSync(join(dataDir, 'default-app.json'), 0o644);
    const res = await fetch(`${url}/channels/ro/messages`, { method: 'POST', headers: { authorization: basic(app.key), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x' }) });
    expect(res.status).toBe(201);
    const running = await asNobody(dataDir, '--app', app.appId, '--channel', 'ro');
    expect(running.code, running.stderr).toBe(0);
    expect(running.stdout.trim().split('\n')).toHaveLength(1);
    service.child.kill('SIGTERM');
    expect(await service.exited).toBe(0);
    const files = readdirSync(dataDir).sort();
    const stopped = await asNobody(dataDir, '--app', app.appId, '--channel', 'ro');
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toBe(
      `replay failed: ${join(dataDir, 'log.db')} cannot be opened by this user: with the service stopped, SQLite makes log.db-wal and log.db-shm beside log.db to read it, and ${dataDir} is not writable here; run as the service's user, or read a copy of DATA_DIR (SQLITE_READONLY_DIRECTORY)\n`,
    );
    expect(readdirSync(dataDir).sort()).toEqual(files);
  }, 120_000);
});

describe('an empty --data-dir (a shell variable unset)', () => {
  it('is refused by replay, rebuild, keys --direct and the service (exit 2), never taken as ./data, the data directory of whatever service runs from here', async () => {
    const message = '--data-dir was given an empty value (an unset shell variable?); name the directory, or leave the flag out for DATA_DIR or ./data';
    const [replay, rebuild, keys, service] = await Promise.all([
      cli('replay', {}, '--app', 'a', '--channel', 'c', '--data-dir', ''),
      cli('rebuild', {}, '--projection', 'stats', '--data-dir='),
      cli('keys', {}, 'create', '--direct', '--data-dir', ' '),
      cli('../main', { PORT: '0', HOST: '127.0.0.1' }, '--data-dir', ''),
    ]);
    expect(replay.stderr).toBe(`replay: ${message}\n`);
    expect(rebuild.stderr).toBe(`${message}\n`);
    expect(keys.stderr).toBe(`keys: ${message}\n`);
    expect(service.stderr).toContain(message);
    for (const r of [replay, rebuild, keys]) expect(r.code).toBe(2);
    expect(service.code).not.toBe(0);
    const apps = await cli('keys', {}, 'list', '--direct', '--apps-file', '');
    expect(apps.code).toBe(2);
    expect(apps.stderr).toBe('keys: --apps-file was given an empty value (an unset shell variable?); name the file, or leave the flag out for APPS_FILE\n');
  }, 60_000);
});
