// `BENCH_SOAK=1 npm run bench`: a steady publish and read load on the embedded service for
// BENCH_SOAK_SECONDS (default 600), well below the machine's maximum, sampled every
// BENCH_SOAK_SAMPLE_SECONDS: the server's RSS and heap, and each window's latencies, requests and
// errors. Flat is the aim: a service that leaks or slows down over time shows it here first.
import autocannon from 'autocannon';
import type { BenchOptions } from './options.js';
import type { ServiceChild } from './service-child.js';
import { table } from './report.js';

export interface SoakWindow {
  /** seconds since the load started, at the end of the window */
  atS: number;
  rssMiB?: number;
  heapUsedMiB?: number;
  /** memory outside the JavaScript heap that JavaScript objects hold (ArrayBuffers: the history tail keeps message bytes there) */
  externalMiB?: number;
  publishes: number;
  publishP50: number;
  publishP99: number;
  reads: number;
  readP50: number;
  readP99: number;
  /** non-2xx responses and requests without a response, both loads */
  errors: number;
}

export interface SoakResult {
  windows: SoakWindow[];
  /** the line saying whether RSS and p99 stayed flat, and on what windows */
  verdict: string;
  errors: number;
  statusCodes: string;
}

const DATA = 'soak payload: the quick brown fox jumps over the lazy dog 0123456789';
const PUBLISH_CHANNELS = 1000;
const READ_CHANNELS = 200;
/** The service keeps every channel's last two minutes in memory (HISTORY_TAIL_MS): RSS grows until then. */
const TAIL_S = 120;

/** Latencies of one window (ms, as autocannon reports them, fractional). */
class Window {
  publish: number[] = [];
  read: number[] = [];
  errors = 0;
}

const percentile = (sorted: number[], p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

type ReadMix = BenchOptions['soakReadMix'];

const mixText = (mix: ReadMix): string => `history ${mix.history}%, presence ${mix.presence}%, stats ${mix.stats}%`;

function startLoad(url: string, auth: string, kind: 'publish' | 'read', rate: number, mix: ReadMix, durationS: number, onResponse: (status: number, ms: number) => void, onError: () => void): autocannon.Instance {
  const requests: autocannon.Request[] =
    kind === 'publish'
      ? Array.from({ length: PUBLISH_CHANNELS }, (_, i) => ({
          method: 'POST',
          path: `/channels/soak-${i}/messages`,
          headers: { authorization: auth, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'soak', data: DATA }),
        }))
      : Array.from({ length: READ_CHANNELS }, (_, i) => {
          // History reads most, then presence, then stats, as an application's clients might
          // (BENCH_SOAK_READ_MIX): each 100 requests of the list in those proportions.
          const path =
            i % 100 < mix.history
              ? `/channels/soak-${i * 5}/messages?limit=100`
              : i % 100 < mix.history + mix.presence
                ? `/channels/soak-${i * 5}/presence`
                : '/stats?unit=minute&limit=10';
          return { method: 'GET', path, headers: { authorization: auth } };
        });
  let next = 0;
  const instance = autocannon({
    url,
    connections: 8,
    pipelining: 1,
    duration: durationS,
    overallRate: rate,
    timeout: 10,
    requests,
    setupClient: (client) => {
      const k = (next++ * 37) % requests.length;
      client.setRequests([...requests.slice(k), ...requests.slice(0, k)]);
    },
  });
  instance.on('response', (_client, status, _bytes, ms) => onResponse(status, ms));
  instance.on('reqError', onError);
  return instance;
}

const mib = (bytes: number): number => bytes / 2 ** 20;
const f0 = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(0));
const f1 = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(1));

export function soakTable(windows: SoakWindow[]): string {
  return table(
    ['at s', 'RSS MiB', 'heap used MiB', 'external MiB', 'publishes', 'publish p50 ms', 'publish p99 ms', 'reads', 'read p50 ms', 'read p99 ms', 'errors'],
    windows.map((w) => [String(w.atS), f0(w.rssMiB), f0(w.heapUsedMiB), f0(w.externalMiB), String(w.publishes), f1(w.publishP50), f1(w.publishP99), String(w.reads), f1(w.readP50), f1(w.readP99), String(w.errors)]),
    [true, true, true, true, true, true, true, true, true, true, true],
  );
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/**
 * Flat or not: the last third of the windows against the first third, counting only windows
 * after the in-memory history has filled (two minutes), when there are enough of them. RSS may
 * grow by 10% and p99 by half (plus 1 ms, as latencies here are a few ms) before it is "not flat".
 */
export function verdictOf(windows: SoakWindow[]): string {
  const settled = windows.filter((w) => w.atS > TAIL_S + 1);
  const usable = settled.length >= 3 ? settled : windows;
  const note =
    usable === settled
      ? `windows after the first ${TAIL_S} s, while the in-memory history (2 minutes of every channel) fills and RSS grows by design, are left out`
      : `the run is too short to leave out the first ${TAIL_S} s, while the in-memory history fills and RSS grows by design, so this compares all windows`;
  const third = Math.max(1, Math.floor(usable.length / 3));
  const first = usable.slice(0, third);
  const last = usable.slice(-third);
  const grow = (f: (w: SoakWindow) => number | undefined): { a: number; b: number } => ({
    a: mean(first.map(f).filter((x): x is number => x !== undefined && !Number.isNaN(x))),
    b: mean(last.map(f).filter((x): x is number => x !== undefined && !Number.isNaN(x))),
  });
  const rss = grow((w) => w.rssMiB);
  const heap = grow((w) => w.heapUsedMiB);
  const external = grow((w) => w.externalMiB);
  const pub = grow((w) => w.publishP99);
  const read = grow((w) => w.readP99);
  const rssFlat = rss.b <= rss.a * 1.1;
  const p99Flat = pub.b <= pub.a * 1.5 + 1 && read.b <= read.a * 1.5 + 1;
  return (
    `RSS ${rssFlat ? 'stayed flat' : 'did NOT stay flat'} (${f0(rss.a)} → ${f0(rss.b)} MiB, heap used ${f0(heap.a)} → ${f0(heap.b)} MiB, external ${f0(external.a)} → ${f0(external.b)} MiB) and ` +
    `p99 ${p99Flat ? 'stayed flat' : 'did NOT stay flat'} (publish ${f1(pub.a)} → ${f1(pub.b)} ms, read ${f1(read.a)} → ${f1(read.b)} ms): ` +
    `mean of the last ${third} window${third === 1 ? '' : 's'} against the first ${third}; ${note}.`
  );
}

export async function runSoak(options: BenchOptions, service: ServiceChild, progress: (line: string) => void): Promise<SoakResult> {
  const { url } = service.server;
  const windows: SoakWindow[] = [];
  let current = new Window();
  const statusCounts = new Map<number, number>();
  let errors = 0;
  const count = (status: number): void => {
    statusCounts.set(status, (statusCounts.get(status) ?? 0) + 1);
    if (status < 200 || status >= 300) {
      current.errors++;
      errors++;
    }
  };
  const onError = (): void => {
    current.errors++;
    errors++;
  };
  const started = Date.now();
  const publishes = startLoad(url, service.auth, 'publish', options.soakPublishRate, options.soakReadMix, options.soakS, (s, ms) => (count(s), current.publish.push(ms)), onError);
  const reads = startLoad(url, service.auth, 'read', options.soakReadRate, options.soakReadMix, options.soakS, (s, ms) => (count(s), current.read.push(ms)), onError);
  progress(
    `soak: ${options.soakPublishRate} publishes/s to ${PUBLISH_CHANNELS} channels and ${options.soakReadRate} reads/s (${mixText(options.soakReadMix)}) ` +
      `for ${options.soakS} s, sampled every ${options.soakSampleS} s`,
  );
  console.log(soakTable([]).split('\n').slice(0, 2).join('\n'));

  const sample = async (): Promise<void> => {
    const w = current;
    current = new Window();
    const memory = await service.server.memoryUsage(options.soakGc);
    const pub = w.publish.sort((a, b) => a - b);
    const read = w.read.sort((a, b) => a - b);
    const row: SoakWindow = {
      atS: Math.round((Date.now() - started) / 1000),
      rssMiB: service.server.rssMiB() ?? (memory ? mib(memory.rss) : undefined),
      heapUsedMiB: memory ? mib(memory.heapUsed) : undefined,
      externalMiB: memory ? mib(memory.external) : undefined,
      publishes: pub.length,
      publishP50: percentile(pub, 50),
      publishP99: percentile(pub, 99),
      reads: read.length,
      readP50: percentile(read, 50),
      readP99: percentile(read, 99),
      errors: w.errors,
    };
    windows.push(row);
    // The table's rows, one by one, as progress.
    console.log(soakTable([row]).split('\n')[2]);
  };
  const timer = setInterval(() => void sample(), options.soakSampleS * 1000);
  try {
    await Promise.all([publishes, reads]);
  } finally {
    clearInterval(timer);
  }
  // The tail of the run, when it is at least half a window.
  if (Date.now() - started - (windows.at(-1)?.atS ?? 0) * 1000 >= (options.soakSampleS * 1000) / 2) await sample();
  const statusCodes = [...statusCounts.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ');
  return { windows, verdict: verdictOf(windows), errors, statusCodes };
}

/** The soak's section of test/bench/last-results.md. */
export function soakMarkdown(options: BenchOptions, command: string, machine: string, result: SoakResult): string {
  return [
    `**Soak.** Measured ${new Date().toISOString().slice(0, 10)} with \`${command}\` on ${machine}. ` +
      `The embedded service in a child process, under ${options.soakPublishRate} publishes/s (one ${JSON.stringify({ name: 'soak', data: DATA }).length}-byte message each, ` +
      `spread over ${PUBLISH_CHANNELS} channels) and ${options.soakReadRate} reads/s (${mixText(options.soakReadMix).replace('history', `history of ${READ_CHANNELS} of those channels`)}), ` +
      `both at a fixed rate from autocannon (8 connections each) for ${options.soakS} s; every ${options.soakSampleS} s: the server's RSS (/proc), heap used${options.soakGc ? ' after a forced full GC' : ''} and external memory (process.memoryUsage over IPC; external holds the ArrayBuffers where the history tail keeps message bytes), ` +
      `and that window's requests and latency percentiles.`,
    '',
    soakTable(result.windows),
    '',
    `- ${result.verdict}`,
    `- Responses: ${result.statusCodes || 'none'}; ${result.errors} errors (non-2xx or no response).`,
  ].join('\n');
}
