// The realtime rows of `npm run bench`, for the bare `ws` baseline and the service side by side:
// memory per idle connection and per attachment, fan-out throughput in rounds alternating between
// the two and publish → delivered latency (one channel with 1,000 subscribers; 1,000 channels with
// 10 each), and the most connections each holds. The clients are raw `ws` connections in
// load-generator children (realtime-clients.ts), each server with its own, each child holding an
// equal share of every channel's subscribers and publishing over realtime MESSAGE frames from
// connections of its own.
import WebSocket from 'ws';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildServer } from './servers.js';
import { connectAll, mergeReasons, startClients, type ClientsChild, type PoolResult } from './realtime-children.js';
import { LatencyHistogram } from './latency-histogram.js';
import type { CountersSnapshot } from './realtime-clients.js';

const ATTACH_CONCURRENCY = 256;
/** publisher connections per load-generator child */
export const PUBLISHERS = 64;
/** A closed-loop publish run keeps about this many deliveries in flight (published, not yet received). */
export const DELIVERIES_IN_FLIGHT = 8_000;
/** seconds of publishing before each measured run */
export const WARMUP_S = 1;
/** the ramp's connections are counted again after this pause */
export const RAMP_HOLD_MS = 2000;
/** a progress line every this many seconds of a measured run: delivered/s and the longest latency seen */
const PROGRESS_EVERY_S = 1;
/** How long a run waits for the last deliveries after its publishers stop. */
export const DRAIN_MS = 5_000;
export const PAYLOAD = 'realtime bench: the quick brown fox jumps over the lazy dog 0123456789';
// USER_HZ, as in servers.ts
const CLOCK_TICKS_PER_S = 100;
/** A core counts as saturated above this share of its time. */
export const SATURATED = 0.9;

export interface RealtimeOptions {
  /** load-generator children */
  clients: number;
  /** throughput rounds per scenario and server, alternating between the servers */
  rounds: number;
  /** seconds of each measured throughput round */
  roundS: number;
  /** seconds of each latency run */
  latencyS: number;
  /** the connection ramp stops here */
  maxConnections: number;
  /** connections added per ramp step */
  rampStep: number;
}

interface Scenario {
  name: string;
  channels: string[];
  /** subscribers per channel, all children together */
  fanout: number;
  /** publishes per second of the "idle" latency run */
  idleRate: number;
}

export interface LatencyRow {
  load: string;
  publishesPerS: number;
  p50: number;
  p99: number;
  max: number;
  deliveries: number;
  lost: number;
  nacked: number;
}

export interface FanoutRow {
  scenario: string;
  deliveredPerS: number;
  publishesPerS: number;
  /** delivered/s of each round, in order */
  rounds: number[];
  /** mean delivery frame, bytes */
  frameBytes: number;
  /** share of a core over the measured run */
  serverMain: number;
  serverOthers: number;
  clients: number[];
  /** CPU the rest of the machine used meanwhile, share of one core */
  elsewhere: number;
  /** latency of the closed-loop run itself */
  p50: number;
  p99: number;
  lost: number;
  nacked: number;
  latency: LatencyRow[];
  /** why the scenario stopped early: its figures are missing or partial */
  error?: string;
}

export interface RealtimeServerResult {
  setup: string;
  idleConnections: number;
  perConnection: { rssKiB?: number; heapKiB?: number };
  attachments: number;
  perAttachment: { rssKiB?: number; heapKiB?: number };
  fanout: FanoutRow[];
  maxConnections: { held: number; requested: number; stoppedBy: string; rssMiB?: number; openFilesLimit?: number };
  /** what the clients saw go wrong, by reason, over the whole run */
  problems: Record<string, number>;
  failed: boolean;
}

interface ReadResult {
  counters: CountersSnapshot;
  problems: Record<string, number>;
  unexpectedCloses: number;
  held: number;
  inFlight: number;
}

/** Busy CPU time of the whole machine so far (all cores; /proc/stat), ms; 0 where it is missing. */
function machineBusyMs(): number {
  try {
    // cpu  user nice system idle iowait irq softirq steal ...
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    return ((total - fields[3] - fields[4]) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return 0;
  }
}

/** A process's limit of open files (each connection holds one), from /proc/<pid>/limits. */
function openFilesLimitOf(pid: number): number | undefined {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

export const int = (n: number): string => Math.round(n).toLocaleString('en-US');
export const pct = (share: number): string => `${Math.round(share * 100)}%`;
export const reasonsText = (reasons: Record<string, number>): string =>
  Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([r, n]) => `${r} ×${n}`)
    .join(', ');

function sum(reads: ReadResult[]): { c: Omit<CountersSnapshot, 'latency'>; latency: LatencyHistogram } {
  const latency = new LatencyHistogram();
  const c = { delivered: 0, published: 0, acked: 0, nacked: 0, lost: 0, frames: 0, bytes: 0 };
  for (const r of reads) {
    for (const k of Object.keys(c) as (keyof typeof c)[]) c[k] += r.counters[k];
    latency.merge(r.counters.latency);
  }
  return { c, latency };
}


async function memoryOf(server: ChildServer): Promise<{ rssMiB?: number; heapMiB?: number }> {
  await sleep(300);
  const m = await server.memoryUsage(true);
  return { rssMiB: server.rssMiB(), heapMiB: m ? (m.heapUsed + m.external) / 2 ** 20 : undefined };
}

const perKiB = (before: number | undefined, after: number | undefined, n: number): number | undefined =>
  before === undefined || after === undefined || n === 0 ? undefined : ((after - before) * 1024) / n;

class Run {
  constructor(
    private readonly clients: ClientsChild[],
    private readonly server: ChildServer,
    private readonly wsUrl: string,
    private readonly label: string,
    private readonly log: (line: string) => void,
  ) {}

  private all<T>(command: Record<string, unknown>): Promise<T[]> {
    return Promise.all(this.clients.map((c) => c.request<T>(command)));
  }

  /** Waits until every published message reached all its subscribers, or nothing arrived for DRAIN_MS. */
  private async drain(fanout: number): Promise<ReadResult[]> {
    let last = -1;
    let since = Date.now();
    for (;;) {
      const reads = await this.all<ReadResult>({ cmd: 'read', which: 'run' });
      const { c } = sum(reads);
      if (c.delivered >= c.published * fanout) return reads;
      if (c.delivered !== last) {
        last = c.delivered;
        since = Date.now();
      } else if (Date.now() - since > DRAIN_MS) return reads;
      await sleep(100);
    }
  }

  /** One publish run: closed loop (window) or open loop (rate); measures after a warm-up. */
  async publishRun(
    scenario: Scenario,
    how: { window: number } | { rate: number },
    measureS: number,
    warmS: number,
    progressLabel: string,
  ): Promise<Measured> {
    const n = this.clients.length;
    await this.all({ cmd: 'reset', which: 'run' });
    const perChild = 'window' in how ? { window: Math.max(1, Math.round(how.window / n)) } : { rate: how.rate / n };
    await this.all({ cmd: 'publish', url: this.wsUrl, publishers: PUBLISHERS, channels: scenario.channels, payload: PAYLOAD, ...perChild });
    let stopped = false;
    try {
      await sleep(warmS * 1000);
      await this.all({ cmd: 'reset', which: 'window' });
      const started = Date.now();
      const threadsBefore = this.server.cpuMsByThread();
      const clientsBefore = this.clients.map((c) => c.cpuMs());
      const machineBefore = machineBusyMs();
      let lastDelivered = 0;
      for (let s = 1; s <= measureS; s++) {
        await sleep(started + s * 1000 - Date.now());
        if (s % PROGRESS_EVERY_S === 0 || s === measureS) {
          const peeks = await this.all<{ delivered: number; published: number; maxUs: number }>({ cmd: 'peek' });
          const delivered = peeks.reduce((x, p) => x + p.delivered, 0);
          const maxMs = Math.max(...peeks.map((p) => p.maxUs)) / 1000;
          this.log(`  ${progressLabel}: ${s} s, ${int((delivered - lastDelivered) / (s % PROGRESS_EVERY_S === 0 ? PROGRESS_EVERY_S : s % PROGRESS_EVERY_S))} delivered/s, latency up to ${maxMs.toFixed(0)} ms`);
          lastDelivered = delivered;
        }
      }
      const reads = await this.all<ReadResult>({ cmd: 'read', which: 'window' });
      const seconds = (Date.now() - started) / 1000;
      const threadsAfter = this.server.cpuMsByThread();
      const clients = this.clients.map((c, i) => (c.cpuMs() - clientsBefore[i]) / 1000 / seconds);
      const machine = (machineBusyMs() - machineBefore) / 1000 / seconds;
      const share = (thread: string): number => ((threadsAfter.get(thread) ?? 0) - (threadsBefore.get(thread) ?? 0)) / 1000 / seconds;
      await this.all({ cmd: 'stop-publish' });
      stopped = true;
      const run = sum(await this.drain(scenario.fanout));
      const serverMain = share('main');
      const serverOthers = share('others');
      // Everything else the machine ran meanwhile: the other server, the bench process, other work.
      const elsewhere = Math.max(0, machine - serverMain - serverOthers - clients.reduce((a, b) => a + b, 0));
      return { window: sum(reads), run, seconds, serverMain, serverOthers, clients, elsewhere };
    } finally {
      if (!stopped) await this.all({ cmd: 'stop-publish' }).catch(() => undefined);
    }
  }

  /** One closed-loop round: about DELIVERIES_IN_FLIGHT deliveries in flight, measured after a second of warm-up. */
  async throughputRound(scenario: Scenario, o: RealtimeOptions, round: number): Promise<Measured> {
    const window = Math.max(this.clients.length, Math.round(DELIVERIES_IN_FLIGHT / scenario.fanout));
    const tag = `${this.label}, ${scenario.name}, round ${round}`;
    const t = await this.publishRun(scenario, { window }, o.roundS, WARMUP_S, tag);
    this.log(
      `${tag}: ${int(t.window.c.delivered / t.seconds)} delivered/s (${int(t.window.c.published / t.seconds)} publishes/s, ${window} in flight); ` +
        `server main thread ${pct(t.serverMain)} of a core, other threads ${pct(t.serverOthers)}, clients ${t.clients.map(pct).join(' + ')}, rest of the machine ${pct(t.elsewhere)}; ` +
        `${int(t.run.c.delivered)} of ${int(t.run.c.published * scenario.fanout)} deliveries arrived, ${t.run.c.nacked} NACKs`,
    );
    return t;
  }

  /** Publish → delivered latency at a fixed rate. */
  async latency(scenario: Scenario, load: string, rate: number, o: RealtimeOptions): Promise<LatencyRow> {
    const tag = `${this.label}, ${scenario.name}, ${load}`;
    this.log(`${tag}: publish → delivered latency at ${int(rate)} publishes/s (${int(rate * scenario.fanout)} deliveries/s) for ${o.latencyS} s`);
    const l = await this.publishRun(scenario, { rate }, o.latencyS, WARMUP_S, tag);
    const row: LatencyRow = {
      load: `${load}: ${int(rate)} publishes/s`,
      publishesPerS: l.window.c.published / l.seconds,
      p50: l.window.latency.percentileMs(50),
      p99: l.window.latency.percentileMs(99),
      max: l.window.latency.max / 1000,
      deliveries: l.window.latency.total,
      lost: l.run.c.published * scenario.fanout - l.run.c.delivered,
      nacked: l.run.c.nacked,
    };
    this.log(
      `${tag}: p50 ${row.p50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)} ms, max ${row.max.toFixed(1)} ms over ${int(row.deliveries)} deliveries; ` +
        `server main thread ${pct(l.serverMain)}, clients ${l.clients.map(pct).join(' + ')}, rest of the machine ${pct(l.elsewhere)}; ${row.lost} lost, ${row.nacked} NACKs`,
    );
    return row;
  }
}

type Summed = ReturnType<typeof sum>;
interface Measured {
  window: Summed;
  run: Summed;
  seconds: number;
  serverMain: number;
  serverOthers: number;
  clients: number[];
  /** CPU the rest of the machine used meanwhile (cores' worth) */
  elsewhere: number;
}

/** A server's rounds added up: rates and CPU shares over all of them, latencies of all deliveries measured. */
function combined(scenario: Scenario, rounds: Measured[]): FanoutRow {
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0);
  const total = (f: (r: Measured) => number): number => rounds.reduce((n, r) => n + f(r), 0);
  const latency = new LatencyHistogram();
  for (const r of rounds) latency.merge(r.window.latency);
  const frames = total((r) => r.window.c.frames);
  return {
    scenario: scenario.name,
    deliveredPerS: total((r) => r.window.c.delivered) / seconds,
    publishesPerS: total((r) => r.window.c.published) / seconds,
    rounds: rounds.map((r) => r.window.c.delivered / r.seconds),
    frameBytes: frames > 0 ? total((r) => r.window.c.bytes) / frames : 0,
    serverMain: total((r) => r.serverMain * r.seconds) / seconds,
    serverOthers: total((r) => r.serverOthers * r.seconds) / seconds,
    clients: rounds[0].clients.map((_, i) => total((r) => r.clients[i] * r.seconds) / seconds),
    elsewhere: total((r) => r.elsewhere * r.seconds) / seconds,
    p50: latency.percentileMs(50),
    p99: latency.percentileMs(99),
    lost: total((r) => r.run.c.published * scenario.fanout - r.run.c.delivered),
    nacked: total((r) => r.run.c.nacked),
    latency: [],
  };
}

const EMPTY_ROW: FanoutRow = {
  scenario: '',
  deliveredPerS: Number.NaN,
  publishesPerS: Number.NaN,
  rounds: [],
  frameBytes: Number.NaN,
  serverMain: Number.NaN,
  serverOthers: Number.NaN,
  clients: [],
  elsewhere: Number.NaN,
  p50: Number.NaN,
  p99: Number.NaN,
  lost: 0,
  nacked: 0,
  latency: [],
};

export const SCENARIOS = {
  one: { name: '1 channel × 1,000 subscribers', channels: ['rt-fan'], fanout: 1000, idleRate: 10 },
  many: { name: '1,000 channels × 10 subscribers', channels: Array.from({ length: 1000 }, (_, i) => `rt-${i}`), fanout: 10, idleRate: 100 },
} satisfies Record<string, Scenario>;

export interface RealtimeTarget {
  setup: string;
  server: ChildServer;
  /** the WebSocket URL with its query (auth, format) */
  wsUrl: string;
}

interface Side {
  target: RealtimeTarget;
  clients: ClientsChild[];
  run: Run;
  result: RealtimeServerResult;
}

/**
 * A server's load generators and connections: the 10,000 connections of the 1,000-channel
 * scenario are opened (memory per idle connection), then attached (memory per attachment); the
 * first 1,000 of them also attach the one fan-out channel.
 */
async function prepare(target: RealtimeTarget, o: RealtimeOptions, log: (line: string) => void): Promise<Side> {
  const { setup, server, wsUrl } = target;
  log(`${setup}: starting ${o.clients} load-generator children`);
  const clients = await Promise.all(Array.from({ length: o.clients }, (_, i) => startClients(i)));
  const side: Side = {
    target,
    clients,
    run: new Run(clients, server, wsUrl, setup, log),
    result: {
      setup,
      idleConnections: 0,
      perConnection: {},
      attachments: 0,
      perAttachment: {},
      fanout: [],
      maxConnections: { held: 0, requested: 0, stoppedBy: 'not measured' },
      problems: {},
      failed: false,
    },
  };
  const many = SCENARIOS.many;
  const connections = many.channels.length * many.fanout;
  const m0 = await memoryOf(server);
  log(`${setup}: opening ${int(connections)} connections (RSS ${m0.rssMiB?.toFixed(0)} MiB, heap ${m0.heapMiB?.toFixed(1)} MiB)`);
  const opened = await connectAll(clients, wsUrl, connections);
  const m1 = await memoryOf(server);
  log(`${setup}: ${int(opened.ok)} connected in ${(opened.ms / 1000).toFixed(1)} s${opened.failed ? `, ${opened.failed} failed: ${reasonsText(opened.reasons)}` : ''} (RSS ${m1.rssMiB?.toFixed(0)} MiB, heap ${m1.heapMiB?.toFixed(1)} MiB)`);
  if (opened.failed > 0) side.result.failed = true;

  const shares = await Promise.all(clients.map((c) => c.request<ReadResult>({ cmd: 'read', which: 'run' })));
  const attachedResults = await Promise.all(
    clients.map((c, i) => c.request<PoolResult>({ cmd: 'attach', channels: many.channels, first: 0, count: shares[i].held, concurrency: ATTACH_CONCURRENCY })),
  );
  const attached = attachedResults.reduce((n, r) => n + r.ok, 0);
  const m2 = await memoryOf(server);
  log(
    `${setup}: ${int(attached)} attached to ${int(many.channels.length)} channels in ${(Math.max(...attachedResults.map((r) => r.ms)) / 1000).toFixed(1)} s` +
      `${attached < opened.ok ? `, ${opened.ok - attached} failed: ${reasonsText(mergeReasons(attachedResults.map((r) => r.reasons)))}` : ''} (RSS ${m2.rssMiB?.toFixed(0)} MiB, heap ${m2.heapMiB?.toFixed(1)} MiB)`,
  );
  if (attached < opened.ok) side.result.failed = true;
  Object.assign(side.result, {
    idleConnections: opened.ok,
    perConnection: { rssKiB: perKiB(m0.rssMiB, m1.rssMiB, opened.ok), heapKiB: perKiB(m0.heapMiB, m1.heapMiB, opened.ok) },
    attachments: attached,
    perAttachment: { rssKiB: perKiB(m1.rssMiB, m2.rssMiB, attached), heapKiB: perKiB(m1.heapMiB, m2.heapMiB, attached) },
  });

  const one = SCENARIOS.one;
  const oneResults = await Promise.all(
    clients.map((c) => c.request<PoolResult>({ cmd: 'attach', channels: one.channels, first: 0, count: one.fanout / clients.length, concurrency: ATTACH_CONCURRENCY })),
  );
  if (oneResults.some((r) => r.failed > 0)) {
    side.result.failed = true;
    log(`${setup}: attaching ${one.channels[0]} failed: ${reasonsText(mergeReasons(oneResults.map((r) => r.reasons)))}`);
  }
  return side;
}

/** Idle connections added in steps until the cap or the first failure; "held" is counted after a pause. */
async function ramp(side: Side, o: RealtimeOptions, log: (line: string) => void): Promise<void> {
  const { setup, server, wsUrl } = side.target;
  const read = (): Promise<ReadResult[]> => Promise.all(side.clients.map((c) => c.request<ReadResult>({ cmd: 'read', which: 'run' })));
  let held = (await read()).reduce((n, r) => n + r.held, 0);
  let stoppedBy = `the cap (BENCH_RT_MAX_CONNECTIONS=${o.maxConnections})`;
  let requested = held;
  log(`${setup}: ramp from ${int(held)} connections, ${int(o.rampStep)} a step, up to ${int(o.maxConnections)}`);
  while (requested < o.maxConnections) {
    const step = Math.min(o.rampStep, o.maxConnections - requested);
    requested += step;
    const r = await connectAll(side.clients, wsUrl, step);
    held += r.ok;
    log(`${setup}: ramp: ${int(held)} connections (+${int(r.ok)} in ${(r.ms / 1000).toFixed(1)} s${r.failed ? `, ${r.failed} failed: ${reasonsText(r.reasons)}` : ''}), RSS ${server.rssMiB()?.toFixed(0)} MiB`);
    if (r.failed > 0) {
      stoppedBy = `${r.failed} of the last ${int(step)} failed: ${reasonsText(r.reasons)}`;
      break;
    }
  }
  await sleep(RAMP_HOLD_MS);
  const reads = await read();
  const stillHeld = reads.reduce((n, r) => n + r.held, 0);
  if (stillHeld < held) log(`${setup}: ${held - stillHeld} connections closed during the hold`);
  side.result.maxConnections = { held: stillHeld, requested, stoppedBy, rssMiB: server.rssMiB(), openFilesLimit: openFilesLimitOf(server.pid) };
  side.result.problems = mergeReasons(reads.map((r) => r.problems));
  if (Object.keys(side.result.problems).length > 0) log(`${setup}: the clients saw: ${reasonsText(side.result.problems)}`);
}

/**
 * Every realtime measurement of the targets (targets[0] is the baseline): connections and memory
 * for each, then per scenario the throughput rounds alternating between them (first target first
 * in odd rounds, last first in even ones, so that both see the same machine), each one's latency
 * at idle and at half its own throughput, and last the connection ramp of each in turn, with the
 * load generators of the targets already ramped closed.
 */
export async function realtimeBench(targets: RealtimeTarget[], o: RealtimeOptions, log: (line: string) => void): Promise<RealtimeServerResult[]> {
  if (10 % o.clients !== 0) throw new Error(`BENCH_RT_CLIENTS=${o.clients}: the load-generator children must share 10 subscribers per channel evenly (1, 2, 5 or 10)`);
  const sides: Side[] = [];
  try {
    for (const target of targets) sides.push(await prepare(target, o, log));
    for (const scenario of [SCENARIOS.one, SCENARIOS.many]) {
      const rounds = sides.map((): Measured[] => []);
      const errors = sides.map((): string | undefined => undefined);
      log(`${scenario.name}: fan-out throughput, ${o.rounds} alternating rounds of ${o.roundS} s after ${WARMUP_S} s of warm-up each`);
      for (let round = 1; round <= o.rounds; round++) {
        const order = sides.map((_, i) => i);
        if (round % 2 === 0) order.reverse();
        for (const i of order) {
          if (errors[i]) continue;
          try {
            rounds[i].push(await sides[i].run.throughputRound(scenario, o, round));
          } catch (err) {
            errors[i] = (err as Error).message;
            log(`${sides[i].target.setup}, ${scenario.name}: failed: ${errors[i]}`);
          }
        }
      }
      const rows = sides.map((_, i): FanoutRow => {
        const error = errors[i];
        if (error || rounds[i].length === 0) return { ...EMPTY_ROW, scenario: scenario.name, latency: [], error: error ?? 'no round measured' };
        return combined(scenario, rounds[i]);
      });
      for (const [i, row] of rows.entries()) {
        if (row.error) continue;
        const vs = rows[0].error ? '' : `, ${(row.deliveredPerS / rows[0].deliveredPerS).toFixed(2)} of ${sides[0].target.setup}`;
        log(`${sides[i].target.setup}, ${scenario.name}: ${int(row.deliveredPerS)} delivered/s over ${rounds[i].length} rounds${vs}`);
      }
      const loads: [string, (row: FanoutRow) => number][] = [
        ['idle', () => scenario.idleRate],
        ['half of max', (row) => Math.max(1, Math.round(row.publishesPerS / 2))],
      ];
      for (const [load, rateOf] of loads) {
        for (const [i, side] of sides.entries()) {
          const row = rows[i];
          if (row.error) continue;
          try {
            row.latency.push(await side.run.latency(scenario, load, rateOf(row), o));
          } catch (err) {
            row.error = (err as Error).message;
            log(`${side.target.setup}, ${scenario.name}, ${load}: failed: ${row.error}`);
          }
        }
      }
      sides.forEach((side, i) => side.result.fanout.push(rows[i]));
    }
    for (const side of sides) {
      await ramp(side, o, log);
      await Promise.all(side.clients.map((c) => c.stop()));
    }
  } finally {
    await Promise.all(sides.flatMap((side) => side.clients.map((c) => c.stop())));
  }
  for (const side of sides) {
    const r = side.result;
    if (r.fanout.some((f) => f.error || f.lost > 0 || f.nacked > 0 || f.latency.some((l) => l.lost > 0 || l.nacked > 0))) r.failed = true;
  }
  return sides.map((side) => side.result);
}

/** The WebSocket URL of a server's realtime interface, with the query the SDK sends in Node (JSON). */
export function realtimeUrl(httpUrl: string, auth: string): string {
  return `${httpUrl.replace(/^http/, 'ws')}/?${auth ? `${auth}&` : ''}format=json&heartbeats=false&v=6`;
}

/** One connection, to see whether the server speaks realtime at all: undefined, or why not. */
export function probeRealtime(url: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const done = (reason?: string): void => {
      clearTimeout(timer);
      ws.terminate();
      resolve(reason);
    };
    const timer = setTimeout(() => done('no CONNECTED within 5 s'), 5000);
    ws.on('unexpected-response', (_req, res) => done(`the WebSocket upgrade was answered with HTTP ${res.statusCode}`));
    ws.on('error', (err: NodeJS.ErrnoException) => done(`WebSocket error ${err.code ?? err.message}`));
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as { action: number; error?: { code: number; message: string } };
      done(frame.action === 4 ? undefined : `first frame: action ${frame.action}${frame.error ? ` (${frame.error.code} ${frame.error.message})` : ''}`);
    });
  });
}
