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
    expect(r.stdout).toMatch(/^Usage: npx tsx src\/cli\/replay.ts --app <appId> --channel <name>/);
    expect(r.stderr).toBe('');
    // As npm runs the `replay` script (npm sets these two; the script names the file).
    const viaNpm = await runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), '--help'], { npm_lifecycle_event: 'replay', npm_lifecycle_script: 'tsx src/cli/replay.ts' });
    expect(viaNpm.stdout).toMatch(/^Usage: npm run replay -- --app <appId> --channel <name>/);
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

  it('refuses unknown options and a missing --app or --channel (exit 2)', async () => {
    expect((await replay('--app', 'a', '--channel', 'c', '--form', '1')).stderr).toContain('unknown option --form (see --help)');
    const r = await replay('--channel', 'c');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--app and --channel are required');
  });

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

  it('warns on stderr when the app or channel has nothing, with empty stdout', async () => {
    const { dataDir, appId } = await dataWithMessages();
    const r = await replay('--app', appId, '--channel', 'never-used', '--data-dir', dataDir);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^replay: warning: no messages of .*\/never-used from the beginning to the end in the embedded log/m);
    const other = await replay('--app', 'no-such-app', '--channel', 'c', '--data-dir', dataDir);
    expect(other.stderr).toMatch(/warning: no messages of no-such-app\/c/);
  }, 60_000);

  it('`npm run -s replay` writes clean NDJSON on stdout (no npm banner), progress and summary on stderr', async () => {
    const { dataDir, appId, channel } = await dataWithMessages();
    const { stdout, stderr } = await promisify(execFile)('npm', ['run', '-s', 'replay', '--', '--app', appId, '--channel', channel, '--data-dir', dataDir], {
      cwd: ROOT,
      env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' },
    });
    const lines = stdout.trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { name: string }).name)).toEqual(['a', 'b']);
    // Not a terminal: no progress bar, one summary line.
    expect(stderr).not.toContain('[#');
    expect(stderr).toMatch(/^replay: 2 messages of /m);
  }, 60_000);

  // util-linux `script` runs the replay on a pseudo-terminal; its stdout goes to a file.
  it.runIf(process.platform === 'linux' && existsSync('/usr/bin/script'))('on a terminal, the progress bar is drawn on stderr', async () => {
    const { dataDir, appId, channel } = await dataWithMessages();
    const out = join(mkdtempSync(join(tmpdir(), 'cm-replay-tty-')), 'audit.ndjson');
    const command = `${process.execPath} --import tsx src/cli/replay.ts --app ${appId} --channel ${channel} --data-dir ${dataDir} > ${out}`;
    const { stdout: terminal } = await promisify(execFile)('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' } });
    expect(terminal).toMatch(/\[#+\] 100\.0%  offset \d+\/\d+  2 messages/);
    expect(readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(2);
  }, 60_000);
});
