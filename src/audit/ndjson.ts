// The audit replay's output (`npm run replay`): NDJSON bytes, a chunk at a time, the same lines as
// JSON.stringify(lineOf(record)) gives (replay-scope.ts), made faster for the record nearly every
// log is made of: a publish (messages.published in event-codec.ts's layout) is transcoded from its
// MessagePack to its JSON line in one pass over the bytes, with no event object, no wire message
// and no JSON.stringify of either; its strings are copied byte for byte when they need no escape.
// Anything else (presence, the app's events, a publish of a shape this does not know) takes the
// generic path. Lines go into a buffer handed out whole (one stdout write per chunk, not per line).
import { Topics, type Log, type LogRecord, type Topic } from '../log/port.js';
import { unpackValue } from '../codec/msgpack.js';
import { inScope, lineOf, partitionsToRead, readPartition, type ScopeProgress, type ScopeRequest } from './replay-scope.js';

const CHUNK_BYTES = 256 * 1024;

/** Not in the layout the fast path reads: the generic path serves the record. */
const NOT_FAST = false;

const EVENT_TYPE = Buffer.from('messages.published');
const names = (list: string[]): Buffer[] => list.map((n) => Buffer.from(n));
// Field numbers: the index in these lists.
const EVENT_KEYS = names(['type', 'appId', 'channel', 'transport', 'messages', 'clientIds', 'keyName']);
const [E_TYPE, , , , E_MESSAGES, , E_KEYNAME] = [0, 1, 2, 3, 4, 5, 6];
const MESSAGE_KEYS = names(['id', 'timestamp', 'name', 'clientId', 'connectionId', 'data', 'encoding', 'extras', 'action']);
const [M_ID, M_TIMESTAMP, M_NAME, M_CLIENTID, M_CONNECTIONID, M_DATA, M_ENCODING, M_EXTRAS, M_ACTION] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
/** messageToWire's key order (codec/message-wire.ts), data and encoding apart */
const WIRE_ORDER = [M_ID, M_TIMESTAMP, M_NAME, M_CLIENTID, M_CONNECTIONID];
const WIRE_AFTER_DATA = [M_EXTRAS, M_ACTION];
const KEY_TEXT = (list: Buffer[]): Buffer[] => list.map((n) => Buffer.from(`"${n.toString()}":`));
const EVENT_KEY_TEXT = KEY_TEXT(EVENT_KEYS);
const MESSAGE_KEY_TEXT = KEY_TEXT(MESSAGE_KEYS);

/** The NDJSON being written: a buffer of its own per chunk, handed out when full. */
export class NdjsonChunks {
  private buf = Buffer.allocUnsafe(CHUNK_BYTES);
  private pos = 0;
  /** chunks full, to hand out */
  readonly full: Buffer[] = [];
  /** lines written by the transcoder, and by the generic path */
  fast = 0;
  generic = 0;

  /** where the line being written starts: a new buffer takes it along, so a line is never split (nor lost when undone) */
  private lineStart = 0;

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const partial = this.pos - this.lineStart;
    const next = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, 2 * (partial + n)));
    this.buf.copy(next, 0, this.lineStart, this.pos);
    if (this.lineStart > 0) this.full.push(this.buf.subarray(0, this.lineStart));
    this.buf = next;
    this.lineStart = 0;
    this.pos = partial;
  }

  /** The chunks written so far (the last one however full), emptied. */
  take(): Buffer[] {
    if (this.pos > 0) {
      this.full.push(this.buf.subarray(0, this.pos));
      this.buf = Buffer.allocUnsafe(CHUNK_BYTES);
      this.pos = 0;
      this.lineStart = 0;
    }
    return this.full.splice(0);
  }

  private text(s: string): void {
    this.lineStart = this.pos;
    this.room(3 * s.length);
    this.pos += this.buf.write(s, this.pos, 'utf8');
    this.lineStart = this.pos;
  }

  /**
   * One record's line, fast when it is a publish in event-codec's layout; true when it was in the
   * request's scope (written), false when not.
   */
  record(record: LogRecord, request: ScopeRequest): boolean {
    if (record.timestamp < request.from || record.timestamp > request.to) return false;
    if (record.topic === Topics.messages) {
      if (!inScope(record, request)) return false;
      this.lineStart = this.pos;
      if (this.publish(record)) {
        this.lineStart = this.pos;
        this.fast++;
        return true;
      }
      this.pos = this.lineStart;
    }
    const line = lineOf(record, request);
    if (!line) return false;
    this.generic++;
    this.text(`${JSON.stringify(line)}\n`);
    return true;
  }

  // The transcoder: b is the value, positions into it; the output at this.pos.

  /** Whether the record was written: false for the generic path (not a publish, or not in the layout read here). */
  private publish(record: LogRecord): boolean {
    const b = record.value;
    let p = 0;
    let n: number;
    const h = b[p];
    if (h >= 0x80 && h <= 0x8f) {
      n = h & 0x0f;
      p = 1;
    } else return NOT_FAST;
    // Each field's value span, by field number (-1: absent).
    const at = this.eventAt;
    at.fill(-1);
    const order: number[] = this.eventOrder;
    order.length = 0;
    for (let i = 0; i < n; i++) {
      const field = keyOf(b, p, EVENT_KEYS);
      if (field < 0 || at[field] >= 0) return NOT_FAST;
      p = skip(b, p);
      at[field] = p;
      order.push(field);
      p = skip(b, p);
      if (p < 0) return NOT_FAST;
    }
    if (at[E_TYPE] < 0 || !strEquals(b, at[E_TYPE], EVENT_TYPE)) return NOT_FAST;
    const messagesAt = at[E_MESSAGES];
    if (messagesAt < 0) return NOT_FAST;
    let count: number;
    let m = messagesAt;
    const ah = b[m];
    if (ah >= 0x90 && ah <= 0x9f) {
      count = ah & 0x0f;
      m++;
    } else if (ah === 0xdc) {
      count = (b[m + 1] << 8) | b[m + 2];
      m += 3;
    } else return NOT_FAST;

    this.ascii('{"topic":"messages","partition":');
    this.ascii(String(record.partition));
    this.ascii(',"offset":');
    this.ascii(String(record.offset));
    this.ascii(',"time":');
    this.ascii(String(record.timestamp));
    this.ascii(',"event":{');
    let first = true;
    for (const field of order) {
      if (field === E_MESSAGES) continue;
      if (!first) this.byte(0x2c);
      first = false;
      this.bytes(EVENT_KEY_TEXT[field]);
      if (!this.value(b, at[field])) return NOT_FAST;
    }
    if (!first) this.byte(0x2c);
    this.bytes(EVENT_KEY_TEXT[E_MESSAGES]);
    this.byte(0x5b);
    // The first message's clientId and connectionId: the credential.
    let clientIdAt = -1;
    let connectionIdAt = -1;
    const ma = this.messageAt;
    for (let i = 0; i < count; i++) {
      const mh = b[m];
      let fields: number;
      if (mh >= 0x80 && mh <= 0x8f) {
        fields = mh & 0x0f;
        m++;
      } else return NOT_FAST;
      ma.fill(-1);
      for (let f = 0; f < fields; f++) {
        const field = keyOf(b, m, MESSAGE_KEYS);
        if (field < 0 || ma[field] >= 0) return NOT_FAST;
        m = skip(b, m);
        ma[field] = m;
        m = skip(b, m);
        if (m < 0) return NOT_FAST;
      }
      if (i === 0) {
        clientIdAt = ma[M_CLIENTID];
        connectionIdAt = ma[M_CONNECTIONID];
      }
      if (i > 0) this.byte(0x2c);
      this.byte(0x7b);
      let any = false;
      for (const field of WIRE_ORDER) {
        if (ma[field] < 0) continue;
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[field]);
        if (!this.value(b, ma[field])) return NOT_FAST;
      }
      // data: binary as base64, its encoding saying so (messageToWire's 'json' format)
      const dataAt = ma[M_DATA];
      const encodingAt = ma[M_ENCODING];
      const binary = dataAt >= 0 && (b[dataAt] === 0xc4 || b[dataAt] === 0xc5 || b[dataAt] === 0xc6);
      if (binary && encodingAt >= 0 && !isStr(b, encodingAt)) return NOT_FAST;
      if (dataAt >= 0) {
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[M_DATA]);
        if (binary) {
          const [s, e] = span(b, dataAt);
          this.ascii(`"${Buffer.from(b.buffer, b.byteOffset + s, e - s).toString('base64')}"`);
        } else if (!this.value(b, dataAt)) return NOT_FAST;
      }
      if (encodingAt >= 0 || binary) {
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[M_ENCODING]);
        if (binary) {
          // `${encoding}/base64`, or 'base64' (an empty encoding too, as messageToWire does)
          if (encodingAt >= 0 && strLength(b, encodingAt) > 0) {
            const [s, e] = span(b, encodingAt);
            this.ascii(JSON.stringify(`${Buffer.from(b.buffer, b.byteOffset + s, e - s).toString('utf8')}/base64`));
          } else this.ascii('"base64"');
        } else if (!this.value(b, encodingAt)) return NOT_FAST;
      }
      for (const field of WIRE_AFTER_DATA) {
        if (ma[field] < 0) continue;
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[field]);
        if (!this.value(b, ma[field])) return NOT_FAST;
      }
      this.byte(0x7d);
    }
    this.ascii(']}');
    const keyNameAt = at[E_KEYNAME];
    if (keyNameAt >= 0 || clientIdAt >= 0 || connectionIdAt >= 0) {
      this.ascii(',"credential":{');
      let any = false;
      for (const [name, valueAt] of [
        ['"keyName":', keyNameAt],
        ['"clientId":', clientIdAt],
        ['"connectionId":', connectionIdAt],
      ] as const) {
        if (valueAt < 0) continue;
        if (any) this.byte(0x2c);
        any = true;
        this.ascii(name);
        if (!this.value(b, valueAt)) return NOT_FAST;
      }
      this.byte(0x7d);
    }
    this.ascii('}\n');
    return true;
  }

  private readonly eventAt = new Int32Array(EVENT_KEYS.length);
  private readonly eventOrder: number[] = [];
  private readonly messageAt = new Int32Array(MESSAGE_KEYS.length);

  private byte(c: number): void {
    this.room(1);
    this.buf[this.pos++] = c;
  }

  private bytes(src: Buffer): void {
    this.room(src.length);
    src.copy(this.buf, this.pos);
    this.pos += src.length;
  }

  private ascii(s: string): void {
    this.room(s.length * 3);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /** A value as JSON.stringify writes what the decoder gives: strings and numbers here, anything else decoded and stringified. */
  private value(b: Uint8Array, p: number): boolean {
    const h = b[p];
    if ((h >= 0xa0 && h <= 0xbf) || h === 0xd9 || h === 0xda || h === 0xdb) {
      const [s, e] = span(b, p);
      this.room(e - s + 2);
      const out = this.buf;
      let o = this.pos;
      out[o++] = 0x22;
      for (let i = s; i < e; i++) {
        const c = b[i];
        if (c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x80) {
          // Escapes, or UTF-8 to check: as JSON.stringify writes the string the decoder gives.
          this.ascii(JSON.stringify(Buffer.from(b.buffer, b.byteOffset + s, e - s).toString('utf8')));
          return true;
        }
        out[o++] = c;
      }
      out[o++] = 0x22;
      this.pos = o;
      return true;
    }
    const simple = simpleJson(b, p);
    if (simple !== undefined) {
      this.ascii(simple);
      return true;
    }
    const end = skip(b, p);
    if (end < 0) return false;
    const json = JSON.stringify(unpackValue(b.subarray(p, end)));
    if (json === undefined) return false;
    this.ascii(json);
    return true;
  }
}

/** A positive integer, null or a boolean as JSON, or undefined for any other value. */
function simpleJson(b: Uint8Array, p: number): string | undefined {
  const h = b[p];
  if (h <= 0x7f) return String(h);
  switch (h) {
    case 0xcc:
      return String(b[p + 1]);
    case 0xcd:
      return String((b[p + 1] << 8) | b[p + 2]);
    case 0xce:
      return String(u32(b, p + 1));
    case 0xcf:
      return String(u32(b, p + 1) * 0x1_0000_0000 + u32(b, p + 5));
    case 0xc0:
      return 'null';
    case 0xc2:
      return 'false';
    case 0xc3:
      return 'true';
    default:
      return undefined;
  }
}

const u32 = (b: Uint8Array, p: number): number => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;

const isStr = (b: Uint8Array, p: number): boolean => (b[p] >= 0xa0 && b[p] <= 0xbf) || b[p] === 0xd9 || b[p] === 0xda || b[p] === 0xdb;

/** The bytes [start, end) of a str or bin at p. */
function span(b: Uint8Array, p: number): [number, number] {
  const h = b[p];
  if (h >= 0xa0 && h <= 0xbf) return [p + 1, p + 1 + (h & 0x1f)];
  if (h === 0xd9 || h === 0xc4) return [p + 2, p + 2 + b[p + 1]];
  if (h === 0xda || h === 0xc5) return [p + 3, p + 3 + ((b[p + 1] << 8) | b[p + 2])];
  return [p + 5, p + 5 + u32(b, p + 1)];
}

const strLength = (b: Uint8Array, p: number): number => {
  const [s, e] = span(b, p);
  return e - s;
};

function strEquals(b: Uint8Array, p: number, want: Buffer): boolean {
  if (!isStr(b, p)) return false;
  const [s, e] = span(b, p);
  if (e - s !== want.length) return false;
  for (let i = 0; i < want.length; i++) if (b[s + i] !== want[i]) return false;
  return true;
}

/** The field number of the str key at p among `keys`, or -1. */
function keyOf(b: Uint8Array, p: number, keys: Buffer[]): number {
  const h = b[p];
  if (h < 0xa0 || h > 0xbf) return -1;
  const length = h & 0x1f;
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    if (key.length !== length) continue;
    let i = 0;
    while (i < length && b[p + 1 + i] === key[i]) i++;
    if (i === length) return k;
  }
  return -1;
}

/** Where the MessagePack value at p ends, or -1 past the end (or a form the log never holds). */
function skip(b: Uint8Array, p: number): number {
  if (p < 0 || p >= b.length) return -1;
  const h = b[p];
  let end: number;
  if (h <= 0x7f || h >= 0xe0 || h === 0xc0 || h === 0xc2 || h === 0xc3) end = p + 1;
  else if (h >= 0xa0 && h <= 0xbf) end = p + 1 + (h & 0x1f);
  else if (h >= 0x80 && h <= 0x8f) return skipItems(b, p + 1, 2 * (h & 0x0f));
  else if (h >= 0x90 && h <= 0x9f) return skipItems(b, p + 1, h & 0x0f);
  else
    switch (h) {
      case 0xcc:
      case 0xd0:
        end = p + 2;
        break;
      case 0xcd:
      case 0xd1:
        end = p + 3;
        break;
      case 0xce:
      case 0xd2:
      case 0xca:
        end = p + 5;
        break;
      case 0xcf:
      case 0xd3:
      case 0xcb:
        end = p + 9;
        break;
      case 0xd9:
      case 0xc4:
        end = p + 2 + b[p + 1];
        break;
      case 0xda:
      case 0xc5:
        end = p + 3 + ((b[p + 1] << 8) | b[p + 2]);
        break;
      case 0xdb:
      case 0xc6:
        end = p + 5 + u32(b, p + 1);
        break;
      case 0xdc:
        return skipItems(b, p + 3, (b[p + 1] << 8) | b[p + 2]);
      case 0xdd:
        return skipItems(b, p + 5, u32(b, p + 1));
      case 0xde:
        return skipItems(b, p + 3, 2 * ((b[p + 1] << 8) | b[p + 2]));
      case 0xdf:
        return skipItems(b, p + 5, 2 * u32(b, p + 1));
      default:
        return -1; // ext: never in an event
    }
  return end <= b.length ? end : -1;
}

function skipItems(b: Uint8Array, p: number, n: number): number {
  for (let i = 0; i < n && p >= 0; i++) p = skip(b, p);
  return p;
}

/**
 * The request's NDJSON, a chunk at a time (partition by partition, so each channel's in log
 * order), with the progress of the reading.
 */
export async function* replayNdjson(log: Log, request: ScopeRequest, onProgress: (p: ScopeProgress) => void = () => {}): AsyncGenerator<Buffer> {
  const parts = await partitionsToRead(log, request);
  const ends = new Map<Topic, Map<number, number>>();
  let total = 0;
  for (const { topic, partition } of parts) {
    if (!ends.has(topic)) ends.set(topic, await log.endOffsets(topic));
    total += ends.get(topic)!.get(partition) ?? 0;
  }
  const progress: ScopeProgress = { read: 0, total, found: 0 };
  const out = new NdjsonChunks();
  for (const { topic, partition } of parts) {
    for await (const records of readPartition(log, topic, partition, ends.get(topic)!.get(partition) ?? 0)) {
      for (let i = 0; i < records.length; i++) if (out.record(records[i], request)) progress.found++;
      progress.read += records.length;
      onProgress(progress);
      if (out.full.length > 0) yield* out.full.splice(0);
    }
  }
  yield* out.take();
}
