// The publish bench's measured runs (run.ts): one run of a load against a child server with its
// CPU per request (all threads and by thread) and event-loop use, a setup's rounds added up, and
// the rounds' note. Split from run.ts, which keeps the setups and their order.
import { runLoad, type LoadResult, type LoadSpec } from './load.js';
import type { ChildServer } from './servers.js';

export const log = (line: string): void => console.log(`[bench] ${line}`);
export const fmt = (r: LoadResult): string =>
  `${Math.round(r.reqPerSec)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.total} requests (${r.statusCodes || 'no responses'}), ` +
  `${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`;
export const failuresOf = (r: LoadResult): number => r.non2xx + r.errors + r.timeouts;

export type Measured = { result: LoadResult; cpuUsPerRequest?: number; rssMiB?: number };

export async function warmUp(spec: LoadSpec, warmupS: number): Promise<void> {
  if (warmupS <= 0) return;
  log(`${spec.label}: warming up for ${warmupS} s`);
  const warm = await runLoad({ ...spec, durationS: warmupS, progressEveryS: 0 });
  if (failuresOf(warm) > 0) log(`${spec.label}: warm-up had failures: ${fmt(warm)}`);
}

/** One measured run, with the server's CPU time per request (all threads, and its main thread). */
export async function measure(spec: LoadSpec, server: ChildServer): Promise<Measured> {
  log(`${spec.label}: measuring for ${spec.durationS} s (${spec.connections} connections, pipelining ${spec.pipelining})`);
  const loopBefore = await server.eventLoop();
  const cpuBefore = server.cpuMs();
  const threadsBefore = server.cpuMsByThread();
  const result = await runLoad(spec);
  const cpuAfter = server.cpuMs();
  const threadsAfter = server.cpuMsByThread();
  const loopAfter = await server.eventLoop();
  const rssMiB = server.rssMiB();
  const cpuUsPerRequest = cpuBefore !== undefined && cpuAfter !== undefined && result.total > 0 ? ((cpuAfter - cpuBefore) * 1000) / result.total : undefined;
  const extra = [
    cpuUsPerRequest === undefined ? undefined : `server CPU ${cpuUsPerRequest.toFixed(1)} µs per request`,
    rssMiB === undefined ? undefined : `RSS ${rssMiB.toFixed(0)} MiB`,
  ].filter((x) => x !== undefined);
  log(`${spec.label}: ${fmt(result)}${extra.length > 0 ? `; ${extra.join(', ')}` : ''}`);
  const threads = [...threadsAfter]
    .map(([name, ms]) => [name, ms - (threadsBefore.get(name) ?? 0)] as const)
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${((ms * 1000) / Math.max(1, result.total)).toFixed(1)} µs (${((ms / 1000 / spec.durationS) * 100).toFixed(0)}% of a core)`);
  if (threads.length > 0) log(`${spec.label}: server CPU per request by thread: ${threads.join(', ')}`);
  // Active near 100% while the main thread had only part of a core: it was short of CPU (the
  // machine's other work), not waiting for I/O; active well under 100%: it waited (a broker, a disk).
  if (loopBefore && loopAfter) {
    const active = loopAfter.active - loopBefore.active;
    const idle = loopAfter.idle - loopBefore.idle;
    if (active + idle > 0) log(`${spec.label}: server main thread's event loop active ${((active / (active + idle)) * 100).toFixed(0)}% of the run, waiting for I/O or timers the rest`);
  }
  return { result, cpuUsPerRequest, rssMiB };
}

/**
 * A setup's rounds added up: req/s over all of them, server CPU per request over all requests,
 * failures summed; latencies are those of its median round (by req/s), RSS that of its last.
 */
export function combined(runs: Measured[]): Measured {
  const byRate = [...runs].sort((a, b) => a.result.reqPerSec - b.result.reqPerSec);
  const mid = byRate[Math.floor((runs.length - 1) / 2)].result;
  const sum = (f: (r: LoadResult) => number): number => runs.reduce((n, r) => n + f(r.result), 0);
  const total = sum((r) => r.total);
  const withCpu = runs.filter((r) => r.cpuUsPerRequest !== undefined);
  return {
    result: {
      reqPerSec: sum((r) => r.reqPerSec) / runs.length,
      p50: mid.p50,
      p99: mid.p99,
      total,
      non2xx: sum((r) => r.non2xx),
      errors: sum((r) => r.errors),
      timeouts: sum((r) => r.timeouts),
      statusCodes: mid.statusCodes,
    },
    cpuUsPerRequest:
      withCpu.length === runs.length ? runs.reduce((n, r) => n + r.cpuUsPerRequest! * r.result.total, 0) / Math.max(1, total) : undefined,
    rssMiB: runs[runs.length - 1].rssMiB,
  };
}

/** The rounds' req/s in order, and the service/bare ratio per round, for the notes. */
export function roundsNote(name: string, bareRuns: Measured[], serviceRuns: Measured[]): string {
  const list = (runs: Measured[]): string => runs.map((r) => Math.round(r.result.reqPerSec).toLocaleString('en-US')).join(', ');
  const ratios = bareRuns.map((r, i) => serviceRuns[i].result.reqPerSec / r.result.reqPerSec).sort((a, b) => a - b);
  return (
    `Throughput rounds (req/s, in order): bare ${list(bareRuns)}; ${name} ${list(serviceRuns)}. ` +
    `${name[0].toUpperCase()}${name.slice(1)}/bare per round: from ${ratios[0].toFixed(2)} to ${ratios[ratios.length - 1].toFixed(2)}, median ${ratios[Math.floor((ratios.length - 1) / 2)].toFixed(2)}.`
  );
}
