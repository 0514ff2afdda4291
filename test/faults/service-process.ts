// A real service process (src/main.ts) in production mode on loopback, for the fault tier: its
// PID is the server itself (tsx as a loader, not a wrapper), so SIGKILL hits the service, and an
// unhandled rejection ends it (Node's default), which the tests see as an exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PrivateInfra } from './private-infra.js';

const ROOT = resolve(import.meta.dirname, '../..');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  /** stdout and stderr, as they came */
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  running(): boolean;
  /** SIGTERM and wait (SIGKILL after 10 s). */
  stop(): Promise<void>;
}

export interface FaultApp {
  appId: string;
  key: string;
  /** a channel of the app's persisted namespace: its history lives in ClickHouse */
  channel: string;
  appsFile: string;
  dataDir: string;
}

/** An app with a `persisted` namespace, in an APPS_FILE of its own. */
export function faultApp(name: string): FaultApp {
  const dataDir = mkdtempSync(join(tmpdir(), `cm-faults-${name}-`));
  const appId = `${name}app`;
  const key = `${appId}.k1:${name}-secret-${name}-secret`;
  const appsFile = join(dataDir, 'apps.json');
  writeFileSync(appsFile, JSON.stringify({ apps: [{ appId, keys: [{ key }], namespaces: [{ id: 'persisted', persisted: true }] }] }));
  return { appId, key, channel: `persisted:${name}`, appsFile, dataDir };
}

/**
 * Lines telling of a rejection or exception nobody handled: Node's own report when the process
 * dies of one, or main's fatal log line when it keeps serving.
 */
export const unhandled = (output: string[]): string[] =>
  output
    .join('')
    .split('\n')
    .filter((line) => /unhandled promise rejection|uncaught exception|UnhandledPromiseRejection|triggerUncaughtException/i.test(line));

/** Throws with the end of its output when the process has exited (a crash shows as such, not as a refused request). */
export function assertRunning(service: ServiceProcess): void {
  if (service.running()) return;
  const tail = service.output.join('').split('\n').slice(-30).join('\n');
  throw new Error(`the service process exited (${service.child.exitCode ?? service.child.signalCode}); its last output:\n${tail}`);
}

const freePort = (): Promise<number> =>
  new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => done(port));
    });
  });

export async function startServiceProcess(infra: PrivateInfra, app: FaultApp, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      KAFKA_BROKERS: infra.brokers.join(','),
      CLICKHOUSE_URL: infra.clickhouseUrl,
      // librdkafka's mock broker cannot serve the idempotent producer (ARCHITECTURE).
      KAFKA_IDEMPOTENT: '0',
      DATA_DIR: app.dataDir,
      APPS_FILE: app.appsFile,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
  child.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const service: ServiceProcess = {
    child,
    port,
    output,
    exited,
    running,
    stop: async () => {
      if (!running()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!running()) throw new Error(`the service exited before it was ready:\n${output.join('')}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/time`)).ok) return service;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the service was not ready after 60 s:\n${output.join('')}`);
    }
    await sleep(100);
  }
}
