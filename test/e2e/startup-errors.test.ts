// Startup (issue 13): every bad resource ends the start with one clear line on stderr and a
// non-zero exit, never a stack trace or a retry for ever.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runToEnd, ROOT } from '../helpers/spawn-service.js';
import { findKafka, requireInfra } from '../helpers/infra.js';

const tsx = (...args: string[]): string[] => ['--import', 'tsx', join(ROOT, 'src/main.ts'), ...args];
const start = (env: Record<string, string>) => runToEnd(tsx(), { PORT: '0', HOST: '127.0.0.1', ...env });
const freshDir = (): string => mkdtempSync(join(tmpdir(), 'cm-startup-'));

/** A port nothing listens on (taken, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** One line on stderr, matching `pattern`, and a non-zero exit. */
function expectOneLine(result: { code: number; stderr: string }, code: number, pattern: RegExp): void {
  const lines = result.stderr.trim().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  expect(result.code).toBe(code);
}

const kafka = await findKafka();

/** The JSON log lines (stdout) of a start that says what it waits for. */
const waitingLines = (stdout: string): Record<string, unknown>[] =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => typeof l.msg === 'string' && l.msg.startsWith('waiting for '));

describe('startup errors: one line and a non-zero exit', () => {
  it('APPS_FILE that does not exist', async () => {
    const r = await start({ DATA_DIR: freshDir(), APPS_FILE: '/nonexistent/apps.json' });
    expectOneLine(r, 1, /^failed to start: APPS_FILE=\/nonexistent\/apps\.json does not exist$/);
  });

  it('APPS_FILE that is not valid JSON', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'apps.json'), '{ not json');
    const r = await start({ DATA_DIR: dir, APPS_FILE: join(dir, 'apps.json') });
    expectOneLine(r, 1, /^failed to start: APPS_FILE .*apps\.json: cannot read it as JSON/);
  });

  it('DATA_DIR that is a file, not a directory', async () => {
    const file = join(freshDir(), 'plain-file');
    writeFileSync(file, '');
    const r = await start({ DATA_DIR: file });
    expectOneLine(r, 1, /^failed to start: DATA_DIR=.*plain-file is not a directory$/);
  });

  it.runIf(process.platform === 'linux')('DATA_DIR that cannot be written (/sys refuses even root)', async () => {
    const r = await start({ DATA_DIR: '/sys' });
    expectOneLine(r, 1, /^failed to start: DATA_DIR=\/sys is not writable: /);
  });

  it.runIf(process.platform === 'linux')('DATA_DIR under /proc, where a recursive mkdir loops for ever: refused at once', async () => {
    for (const dir of ['/proc/nope', '/proc/nope/deeper']) {
      const r = await start({ DATA_DIR: dir });
      expectOneLine(r, 1, new RegExp(`^failed to start: DATA_DIR=${dir} does not exist and cannot be created: the file system of /proc does not allow creating directories in it`));
    }
  });

  it('HOST that is neither an address nor a host name', async () => {
    const r = await start({ DATA_DIR: freshDir(), HOST: 'not a host' });
    expectOneLine(r, 2, /^configuration error: HOST="not a host" must be an IP address/);
  });

  it('HOST that is not an address of this machine', async () => {
    const r = await start({ DATA_DIR: freshDir(), HOST: '192.0.2.1' }); // TEST-NET-1: never local
    expectOneLine(r, 1, /^failed to start: cannot listen on HOST=192\.0\.2\.1 PORT=0: no network interface of this machine has that address$/);
  });

  it('PORT in use by another process', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const r = await start({ DATA_DIR: freshDir(), PORT: String((server.address() as AddressInfo).port) });
      expectOneLine(r, 1, /^failed to start: cannot listen on HOST=127\.0\.0\.1 PORT=\d+: the port is in use by another process$/);
    } finally {
      server.close();
    }
  });

  it('an unknown flag, with a pointer to --help', async () => {
    const r = await runToEnd(tsx('--prot', '9000'));
    expectOneLine(r, 2, /^configuration error: unknown flag --prot \(see --help\)$/);
  });

  it('Kafka that does not answer: given up after STARTUP_TIMEOUT_MS', async () => {
    const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: `127.0.0.1:${await closedPort()}`, CLICKHOUSE_URL: 'http://127.0.0.1:9', STARTUP_TIMEOUT_MS: '500' });
    expectOneLine(r, 1, /^failed to start: no Kafka broker of KAFKA_BROKERS=127\.0\.0\.1:\d+ answered within 500 ms/);
  });

  it('Kafka that does not answer: "waiting for Kafka at host:port" about once a second, then given up at STARTUP_TIMEOUT_MS (issue 23)', { timeout: 60_000 }, async () => {
    const port = await closedPort();
    const started = Date.now();
    const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: `127.0.0.1:${port}`, CLICKHOUSE_URL: 'http://127.0.0.1:9', STARTUP_TIMEOUT_MS: '3000' });
    const elapsed = Date.now() - started;
    expectOneLine(r, 1, new RegExp(`^failed to start: no Kafka broker of KAFKA_BROKERS=127\\.0\\.0\\.1:${port} answered within 3000 ms`));
    const waiting = waitingLines(r.stdout);
    expect(waiting.length, r.stdout).toBeGreaterThanOrEqual(2);
    expect(waiting.length, r.stdout).toBeLessThanOrEqual(5);
    for (const line of waiting) expect(line).toMatchObject({ msg: `waiting for Kafka at 127.0.0.1:${port}`, waitingFor: 'Kafka', timeoutMs: 3000 });
    // The process's own start (tsx) comes on top; the old wait was 30 s whatever the setting.
    expect(elapsed).toBeLessThan(3000 + 12_000);
  });

  it('a Kafka address that accepts connections and never answers is given up at STARTUP_TIMEOUT_MS, not at a request timeout (issue 23)', { timeout: 60_000 }, async () => {
    const silent = createServer(() => {}); // takes connections, says nothing
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as AddressInfo;
    try {
      const started = Date.now();
      const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: `127.0.0.1:${port}`, CLICKHOUSE_URL: 'http://127.0.0.1:9', STARTUP_TIMEOUT_MS: '3000' });
      const elapsed = Date.now() - started;
      expectOneLine(r, 1, /^failed to start: no Kafka broker of KAFKA_BROKERS=127\.0\.0\.1:\d+ answered within 3000 ms/);
      expect(waitingLines(r.stdout).length, r.stdout).toBeGreaterThanOrEqual(2);
      expect(elapsed).toBeLessThan(3000 + 12_000);
    } finally {
      silent.close();
    }
  });

  it.runIf(kafka !== undefined || requireInfra)('ClickHouse that does not answer: "waiting for ClickHouse at host:port", given up after STARTUP_TIMEOUT_MS', async () => {
    const port = await closedPort();
    const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: kafka!.brokers.join(','), CLICKHOUSE_URL: `http://127.0.0.1:${port}`, STARTUP_TIMEOUT_MS: '500' });
    expectOneLine(r, 1, /^failed to start: CLICKHOUSE_URL=http:\/\/127\.0\.0\.1:\d+: ClickHouse did not answer within 500 ms/);
    expect(waitingLines(r.stdout).map((l) => l.msg), r.stdout).toContain(`waiting for ClickHouse at 127.0.0.1:${port}`);
  });

  it.runIf(kafka !== undefined || requireInfra)('the line that gives up on ClickHouse does not print the password in CLICKHOUSE_URL', async () => {
    const port = await closedPort();
    const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: kafka!.brokers.join(','), CLICKHOUSE_URL: `http://auditor:s3cret-pw@127.0.0.1:${port}`, STARTUP_TIMEOUT_MS: '500' });
    expectOneLine(r, 1, /^failed to start: CLICKHOUSE_URL=http:\/\/auditor:\*\*\*@127\.0\.0\.1:\d+: ClickHouse did not answer within 500 ms/);
    expect(r.stdout + r.stderr).not.toContain('s3cret-pw');
  });

  it.runIf(kafka?.mock === true || (requireInfra && process.env.KAFKA_MOCK === '1'))('KAFKA_IDEMPOTENT=1 on a cluster that cannot serve it (the mock broker) fails at once, naming the switch', async () => {
    const r = await start({ DATA_DIR: freshDir(), KAFKA_BROKERS: kafka!.brokers.join(','), CLICKHOUSE_URL: 'http://127.0.0.1:9', KAFKA_IDEMPOTENT: '1' });
    expectOneLine(r, 1, /^failed to start: KAFKA_IDEMPOTENT=1, but the Kafka cluster .* names no controller .* set KAFKA_IDEMPOTENT=0 or auto$/);
  });
});
