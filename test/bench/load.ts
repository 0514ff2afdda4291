// Publish load with autocannon, run in this (the bench) process.
import autocannon from 'autocannon';

export interface LoadSpec {
  label: string;
  url: string;
  /** Paths to POST to; each connection starts at a different one and cycles through them all. */
  paths: string[];
  headers: Record<string, string>;
  body: string;
  connections: number;
  pipelining: number;
  durationS: number;
  /** Requests per second over all connections; unlimited when absent. */
  overallRate?: number;
  /** Print a progress line every this many seconds (0: none). */
  progressEveryS?: number;
}

export interface LoadResult {
  reqPerSec: number;
  /** ms */
  p50: number;
  /** ms */
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** e.g. "201: 51234, 503: 12" */
  statusCodes: string;
}

export interface RunningLoad {
  done: Promise<LoadResult>;
  /** Ends the run early; `done` then resolves with what was measured. */
  stop(): void;
}

export function startLoad(spec: LoadSpec): RunningLoad {
  const requests = spec.paths.map((path) => ({ method: 'POST', path, headers: spec.headers, body: spec.body }));
  let nextClient = 0;
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    pipelining: spec.pipelining,
    duration: spec.durationS,
    overallRate: spec.overallRate,
    method: 'POST',
    headers: spec.headers,
    body: spec.body,
    requests,
    // Spread the connections over the channels instead of having all of them start on the first.
    setupClient: (client) => {
      const k = (nextClient++ * Math.max(1, Math.floor(requests.length / spec.connections))) % requests.length;
      client.setRequests([...requests.slice(k), ...requests.slice(0, k)]);
    },
  });
  const every = spec.progressEveryS ?? 0;
  if (every > 0) {
    let second = 0;
    let counted = 0;
    instance.on('tick', ({ counter }) => {
      second++;
      counted += counter;
      // The tick after the last full second carries only a fraction of one.
      if (second % every === 0 && second <= spec.durationS) {
        console.log(`[bench]   ${spec.label}: ${second} s, ${Math.round(counted / every)} req/s`);
        counted = 0;
      }
    });
  }
  const done = Promise.resolve(instance).then(
    (r): LoadResult => ({
      reqPerSec: r.requests.average,
      p50: r.latency.p50,
      p99: r.latency.p99,
      total: r.requests.total,
      non2xx: r.non2xx,
      errors: r.errors,
      timeouts: r.timeouts,
      statusCodes: Object.entries(r.statusCodeStats)
        .map(([code, { count }]) => `${code}: ${count}`)
        .join(', '),
    }),
  );
  return { done, stop: () => instance.stop() };
}

export const runLoad = (spec: LoadSpec): Promise<LoadResult> => startLoad(spec).done;
