// Servers under test run in child processes, so that the load generator (this process) and the
// server are separate processes sharing the machine's cores like real clients and servers.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXIT_WITH_PARENT = fileURLToPath(new URL('./exit-with-parent.ts', import.meta.url));
const ECHOED_LINES = 20;
// USER_HZ, 100 on every mainstream Linux build.
const CLOCK_TICKS_PER_S = 100;
const KEPT_LINES = 50;

export interface ServerSpec {
  name: string;
  /** TypeScript entry file, run with `node --import tsx` */
  entry: string;
  /** The child's whole environment besides PATH, HOME, HOST and PORT: nothing else leaks in. */
  env: Record<string, string>;
  /** Polled until it answers (any status): the server is listening. */
  readyPath: string;
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}

export interface ChildServer {
  name: string;
  url: string;
  pid: number;
  /** The child's last lines of output. */
  output(): string[];
  /** CPU time the child has used so far (user + system), ms; undefined where /proc is missing. */
  cpuMs(): number | undefined;
  /** CPU time so far of the main thread ("main") and of all other threads ("others": the log writer, GC helpers, libuv), ms. */
  cpuMsByThread(): Map<string, number>;
  /** The child's resident memory now, MiB; undefined where /proc is missing. */
  rssMiB(): number | undefined;
  /**
   * The child's process.memoryUsage(), asked over IPC; undefined when it does not answer (the bare
   * server). afterGc: after a full GC, when the child runs with --expose-gc.
   */
  memoryUsage(afterGc?: boolean): Promise<NodeJS.MemoryUsage | undefined>;
  /**
   * The child's main-thread event loop so far (performance.eventLoopUtilization over IPC): ms it ran
   * callbacks (active) and ms it waited in the poll for I/O or timers (idle); undefined when it does
   * not answer. Beside the main thread's CPU time it tells a wait from a shortage of CPU: a loop
   * active nearly all the time that got only part of a core was waiting for the machine, not for I/O.
   */
  eventLoop(): Promise<EventLoopTime | undefined>;
  /** SIGTERM (graceful close), then SIGKILL if it has not exited in time. */
  stop(): Promise<void>;
}

export interface EventLoopTime {
  active: number;
  idle: number;
}

const live = new Set<ChildProcess>();

/** Kills every child still running; for process exit, where only synchronous work runs. */
export function killAllNow(): void {
  for (const child of live) child.kill('SIGKILL');
}

export async function startServer(spec: ServerSpec): Promise<ChildServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [...(spec.nodeArgs ?? []), '--import', 'tsx', '--import', EXIT_WITH_PARENT, spec.entry], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...(process.env.KAFKA_LINGER_MS ? { KAFKA_LINGER_MS: process.env.KAFKA_LINGER_MS } : {}), ...spec.env, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  live.add(child);
  let exitStatus: string | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      live.delete(child);
      exitStatus = signal ?? `code ${code}`;
      resolve();
    }),
  );

  const lines: string[] = [];
  let echoed = 0;
  const onLine = (line: string): void => {
    lines.push(line);
    if (lines.length > KEPT_LINES) lines.shift();
    if (echoed < ECHOED_LINES) console.log(`  [${spec.name}] ${line}`);
    else if (echoed === ECHOED_LINES) console.log(`  [${spec.name}] (further output not shown)`);
    echoed++;
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);

  const stop = async (): Promise<void> => {
    if (exitStatus !== undefined) return;
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(kill);
  };

  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (spec.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exitStatus !== undefined) throw new StartError(spec.name, `exited (${exitStatus}) before listening`, lines);
    if (Date.now() > deadline) {
      await stop();
      throw new StartError(spec.name, `not listening after ${spec.readyTimeoutMs ?? 60_000} ms`, lines);
    }
    try {
      await fetch(url + spec.readyPath, { signal: AbortSignal.timeout(1000) });
      break;
    } catch {
      await sleep(100);
    }
  }
  const pid = child.pid!;
  /** Sends `request` over IPC and resolves with the answer's `key`, or undefined after 2 s. */
  const ask = <T>(request: string, key: string): Promise<T | undefined> =>
    new Promise((resolve) => {
      if (exitStatus !== undefined || !child.connected) return resolve(undefined);
      const timer = setTimeout(() => {
        child.off('message', onMessage);
        resolve(undefined);
      }, 2000);
      const onMessage = (m: unknown): void => {
        if (typeof m !== 'object' || m === null || !(key in m)) return;
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve((m as Record<string, T>)[key]);
      };
      child.on('message', onMessage);
      child.send(request);
    });
  const memoryUsage = (afterGc = false): Promise<NodeJS.MemoryUsage | undefined> => ask(afterGc ? 'memory-gc' : 'memory', 'memory');
  const eventLoop = (): Promise<EventLoopTime | undefined> => ask('event-loop', 'eventLoop');
  return { name: spec.name, url, pid, output: () => [...lines], cpuMs: () => cpuMsOf(pid), cpuMsByThread: () => cpuMsByThreadOf(pid), rssMiB: () => rssMiBOf(pid), memoryUsage, eventLoop, stop };
}

/** utime + stime from /proc/<pid>/stat, in ms (the kernel counts in ticks of 10 ms). */
export function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}

/** utime + stime of the main thread and of the others together (/proc/<pid>/task), in ms. */
function cpuMsByThreadOf(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : 'others';
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
      byName.set(name, (byName.get(name) ?? 0) + ms);
    } catch {
      // the thread ended meanwhile
    }
  }
  return byName;
}

export function rssMiBOf(pid: number): number | undefined {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}

/** A child that did not come up; `reason` is the most telling line of its output. */
export class StartError extends Error {
  readonly reason: string;
  constructor(name: string, what: string, output: string[]) {
    const telling =
      output.find((l) => /^(failed to start|configuration error)/.test(l)) ??
      output.find((l) => /^\s*(\w*Error\b|\[?ERR_)/.test(l)) ??
      output.filter((l) => l.trim() !== '' && !/^\s+at |^Node\.js v/.test(l)).at(-1);
    const reason = telling ? `${what}: ${telling.trim()}` : what;
    super(`${name} ${reason}`);
    this.reason = reason.length > 300 ? `${reason.slice(0, 300)}…` : reason;
  }
}

/** A free port on loopback (the child binds it right after; nothing else races for it here). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
