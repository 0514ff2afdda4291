// The comet row of the realtime bench: the same service child delivering one channel's messages to
// subscribers over WebSocket and over comet (HTTP long polling), side by side in alternating
// rounds. Publishers are the same WebSocket connections in both; only the subscribers' transport
// differs. The clients run in the bench's own process (both transports alike): raw `ws` sockets,
// and comet clients on node:http with a keep-alive agent, as the SDK's Node comet transport is.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { LatencyHistogram } from './latency-histogram.js';
import { table } from './report.js';

/** Subscribers of each transport in the realtime bench's comet rows. */
export const COMET_SUBSCRIBERS = 200;

export interface CometBenchOptions {
  subscribers: number;
  rounds: number;
  roundS: number;
  latencyS: number;
}

export interface CometRow {
  transport: 'WebSocket' | 'comet';
  deliveredPerS: number;
  rounds: number[];
  /** closed-loop run */
  p50: number;
  p99: number;
  /** fixed-rate run */
  idleRate: number;
  idleP50: number;
  idleP99: number;
  lost: number;
  /** HTTP requests a comet subscriber made per delivered message (0 for WebSocket) */
  requestsPerMessage: number;
}

/** Publisher connections, each under REALTIME_MAX_INBOUND_RATE (100 frames/s). */
const PUBLISHERS = 16;
const PUBLISH_INTERVAL_MS = 11;
/** Deliveries kept in flight by the closed-loop run (published × subscribers − delivered). */
const WINDOW = 4_000;
const WARMUP_S = 1;
const IDLE_RATE = 20;
const DRAIN_MS = 5_000;
const PAYLOAD = 'comet bench: the quick brown fox jumps over the lazy dog 0123456789';

interface Counters {
  delivered: number;
  requests: number;
  latency: LatencyHistogram;
}

interface Subscriber {
  close(): void;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

function request(url: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: body === undefined ? 'GET' : 'POST', agent, headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

type Pm = { action: number; messages?: { data?: string }[]; connectionDetails?: { connectionKey?: string } };

/** Counts a MESSAGE frame's deliveries and their latency (the data carries its send time). */
function received(pm: Pm, c: Counters): void {
  if (pm.action !== 15) return;
  const now = performance.now();
  for (const m of pm.messages ?? []) {
    c.delivered++;
    const sent = Number(String(m.data).split('|')[0]);
    if (Number.isFinite(sent)) c.latency.add((now - sent) * 1000);
  }
}

async function webSocketSubscriber(wsUrl: string, channel: string, c: Counters): Promise<Subscriber> {
  const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    ws.once('error', reject);
    ws.on('message', (data: Buffer) => {
      const pm = JSON.parse(data.toString()) as Pm;
      if (pm.action === 4) ws.send(JSON.stringify({ action: 10, channel }));
      else if (pm.action === 11) resolve();
      else received(pm, c);
    });
  });
  return { close: () => ws.close() };
}

async function cometSubscriber(httpUrl: string, auth: string, channel: string, c: Counters): Promise<Subscriber> {
  const connect = await request(`${httpUrl}/comet/connect?${auth}&v=6`);
  const [connected] = JSON.parse(connect.text) as Pm[];
  const key = connected.connectionDetails?.connectionKey;
  if (!key) throw new Error(`comet connect: ${connect.text.slice(0, 200)}`);
  const base = `${httpUrl}/comet/${encodeURIComponent(key)}`;
  await request(`${base}/send?${auth}`, JSON.stringify([{ action: 10, channel }]));
  let open = true;
  let attached: () => void = () => {};
  const ready = new Promise<void>((resolve) => (attached = resolve));
  void (async () => {
    while (open) {
      let messages: Pm[];
      try {
        const res = await request(`${base}/recv?${auth}`);
        c.requests++;
        messages = JSON.parse(res.text) as Pm[];
      } catch {
        if (open) await sleep(100);
        continue;
      }
      for (const pm of messages) {
        if (pm.action === 11) attached();
        else received(pm, c);
      }
    }
  })();
  await ready;
  return {
    close: () => {
      open = false;
      void request(`${base}/close?${auth}`).catch(() => undefined);
    },
  };
}

class Publishers {
  private readonly sockets: WebSocket[] = [];
  private readonly nextAt: number[] = [];
  private serial: number[] = [];
  published = 0;

  static async open(wsUrl: string): Promise<Publishers> {
    const p = new Publishers();
    for (let i = 0; i < PUBLISHERS; i++) {
      const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
      await new Promise<void>((resolve, reject) => {
        ws.once('error', reject);
        ws.on('message', (data: Buffer) => {
          if ((JSON.parse(data.toString()) as Pm).action === 4) resolve();
        });
      });
      p.sockets.push(ws);
      p.nextAt.push(0);
    }
    p.serial = p.sockets.map(() => 0);
    return p;
  }

  /** Sends one publish from a publisher under its rate, if one is; false when none is. */
  publishOne(channel: string): boolean {
    const now = performance.now();
    for (let i = 0; i < this.sockets.length; i++) {
      if (this.nextAt[i] > now) continue;
      this.nextAt[i] = now + PUBLISH_INTERVAL_MS;
      const data = `${performance.now()}|${PAYLOAD}`;
      this.sockets[i].send(JSON.stringify({ action: 15, channel, msgSerial: this.serial[i]++, messages: [{ name: 'b', data }] }));
      this.published++;
      return true;
    }
    return false;
  }

  close(): void {
    for (const ws of this.sockets) ws.close();
  }
}

interface Side {
  transport: CometRow['transport'];
  channel: string;
  counters: Counters;
  subscribers: Subscriber[];
}

interface RunResult {
  deliveredPerS: number;
  latency: LatencyHistogram;
  lost: number;
}

/**
 * Publishes on the side's channel for `seconds` after a warm-up: closed loop (WINDOW deliveries in
 * flight), or `rate` publishes a second. Counts what arrives after the warm-up.
 */
async function run(side: Side, publishers: Publishers, n: number, seconds: number, rate?: number): Promise<RunResult> {
  const c = side.counters;
  const began = performance.now();
  const warm = began + WARMUP_S * 1000;
  const end = warm + seconds * 1000;
  let published = 0;
  let startDelivered = -1;
  const base = c.delivered;
  const latency = new LatencyHistogram();
  const tick = setInterval(() => {
    const now = performance.now();
    if (startDelivered < 0 && now >= warm) {
      startDelivered = c.delivered;
      c.latency.reset();
    }
    if (now >= end) return;
    if (rate !== undefined) {
      const due = Math.floor(((now - began) / 1000) * rate);
      while (published < due && publishers.publishOne(side.channel)) published++;
      return;
    }
    while (published * n - (c.delivered - base) < WINDOW && publishers.publishOne(side.channel)) published++;
  }, 2);
  await sleep(end - performance.now());
  const deliveredAtEnd = c.delivered;
  clearInterval(tick);
  latency.merge(c.latency);
  // The last deliveries, for `lost` (a delivery counted before the warm-up ended belongs to it).
  const drainEnd = performance.now() + DRAIN_MS;
  while (c.delivered - base < published * n && performance.now() < drainEnd) await sleep(20);
  return {
    deliveredPerS: (deliveredAtEnd - startDelivered) / seconds,
    latency,
    lost: Math.max(0, published * n - (c.delivered - base)),
  };
}

/**
 * The comparison: `subscribers` WebSocket subscribers on one channel and as many comet ones on
 * another, of the service at `httpUrl` (`auth`: `key=...`); closed-loop throughput rounds
 * alternating between them, then a fixed-rate latency run of each.
 */
export async function cometBench(httpUrl: string, auth: string, o: CometBenchOptions, log: (line: string) => void): Promise<CometRow[]> {
  const wsUrl = `${httpUrl.replace(/^http/, 'ws')}/?${auth}&format=json&heartbeats=false&v=6`;
  const sides: Side[] = [];
  const rows: CometRow[] = [];
  const publishers = await Publishers.open(wsUrl);
  try {
    for (const transport of ['WebSocket', 'comet'] as const) {
      const channel = `comet-bench-${transport}`;
      const counters: Counters = { delivered: 0, requests: 0, latency: new LatencyHistogram() };
      const subscribers: Subscriber[] = [];
      for (let i = 0; i < o.subscribers; i += 25) {
        const batch = Array.from({ length: Math.min(25, o.subscribers - i) }, () =>
          transport === 'comet' ? cometSubscriber(httpUrl, auth, channel, counters) : webSocketSubscriber(wsUrl, channel, counters),
        );
        subscribers.push(...(await Promise.all(batch)));
      }
      log(`comet: ${o.subscribers} ${transport} subscribers attached to a channel of their own`);
      sides.push({ transport, channel, counters, subscribers });
    }
    const n = o.subscribers;
    const measured = sides.map(() => ({ rounds: [] as number[], latency: new LatencyHistogram(), lost: 0, requests: 0, delivered: 0 }));
    for (let round = 1; round <= o.rounds; round++) {
      for (let i = 0; i < sides.length; i++) {
        const requests = sides[i].counters.requests;
        const delivered = sides[i].counters.delivered;
        const r = await run(sides[i], publishers, n, o.roundS);
        measured[i].rounds.push(r.deliveredPerS);
        measured[i].latency.merge(r.latency);
        measured[i].lost += r.lost;
        measured[i].requests += sides[i].counters.requests - requests;
        measured[i].delivered += sides[i].counters.delivered - delivered;
        log(`comet: round ${round}, ${sides[i].transport}: ${Math.round(r.deliveredPerS)} delivered/s, p50 ${r.latency.percentileMs(50).toFixed(2)} ms`);
      }
    }
    for (let i = 0; i < sides.length; i++) {
      const idle = await run(sides[i], publishers, n, o.latencyS, IDLE_RATE);
      const m = measured[i];
      rows.push({
        transport: sides[i].transport,
        deliveredPerS: m.rounds.reduce((a, b) => a + b, 0) / m.rounds.length,
        rounds: m.rounds,
        p50: m.latency.percentileMs(50),
        p99: m.latency.percentileMs(99),
        idleRate: IDLE_RATE,
        idleP50: idle.latency.percentileMs(50),
        idleP99: idle.latency.percentileMs(99),
        lost: m.lost + idle.lost,
        requestsPerMessage: sides[i].transport === 'comet' ? m.requests / Math.max(1, m.delivered) : 0,
      });
      log(`comet: ${sides[i].transport} at ${IDLE_RATE} publishes/s: p50 ${idle.latency.percentileMs(50).toFixed(2)} ms, p99 ${idle.latency.percentileMs(99).toFixed(2)} ms`);
    }
  } finally {
    publishers.close();
    for (const side of sides) for (const s of side.subscribers) s.close();
    await sleep(200);
    agent.destroy();
  }
  return rows;
}

export function cometTable(rows: CometRow[]): string {
  const ms = (v: number): string => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(1) : v.toPrecision(3)) : 'n/a');
  const int = (v: number): string => Math.round(v).toLocaleString('en-US');
  const ws = rows.find((r) => r.transport === 'WebSocket');
  return table(
    ['Comet vs WebSocket', 'subscribers on', 'delivered msg/s', 'vs WebSocket', 'closed-loop p50 ms', 'p99 ms', `at ${IDLE_RATE} publishes/s p50 ms`, 'p99 ms', 'recvs / message', 'lost'],
    rows.map((r) => [
      `1 channel × ${COMET_SUBSCRIBERS} subscribers`,
      r.transport,
      int(r.deliveredPerS),
      ws ? (r.deliveredPerS / ws.deliveredPerS).toFixed(2) : '',
      ms(r.p50),
      ms(r.p99),
      ms(r.idleP50),
      ms(r.idleP99),
      r.transport === 'comet' ? r.requestsPerMessage.toFixed(3) : '',
      String(r.lost),
    ]),
    [false, false, true, true, true, true, true, true, true, true],
  );
}

/** The comet rows' paragraph and table for the realtime section (or why they are missing). */
export function cometMarkdown(rows: CometRow[], o: { rounds: number; roundS: number; latencyS: number }, error?: string): string {
  const head =
    `**Comet (HTTP long polling) against WebSocket**, the same service child: ${COMET_SUBSCRIBERS} subscribers over WebSocket on one channel and ${COMET_SUBSCRIBERS} over comet on another, ` +
    `clients in the bench's own process (raw \`ws\` sockets; comet on node:http with a keep-alive agent, as the SDK's Node comet transport), JSON. ` +
    `Publishes: realtime MESSAGE frames from ${PUBLISHERS} WebSocket connections (the same for both), one message each carrying its send time. ` +
    `Throughput: closed loop with ${WINDOW.toLocaleString('en-US')} deliveries in flight, ${o.rounds} rounds of ${o.roundS} s per transport after ${WARMUP_S} s of warm-up, alternating; p50/p99 over those rounds. ` +
    `Then ${o.latencyS} s at ${IDLE_RATE} publishes/s each. "recvs / message" is how many long-poll requests a comet subscriber made per message it received.`;
  if (error) return `${head}\n\n**failed**: ${error}`;
  return `${head}\n\n${cometTable(rows)}`;
}
