// A raw WebSocket client speaking the realtime protocol (REALTIME-PROTOCOL.md) frame by frame,
// for tests that must send what the SDK never would: oversized, malformed or hostile frames, floods,
// a socket that stops reading. Frames are decoded with @msgpack/msgpack and JSON.parse, not with
// the service's own codec.
import { decode as decodeMsgpack, encode as encodeMsgpack } from '@msgpack/msgpack';
import WebSocket from 'ws';
import { Action } from '../../src/realtime/protocol.js';

export type Format = 'json' | 'msgpack';

/** A ProtocolMessage as received: loosely typed, since checking its shape is what tests do. */
export interface Pm {
  action: number;
  [field: string]: unknown;
}

export interface WireErrorLike {
  message: unknown;
  code: unknown;
  statusCode: unknown;
}

// The protocol's action numbers, as the gateway defines them (the SDK suites check them against the SDK).
export const Actions = Action;

export interface Closed {
  code: number;
  reason: string;
}

export class RawClient {
  readonly frames: Pm[] = [];
  /** Frames that did not decode as a ProtocolMessage (a test failure wherever they appear). */
  readonly undecodable: string[] = [];
  readonly closed: Promise<Closed>;
  isClosed = false;
  private waiters: { match: (pm: Pm) => boolean; resolve: (pm: Pm) => void }[] = [];
  private msgSerial = 0;

  private constructor(
    readonly ws: WebSocket,
    readonly format: Format,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => this.received(data, isBinary));
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => {
        this.isClosed = true;
        resolve({ code, reason: reason.toString() });
      }),
    );
    ws.on('error', () => undefined);
  }

  /** Opens a socket on the gateway (it is open, not yet CONNECTED: see connected()). */
  static open(port: number, query: Record<string, string | undefined>, format: Format = 'json'): Promise<RawClient> {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries({ format, v: '6', heartbeats: 'true', ...query })) if (v !== undefined) params.set(k, v);
    const ws = new WebSocket(`ws://127.0.0.1:${port}/?${params}`, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
    const client = new RawClient(ws, format);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }

  /** A socket that got CONNECTED. */
  static async connect(port: number, query: Record<string, string | undefined>, format: Format = 'json'): Promise<RawClient> {
    const client = await RawClient.open(port, query, format);
    const first = await client.next(() => true);
    if (first.action !== Actions.CONNECTED) throw new Error(`expected CONNECTED, got ${JSON.stringify(first).slice(0, 300)}`);
    return client;
  }

  get connectionId(): string {
    return String(this.frames.find((f) => f.action === Actions.CONNECTED)?.connectionId);
  }

  private received(data: Buffer, isBinary: boolean): void {
    let pm: unknown;
    try {
      pm = isBinary ? decodeMsgpack(data) : JSON.parse(data.toString('utf8'));
    } catch (err) {
      this.undecodable.push(`${(err as Error).message}: ${data.subarray(0, 80).toString('hex')}`);
      return;
    }
    if (typeof pm !== 'object' || pm === null || typeof (pm as Pm).action !== 'number') {
      this.undecodable.push(`not a ProtocolMessage: ${JSON.stringify(pm).slice(0, 200)}`);
      return;
    }
    this.frames.push(pm as Pm);
    for (const w of [...this.waiters]) {
      if (w.match(pm as Pm)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(pm as Pm);
      }
    }
  }

  /** The first frame from now on (or already received, when `seen` says so) that matches. */
  next(match: (pm: Pm) => boolean, timeoutMs = 10_000, seen = true): Promise<Pm> {
    if (seen) {
      const found = this.frames.find(match);
      if (found) return Promise.resolve(found);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no matching frame within ${timeoutMs} ms; got ${this.frames.map((f) => JSON.stringify(f).slice(0, 160)).join('\n')}`));
      }, timeoutMs);
      const waiter = {
        match,
        resolve: (pm: Pm) => {
          clearTimeout(timer);
          resolve(pm);
        },
      };
      this.waiters.push(waiter);
    });
  }

  encode(pm: unknown): Buffer | string {
    return this.format === 'json' ? JSON.stringify(pm) : Buffer.from(encodeMsgpack(pm, { maxDepth: 100_000 }));
  }

  send(pm: unknown): void {
    this.ws.send(this.encode(pm));
  }

  /** Bytes or text as they are, in a binary or a text frame. */
  sendRaw(data: Buffer | string, binary = typeof data !== 'string'): void {
    this.ws.send(data, { binary });
  }

  /** A MESSAGE with the next msgSerial; resolves with its ACK or NACK. */
  publish(channel: string, messages: unknown[]): Promise<Pm> {
    const msgSerial = this.msgSerial++;
    const answer = this.ackOf(msgSerial);
    this.send({ action: Actions.MESSAGE, channel, msgSerial, messages });
    return answer;
  }

  /** A PRESENCE with the next msgSerial; resolves with its ACK or NACK. */
  presence(channel: string, presence: unknown[]): Promise<Pm> {
    const msgSerial = this.msgSerial++;
    const answer = this.ackOf(msgSerial);
    this.send({ action: Actions.PRESENCE, channel, msgSerial, presence });
    return answer;
  }

  nextSerial(): number {
    return this.msgSerial++;
  }

  /** The ACK or NACK that covers msgSerial. */
  ackOf(msgSerial: number, timeoutMs = 10_000): Promise<Pm> {
    return this.next(
      (pm) =>
        (pm.action === Actions.ACK || pm.action === Actions.NACK) &&
        typeof pm.msgSerial === 'number' &&
        msgSerial >= pm.msgSerial &&
        msgSerial < pm.msgSerial + Number(pm.count ?? 1),
      timeoutMs,
    );
  }

  async attach(channel: string, extra: Record<string, unknown> = {}): Promise<Pm> {
    const answer = this.next((pm) => (pm.action === Actions.ATTACHED || pm.action === Actions.ERROR) && pm.channel === channel, 10_000, false);
    this.send({ action: Actions.ATTACH, channel, ...extra });
    return answer;
  }

  /** A HEARTBEAT with an id, answered by the gateway: proof the connection still works. */
  async ping(timeoutMs = 5000): Promise<void> {
    const id = Math.random().toString(36).slice(2);
    const answer = this.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === id, timeoutMs);
    this.send({ action: Actions.HEARTBEAT, id });
    await answer;
  }

  close(): void {
    if (!this.isClosed) this.ws.terminate();
  }
}

/** Resolves when `closed` settles or rejects after `ms` (a socket the gateway should have closed). */
export async function closedWithin(client: RawClient, ms: number): Promise<Closed> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`socket still open after ${ms} ms; frames: ${client.frames.map((f) => JSON.stringify(f).slice(0, 160)).join('\n')}`)), ms);
  });
  try {
    return await Promise.race([client.closed, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A value nested `depth` levels deep ({v:{v:...}}). */
export function nested(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { v };
  return v;
}
