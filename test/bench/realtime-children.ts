// The realtime bench's load-generator children (realtime-clients.ts, each in a process of its own)
// as the bench drives them: started, asked over IPC, their connections opened in even shares.
import { fork, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { cpuMsOf, ROOT } from './servers.js';

const CLIENTS_ENTRY = fileURLToPath(new URL('./realtime-clients.ts', import.meta.url));
const EXIT_WITH_PARENT = fileURLToPath(new URL('./exit-with-parent.ts', import.meta.url));
const CONNECT_CONCURRENCY = 64;

export interface ClientsChild {
  index: number;
  pid: number;
  request<T>(command: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  cpuMs(): number;
  stop(): Promise<void>;
}

export async function startClients(index: number): Promise<ClientsChild> {
  const child: ChildProcess = fork(CLIENTS_ENTRY, [], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx', '--import', EXIT_WITH_PARENT],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', RT_CHILD: String(index) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const name = `rt-clients-${index}`;
  for (const stream of [child.stdout!, child.stderr!]) createInterface({ input: stream }).on('line', (line) => console.log(`  [${name}] ${line}`));
  let nextId = 0;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let exited = false;
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (m: { ready?: boolean; id?: number; result?: unknown; error?: string }) => {
      if (m.ready) return resolve();
      const w = waiting.get(m.id!);
      if (!w) return;
      waiting.delete(m.id!);
      if (m.error !== undefined) w.reject(new Error(`${name}: ${m.error}`));
      else w.resolve(m.result);
    });
    child.once('exit', (code, signal) => {
      exited = true;
      const err = new Error(`${name} exited (${signal ?? `code ${code}`})`);
      reject(err);
      for (const w of waiting.values()) w.reject(err);
      waiting.clear();
    });
  });
  await ready;
  return {
    index,
    pid: child.pid!,
    request: <T>(command: Record<string, unknown>, timeoutMs = 300_000) =>
      new Promise<T>((resolve, reject) => {
        if (exited) return reject(new Error(`${name} has exited`));
        const id = nextId++;
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`${name}: no answer to ${String(command.cmd)} in ${timeoutMs} ms`));
        }, timeoutMs);
        waiting.set(id, {
          resolve: (v) => {
            clearTimeout(timer);
            resolve(v as T);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        child.send({ id, ...command });
      }),
    cpuMs: () => cpuMsOf(child.pid!) ?? 0,
    stop: async () => {
      if (exited) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.send({ id: -1, cmd: 'close' });
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(kill);
    },
  };
}

export interface PoolResult {
  ok: number;
  failed: number;
  reasons: Record<string, number>;
  ms: number;
}

export const mergeReasons = (all: Record<string, number>[]): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const r of all) for (const [k, n] of Object.entries(r)) out[k] = (out[k] ?? 0) + n;
  return out;
};

/** Requests a connection count split evenly over the children; resolves with the added up results. */
export async function connectAll(clients: ClientsChild[], url: string, count: number): Promise<PoolResult> {
  const shares = clients.map((_, i) => Math.floor(count / clients.length) + (i < count % clients.length ? 1 : 0));
  const results = await Promise.all(clients.map((c, i) => c.request<PoolResult>({ cmd: 'connect', url, count: shares[i], concurrency: CONNECT_CONCURRENCY })));
  return {
    ok: results.reduce((n, r) => n + r.ok, 0),
    failed: results.reduce((n, r) => n + r.failed, 0),
    reasons: mergeReasons(results.map((r) => r.reasons)),
    ms: Math.max(...results.map((r) => r.ms)),
  };
}
