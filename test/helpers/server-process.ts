// A real service process (src/main.ts, embedded mode) for e2e and fault tests: its PID is the server
// itself (tsx as a loader, not a wrapper), so signals reach it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import { Topics } from '../../src/log/port.js';
import { basic } from './service.js';

export const ROOT = resolve(import.meta.dirname, '../..');

export interface ServerProcess {
  child: ChildProcess;
  port: number;
  /** stdout and stderr, as they came */
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  running(): boolean;
  /** SIGTERM, then SIGKILL after 10 s; resolves once it is gone. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Spawns the service (`script`: src/main.ts or a stand-in that runs it) without waiting for it (see startServer). */
export function spawnServer(env: Record<string, string>, port: number, script = 'src/main.ts'): ServerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    // The embedded mode, whatever infrastructure the environment points at (CI exports Kafka's).
    env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '', PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const stop = async (): Promise<{ code: number | null; signal: NodeJS.Signals | null }> => {
    if (running()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    }
    return exited;
  };
  return { child, port, output, exited, running, stop };
}

/** How many times startServer picks another port when the one it chose was taken before the service listened. */
const PORT_ATTEMPTS = 3;

/**
 * Starts the service (DATA_DIR and the rest in `env`) and resolves once GET /time answers. The port
 * freePort found can be taken by another process (a client's ephemeral port) before the service
 * listens on it: the service then exits saying so, and another port is tried.
 */
export async function startServer(env: Record<string, string>, readyWithinMs = 45_000): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOn(env, await freePort(), readyWithinMs);
    } catch (err) {
      if (!(err instanceof PortTakenError) || attempt >= PORT_ATTEMPTS) throw err;
    }
  }
}

class PortTakenError extends Error {}

async function startOn(env: Record<string, string>, port: number, readyWithinMs: number): Promise<ServerProcess> {
  const server = spawnServer(env, port);
  const deadline = Date.now() + readyWithinMs;
  for (;;) {
    if (!server.running()) {
      const output = server.output.join('');
      const Failure = output.includes('the port is in use by another process') ? PortTakenError : Error;
      throw new Failure(`server exited before it was ready:\n${output}`);
    }
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/time`);
      if (res.ok) return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      server.child.kill('SIGKILL');
      throw new Error(`server not ready after ${readyWithinMs / 1000} s:\n${server.output.join('')}`);
    }
    await sleep(100);
  }
}

/** A channel of a running service, and a key that may read it. */
export interface Target {
  port: number;
  key: string;
  channel: string;
}

/** Every message's data of the channel in history, oldest first, following Link rel="next". */
export async function readHistory(target: Target): Promise<string[]> {
  const base = `http://127.0.0.1:${target.port}/channels/${encodeURIComponent(target.channel)}/messages`;
  const data: string[] = [];
  let query: string | undefined = '?direction=forwards&limit=1000';
  while (query) {
    const res = await fetch(base + query, { headers: { authorization: basic(target.key) } });
    if (res.status !== 200) throw new Error(`history answered ${res.status}: ${await res.text()}`);
    const page = (await res.json()) as { data: string }[];
    data.push(...page.map((m) => m.data));
    const next = /<\.\/messages(\?[^>]*)>; rel="next"/.exec(res.headers.get('link') ?? '');
    query = next && page.length > 0 ? next[1] : undefined;
  }
  return data;
}

/** Every message's data of an app's channel in the embedded log file itself (DATA_DIR/log.db, the service stopped), in log order. */
export async function readLogFile(dataDir: string, appId: string, channel: string): Promise<string[]> {
  const log = new EmbeddedLog({ path: join(dataDir, 'log.db') });
  try {
    const data: string[] = [];
    for (const [partition, end] of await log.endOffsets(Topics.messages)) {
      for (const record of await log.read(Topics.messages, partition, 0, end + 1)) {
        const event = decodeEvent(record.value);
        if (event.type === 'messages.published' && event.appId === appId && event.channel === channel) {
          data.push(...event.messages.map((m) => m.data as string));
        }
      }
    }
    return data;
  } finally {
    await log.close();
  }
}
