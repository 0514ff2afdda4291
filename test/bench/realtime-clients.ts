// A load-generator child of the realtime bench (realtime-bench.ts drives it over IPC): raw `ws`
// clients speaking JSON frames, lighter than the SDK, so that a few processes hold ten thousand
// subscribers. Each child holds a share of the subscribers and publishes from connections of its
// own: a message's data carries the child's number, a sequence number and the send time
// (process.hrtime, the machine's monotonic clock, the same in every process), so every delivery
// gives a latency, and the publishing child sees when its own subscribers of that channel have all
// received it. That lets a publish run keep a bounded number of messages in flight (published, not
// yet delivered to this child's subscribers) instead of outrunning the server and measuring its
// buffers.
import WebSocket, { type RawData } from 'ws';
import { LatencyHistogram } from './latency-histogram.js';

const CHILD = Number(process.env.RT_CHILD ?? 0);
const CONNECT_TIMEOUT_MS = 15_000;
const ATTACH_TIMEOUT_MS = 15_000;
/** A message not delivered to all of this child's subscribers of its channel after this is lost. */
const LOST_AFTER_MS = 5_000;

interface Frame {
  action: number;
  channel?: string;
  msgSerial?: number;
  count?: number;
  error?: { code?: number; message?: string };
  messages?: { data?: unknown }[];
}

class Counters {
  delivered = 0;
  published = 0;
  acked = 0;
  nacked = 0;
  lost = 0;
  /** delivery frames and their bytes */
  frames = 0;
  bytes = 0;
  readonly latency = new LatencyHistogram();
  reset(): void {
    this.delivered = this.published = this.acked = this.nacked = this.lost = this.frames = this.bytes = 0;
    this.latency.reset();
  }
  snapshot(): CountersSnapshot {
    const { delivered, published, acked, nacked, lost, frames, bytes } = this;
    return { delivered, published, acked, nacked, lost, frames, bytes, latency: { counts: [...this.latency.counts], max: this.latency.max } };
  }
}

export interface CountersSnapshot {
  delivered: number;
  published: number;
  acked: number;
  nacked: number;
  lost: number;
  frames: number;
  bytes: number;
  latency: { counts: number[]; max: number };
}

/** What went wrong, by reason ("ECONNRESET", "ERROR 40160", "closed 1006"...), over the child's life. */
const problems = new Map<string, number>();
const problem = (reason: string): void => {
  problems.set(reason, (problems.get(reason) ?? 0) + 1);
};

/** counters since the last reset of the measured window, and since the start of the publish run */
const windowCounters = new Counters();
const runCounters = new Counters();
const bothCounters = [windowCounters, runCounters];

interface Connection {
  ws: WebSocket;
  attached: Set<string>;
  /** set while waiting for an ATTACHED */
  onAttached?: (channel: string, error?: string) => void;
  publisher: boolean;
  msgSerial: number;
  closing: boolean;
}

const subscribers: Connection[] = [];
/** this child's subscribers per channel */
const localSubscribers = new Map<string, number>();
let unexpectedCloses = 0;
/** the longest delivery latency since the last peek (progress lines) */
let peekMaxUs = 0;

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

function onFrame(conn: Connection, raw: RawData): void {
  let frame: Frame;
  try {
    frame = JSON.parse(String(raw)) as Frame;
  } catch {
    problem('unparsable frame');
    return;
  }
  switch (frame.action) {
    case 15:
      if (!conn.publisher) delivered(frame, (raw as Buffer).length);
      break;
    case 11:
      conn.onAttached?.(frame.channel!);
      break;
    case 1:
      for (const c of bothCounters) c.acked += frame.count ?? 1;
      break;
    case 2:
      for (const c of bothCounters) c.nacked += frame.count ?? 1;
      problem(`NACK ${frame.error?.code}: ${frame.error?.message}`);
      break;
    case 9:
      problem(`ERROR ${frame.error?.code}: ${frame.error?.message}`);
      if (frame.channel) conn.onAttached?.(frame.channel, `ERROR ${frame.error?.code}`);
      break;
    case 6:
      problem(`DISCONNECTED ${frame.error?.code}: ${frame.error?.message}`);
      break;
    case 13:
      problem('DETACHED');
      if (frame.channel) conn.attached.delete(frame.channel);
      break;
  }
}

function delivered(frame: Frame, bytes: number): void {
  const now = nowUs();
  for (const c of bothCounters) {
    c.frames++;
    c.bytes += bytes;
  }
  for (const m of frame.messages ?? []) {
    windowCounters.delivered++;
    runCounters.delivered++;
    // data: "<child>:<seq>:<sent µs>|payload"
    const d = typeof m.data === 'string' ? m.data : '';
    const a = d.indexOf(':');
    const b = d.indexOf(':', a + 1);
    const c = d.indexOf('|', b + 1);
    if (a < 0 || b < 0 || c < 0) {
      problem('delivery without a stamp');
      continue;
    }
    const latency = now - Number(d.slice(b + 1, c));
    if (latency > peekMaxUs) peekMaxUs = latency;
    windowCounters.latency.add(latency);
    runCounters.latency.add(latency);
    if (publishing && Number(d.slice(0, a)) === CHILD) arrived(Number(d.slice(a + 1, b)));
  }
}

/** Opens a connection and resolves once its CONNECTED arrived. */
function open(url: string, publisher: boolean): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: CONNECT_TIMEOUT_MS });
    const conn: Connection = { ws, attached: new Set(), publisher, msgSerial: 0, closing: false };
    let connected = false;
    let failed = false;
    const fail = (reason: string): void => {
      if (connected || failed) return;
      failed = true;
      clearTimeout(timer);
      ws.terminate();
      reject(new Error(reason));
    };
    const timer = setTimeout(() => fail('no CONNECTED in time'), CONNECT_TIMEOUT_MS);
    ws.on('unexpected-response', (_req, res) => fail(`HTTP ${res.statusCode}`));
    ws.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected) fail(err.code ?? err.message);
      else problem(`socket error ${err.code ?? err.message}`);
    });
    ws.on('close', (code) => {
      if (failed) return;
      if (!connected) return fail(`closed ${code} before CONNECTED`);
      if (!conn.closing) {
        unexpectedCloses++;
        problem(`closed ${code}`);
        for (const channel of conn.attached) localSubscribers.set(channel, (localSubscribers.get(channel) ?? 1) - 1);
      }
    });
    ws.on('message', (raw) => {
      if (failed) return;
      if (!connected) {
        let frame: Frame;
        try {
          frame = JSON.parse(String(raw)) as Frame;
        } catch {
          return fail('unparsable first frame');
        }
        if (frame.action !== 4) return fail(frame.action === 9 ? `ERROR ${frame.error?.code}` : `action ${frame.action} before CONNECTED`);
        connected = true;
        clearTimeout(timer);
        resolve(conn);
        return;
      }
      onFrame(conn, raw);
    });
  });
}

/** Runs task(i) for i in [0, count) with at most `concurrency` at once; failures counted by reason. */
async function pool(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<{ ok: number; failed: number; reasons: Record<string, number> }> {
  let next = 0;
  let ok = 0;
  const reasons: Record<string, number> = {};
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      try {
        await task(i);
        ok++;
      } catch (err) {
        const reason = (err as Error).message;
        reasons[reason] = (reasons[reason] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return { ok, failed: count - ok, reasons };
}

function attach(conn: Connection, channel: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done('no ATTACHED in time'), ATTACH_TIMEOUT_MS);
    const done = (error?: string): void => {
      clearTimeout(timer);
      conn.onAttached = undefined;
      if (error) return reject(new Error(error));
      conn.attached.add(channel);
      localSubscribers.set(channel, (localSubscribers.get(channel) ?? 0) + 1);
      resolve();
    };
    conn.onAttached = (ch, error) => {
      if (ch === channel) done(error);
    };
    conn.ws.send(JSON.stringify({ action: 10, channel }));
  });
}

// ---- publishing ----
let publishing = false;
let publishers: Connection[] = [];
let payload = '';
let channels: string[] = [];
let nextChannel = 0;
let nextSeq = 0;
/** seq -> deliveries still expected at this child's subscribers, and when it was sent */
const pending = new Map<number, { left: number; sentMs: number }>();
let windowSize = 0;
let timers: NodeJS.Timeout[] = [];

function publishOne(): void {
  const channel = channels[nextChannel];
  nextChannel = (nextChannel + 1) % channels.length;
  const seq = nextSeq++;
  const conn = publishers[seq % publishers.length];
  const data = `${CHILD}:${seq}:${nowUs()}|${payload}`;
  conn.ws.send(JSON.stringify({ action: 15, channel, msgSerial: conn.msgSerial++, messages: [{ name: 'rt', data }] }));
  for (const c of bothCounters) c.published++;
  const left = localSubscribers.get(channel) ?? 0;
  if (windowSize > 0 && left > 0) pending.set(seq, { left, sentMs: Date.now() });
}

function arrived(seq: number): void {
  const p = pending.get(seq);
  if (!p) return;
  if (--p.left > 0) return;
  pending.delete(seq);
  pump();
}

/** Window mode: keeps `windowSize` messages in flight. */
function pump(): void {
  while (publishing && pending.size < windowSize) publishOne();
}

function sweepLost(): void {
  const cutoff = Date.now() - LOST_AFTER_MS;
  for (const [seq, p] of pending) {
    if (p.sentMs > cutoff) break;
    pending.delete(seq);
    for (const c of bothCounters) c.lost += p.left;
  }
  pump();
}

async function startPublishing(cmd: PublishCommand): Promise<void> {
  publishers = await Promise.all(Array.from({ length: cmd.publishers }, () => open(cmd.url, true)));
  payload = cmd.payload;
  channels = cmd.channels;
  nextChannel = (CHILD * 7919) % channels.length;
  pending.clear();
  publishing = true;
  timers = [setInterval(sweepLost, 500)];
  if (cmd.window !== undefined) {
    windowSize = cmd.window;
    pump();
  } else {
    windowSize = 0;
    const rate = cmd.rate!;
    const start = Date.now();
    let sent = 0;
    // Open loop at a fixed rate; a child stalled for more than a tenth of a second drops that backlog instead of bursting it.
    const maxBurst = Math.max(1, Math.ceil(rate / 10));
    timers.push(
      setInterval(() => {
        const target = Math.floor(((Date.now() - start) / 1000) * rate);
        if (target - sent > maxBurst) sent = target - maxBurst;
        for (; sent < target; sent++) publishOne();
      }, 2),
    );
  }
}

function stopPublishing(): void {
  publishing = false;
  for (const t of timers) clearInterval(t);
  timers = [];
  for (const conn of publishers) {
    conn.closing = true;
    conn.ws.close();
  }
  publishers = [];
}

// ---- IPC ----
interface PublishCommand {
  cmd: 'publish';
  url: string;
  publishers: number;
  channels: string[];
  payload: string;
  /** messages in flight (window mode) */
  window?: number;
  /** publishes per second (rate mode) */
  rate?: number;
}

type Command =
  | { cmd: 'connect'; url: string; count: number; concurrency: number }
  | { cmd: 'attach'; channels: string[]; first: number; count: number; concurrency: number }
  | { cmd: 'reset'; which: 'window' | 'run' }
  | { cmd: 'read'; which: 'window' | 'run' }
  | { cmd: 'peek' }
  | PublishCommand
  | { cmd: 'stop-publish' }
  | { cmd: 'close' };

async function handle(c: Command): Promise<unknown> {
  switch (c.cmd) {
    case 'connect': {
      const start = Date.now();
      const r = await pool(c.count, c.concurrency, async () => {
        subscribers.push(await open(c.url, false));
      });
      return { ...r, ms: Date.now() - start, held: subscribers.length };
    }
    case 'attach': {
      const start = Date.now();
      const r = await pool(c.count, c.concurrency, (i) => attach(subscribers[c.first + i], c.channels[(c.first + i) % c.channels.length]));
      return { ...r, ms: Date.now() - start };
    }
    case 'reset':
      (c.which === 'window' ? windowCounters : runCounters).reset();
      return {};
    case 'read':
      return { counters: (c.which === 'window' ? windowCounters : runCounters).snapshot(), problems: Object.fromEntries(problems), unexpectedCloses, held: subscribers.length - unexpectedCloses, inFlight: pending.size };
    case 'peek': {
      const maxUs = peekMaxUs;
      peekMaxUs = 0;
      return { delivered: windowCounters.delivered, published: windowCounters.published, maxUs };
    }
    case 'publish':
      await startPublishing(c);
      return {};
    case 'stop-publish':
      stopPublishing();
      return {};
    case 'close':
      for (const conn of subscribers) {
        conn.closing = true;
        conn.ws.terminate();
      }
      stopPublishing();
      setImmediate(() => process.exit(0));
      return {};
  }
}

// exit-with-parent.ts unrefs the IPC channel; here it is all that keeps this child alive between commands.
process.channel?.ref();
process.on('message', (m: { id: number } & Command) => {
  handle(m).then(
    (result) => process.send!({ id: m.id, result }),
    (err: Error) => process.send!({ id: m.id, error: err.message }),
  );
});
process.send!({ ready: true });
