// The audit replay's output (`npm run replay`): NDJSON bytes, a chunk at a time, the same lines as
// JSON.stringify(lineOf(record)) gives (replay-scope.ts), made faster for the record nearly every
// log is made of: a publish (messages.published in event-codec.ts's layout) is transcoded from its
// MessagePack to its JSON line in one pass over the bytes, with no event object, no wire message
// and no JSON.stringify of either; its strings are copied byte for byte when they need no escape.
// Anything else (presence, the app's events, a publish of a shape this does not know) takes the
// generic path. Lines go into a buffer handed out whole (one stdout write per chunk, not per line:
// json-chunks.ts, the byte writer this extends). A publish goes first to the same transcoder in
// WebAssembly (publish-wasm.ts, wasm/publish-line.ts: 1.9x cheaper a line, measured there), and
// to the one below when it declines the record or WebAssembly cannot be had.
// Plain bytes (strings needing no escape, the constants) move 4 at a time through DataViews, the
// escape test done on the 4 at once (SWAR); the known keys are found by length and first byte; the
// messages are walked once, not skipped then read. Those bought 0.28 -> 0.34 of the raw read's CPU
// on 300,000 records (before and after alternating, same run); byte by byte was the shape before.
// A publish's fields before its messages (type, app, channel, transport, key name: the same for
// every publish of a channel by one key) are remembered by the record key's hash, MessagePack and
// JSON: the next publish whose bytes start the same gets that JSON copied whole (1.35 -> 1.10 us of
// CPU a bench line alone, 50,000 lines in memory). Tried and not kept: long strings escaped by
// native code (Latin-1 slice, JSON.stringify, latin1Write: +0.5 us a line, the native calls cost
// more than the loop at 77 bytes), Buffer.compare / TypedArray.set for the remembered bytes (5% of
// the replay: JavaScript 4 bytes at a time is cheaper at ~100 bytes), commas fused into the keys.
// Also tried and not kept (2026-11-27): slices of 10,000 records read and transcoded on a worker
// thread (its own read-only SQLite handle) besides the main thread, written in order. On this
// machine's 2 cores, 1,000,000 records: 0.31 of the raw read by the clock against 0.29 alone, and
// 1.50 us of CPU a record against 0.99 (a thread's start under tsx, ~0.2 s of CPU, and its code
// cold again: its first 20,000 records at 4 us each); 0.38 against 0.29 at 3,000,000.
import { Topics, type Log, type LogRecord, type RecordKeyBytes, type RecordVisitor, type Topic } from '../log/port.js';
import { isStr, skip, spanLength, spanStart, strEquals } from './msgpack-spans.js';
import { E_KEYNAME, E_MESSAGES, E_TYPE, EVENT_KEY_TEXT, EVENT_TABLE, EVENT_TYPE, M_CLIENTID, M_CONNECTIONID, M_DATA, M_ENCODING, MESSAGE_KEY_TEXT, MESSAGE_KEYS, MESSAGE_TABLE, T_BASE64, T_CREDENTIAL, T_END_EVENT, T_END_LINE, T_EVENT, T_TIME, T_TYPE, EVENT_KEYS, Text, WIRE_AFTER_DATA, WIRE_ORDER } from './ndjson-layout.js';
import { inScope, lineOf, readingPlan, readPartition, type ScopeProgress, type ScopeRequest } from './replay-scope.js';
import { KeyScope } from './key-scope.js';
import { unpackFirst } from '../codec/msgpack.js';
import { JsonChunks } from './json-chunks.js';
import { PublishWasm } from './publish-wasm.js';

/** Not in the layout the fast path reads: the generic path serves the record. */
const NOT_FAST = false;

/** How many publishes' prefixes (their fields before the messages) are remembered, by their key's hash: about 4 MB at most (measured: 16 MB for 16,384); past it, all are forgotten and remembered again. */
const PREFIXES = 4096;

interface Prefix {
  /** the MessagePack from the event's map to its `messages` key, included */
  input: Text;
  /** the JSON it gives: the fields, then `"messages":[` */
  output: Text;
  /** the credential's `"keyName":...` (undefined: none) */
  keyName: Text | undefined;
}

/** A record key's hash (FNV-1a of its bytes, 31 bits), under which its prefix is remembered: a hint only, a prefix is compared whole before it is used. */
function hashOfBytes(b: Uint8Array, s: number, e: number): number {
  let h = 0x811c9dc5;
  for (let i = s; i < e; i++) h = Math.imul(h ^ b[i], 0x01000193);
  return h >>> 1;
}

function hashOfText(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 1;
}

/** The NDJSON being written: a buffer of its own per chunk, handed out when full. */
export class NdjsonChunks extends JsonChunks {
  /** lines written by the transcoder, and by the generic path */
  fast = 0;
  generic = 0;
  /** records of the scope that are not the service's events, left out (lineOf) */
  foreign = 0;
  private readonly countForeign = (): void => void this.foreign++;
  /** of the fast lines, those the WebAssembly transcoder wrote (publish-wasm.ts) */
  wasmLines = 0;
  /** the WebAssembly transcoder (undefined: not to be had, or not wanted), tried before the JavaScript one */
  private readonly wasm: PublishWasm | undefined;

  /** useWasm false: the JavaScript transcoder alone (the tests comparing the two). */
  constructor(useWasm = true) {
    super();
    this.wasm = useWasm ? PublishWasm.create() : undefined;
  }

  /** A scan of the log starts: a value it visits may be an object visited before, written again. */
  scanStarts(): void {
    this.wasm?.forget();
  }

  /** The line of a publish by the WebAssembly transcoder, when it has one and takes it. */
  private wasmLine(b: Uint8Array, start: number, end: number, partition: number, offset: number, timestamp: number): boolean {
    const wasm = this.wasm;
    if (wasm === undefined) return false;
    if (wasm.full(end - start)) this.handOver();
    if (!wasm.line(b, start, end, partition, offset, timestamp)) return false;
    this.fast++;
    this.wasmLines++;
    return true;
  }

  /** The WebAssembly transcoder's lines, written here (before any other line, and before the chunks are taken). */
  private handOver(): void {
    const wasm = this.wasm;
    if (wasm === undefined || wasm.pending === 0) return;
    const lines = wasm.lines();
    this.lineStart = this.pos;
    this.room(lines.length);
    this.buf.set(lines, this.pos);
    this.pos += lines.length;
    this.lineStart = this.pos;
    wasm.pending = 0;
  }

  override take(): Buffer[] {
    this.handOver();
    return super.take();
  }

  /**
   * One record's line, fast when it is a publish in event-codec's layout; true when it was in the
   * request's scope (written), false when not.
   */
  record(record: LogRecord, request: ScopeRequest, fast = true): boolean {
    if (record.timestamp < request.from || record.timestamp > request.to) return false;
    if (fast && record.topic === Topics.messages) {
      if (!inScope(record, request)) return false;
      // a value of its own, not one visited before
      this.wasm?.forget();
      if (this.wasmLine(record.value, 0, record.value.length, record.partition, record.offset, record.timestamp)) return true;
      this.handOver();
      this.lineStart = this.pos;
      if (this.publishOrDecline(record.value, 0, record.value.length, record.partition, record.offset, record.timestamp, hashOfText(record.key))) {
        this.lineStart = this.pos;
        this.fast++;
        return true;
      }
      this.pos = this.lineStart;
    }
    const line = lineOf(record, request, this.countForeign);
    if (!line) return false;
    this.handOver();
    this.generic++;
    this.text(`${JSON.stringify(line)}\n`);
    return true;
  }

  /**
   * A record the log visits in place (Log.scan: the embedded log's segments, no record object):
   * its scope checked on its key's bytes, a publish transcoded where it lies. As record() otherwise.
   */
  visit(topic: Topic, partition: number, offset: number, timestamp: number, bytes: Uint8Array, start: number, end: number, key: RecordKeyBytes, scope: KeyScope, request: ScopeRequest): boolean {
    if (timestamp < request.from || timestamp > request.to) return false;
    if (key.text === undefined ? !scope.holds(topic, key.keyBytes, key.start, key.end) : !scope.holdsText(topic, key.text)) return false;
    if (topic === Topics.messages) {
      if (this.wasmLine(bytes, start, end, partition, offset, timestamp)) return true;
      this.handOver();
      this.lineStart = this.pos;
      const hash = key.text === undefined ? hashOfBytes(key.keyBytes, key.start, key.end) : hashOfText(key.text);
      if (this.publishOrDecline(bytes, start, end, partition, offset, timestamp, hash)) {
        this.lineStart = this.pos;
        this.fast++;
        return true;
      }
      this.pos = this.lineStart;
    }
    const text = key.text ?? Buffer.from(key.keyBytes.buffer, key.keyBytes.byteOffset + key.start, key.end - key.start).toString('utf8');
    return this.record({ topic, partition, offset, timestamp, key: text, value: bytes.subarray(start, end) }, request, false);
  }

  // The transcoder: b is the value, positions into it; the output at this.pos.

  /**
   * publish(), a throw declined as a shape it does not know: its walks recurse, and a record's
   * maps and lists nested some thousands deep (no record of the service's: src/log/event-shape.ts)
   * ran out of stack (RangeError), which ended the replay. The caller drops what it wrote.
   */
  private publishOrDecline(b: Uint8Array, start: number, end: number, partition: number, offset: number, timestamp: number, hash: number): boolean {
    try {
      return this.publish(b, start, end, partition, offset, timestamp, hash);
    } catch (err) {
      if (err instanceof RangeError) return NOT_FAST;
      throw err;
    }
  }

  /** Whether the record was written: false for the generic path (not a publish, or not in the layout read here). */
  private publish(b: Uint8Array, start: number, end: number, partition: number, offset: number, timestamp: number, hash: number): boolean {
    this.limit = end;
    if (b !== this.input) {
      this.input = b;
      this.inputView = new DataView(b.buffer, b.byteOffset, b.byteLength);
    }
    // Room for the whole line, once: no byte of a value gives more than 12 of JSON (an escape's 6,
    // written twice for the credential's), and the frame is under 1 KiB. byte(), bytes(), int() and a
    // string's copy write within it unchecked; the other writers (ascii) keep it reserved past them.
    this.reserve = 12 * (end - start) + 1024;
    this.room(this.reserve);
    // The event's fields before its messages, as a publish of a key of the same hash had them: the
    // same bytes give the same JSON, copied whole (one compare, one copy), not read field by field.
    const known = this.prefixAt(hash, b, start, end);
    const hit = known !== undefined;
    let n = 0;
    let messagesAt: number;
    const at = this.eventAt;
    const order = this.eventOrder;
    if (known !== undefined) messagesAt = start + known.input.length;
    else {
      let p = start;
      const h = b[p];
      if (h >= 0x80 && h <= 0x8f) {
        n = h & 0x0f;
        p++;
      } else return NOT_FAST;
      // Each field's value span, by field number (-1: absent).
      for (let f = 0; f < at.length; f++) at[f] = -1;
      for (let i = 0; i < n; i++) {
        const field = EVENT_TABLE.keyOf(b, p);
        if (field < 0 || at[field] >= 0) return NOT_FAST;
        p = skip(b, p, end);
        at[field] = p;
        order[i] = field;
        // The messages, last as event-codec writes them, are read (and bounds-checked) below: not walked twice.
        if (field === E_MESSAGES && i === n - 1) break;
        p = skip(b, p, end);
        if (p < 0) return NOT_FAST;
      }
      if (at[E_TYPE] < 0 || !strEquals(b, at[E_TYPE], EVENT_TYPE)) return NOT_FAST;
      messagesAt = at[E_MESSAGES];
      if (messagesAt < 0) return NOT_FAST;
    }
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

    this.bytes(this.lineHead(partition));
    this.int(offset);
    this.bytes(T_TIME);
    this.int(timestamp);
    this.bytes(T_EVENT);
    // where the event's fields' JSON starts and ends, and the key name's in the credential (from the line's start: a chunk may move)
    let fieldsFrom = 0;
    let fieldsTo = 0;
    if (known !== undefined) {
      this.copy(known.output);
    } else {
      fieldsFrom = this.pos - this.lineStart;
      let first = true;
      for (let i = 0; i < n; i++) {
        const field = order[i];
        if (field === E_MESSAGES) continue;
        if (!first) this.byte(0x2c);
        first = false;
        if (field === E_TYPE) {
          // strEquals checked it above
          this.bytes(T_TYPE);
          continue;
        }
        this.bytes(EVENT_KEY_TEXT[field]);
        if (!this.value(b, at[field])) return NOT_FAST;
      }
      if (!first) this.byte(0x2c);
      this.bytes(EVENT_KEY_TEXT[E_MESSAGES]);
      this.byte(0x5b);
      fieldsTo = this.pos - this.lineStart;
    }
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
      for (let f = 0; f < ma.length; f++) ma[f] = -1;
      for (let f = 0; f < fields; f++) {
        const field = MESSAGE_TABLE.keyOf(b, m);
        if (field < 0 || ma[field] >= 0) return NOT_FAST;
        m = skip(b, m, end);
        ma[field] = m;
        m = skip(b, m, end);
        if (m < 0) return NOT_FAST;
      }
      if (i === 0) {
        clientIdAt = ma[M_CLIENTID];
        connectionIdAt = ma[M_CONNECTIONID];
      }
      if (i > 0) this.byte(0x2c);
      this.byte(0x7b);
      let any = false;
      for (let w = 0; w < WIRE_ORDER.length; w++) {
        const field = WIRE_ORDER[w];
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
          const s = spanStart(b, dataAt);
          this.ascii(`"${Buffer.from(b.buffer, b.byteOffset + s, spanLength(b, dataAt)).toString('base64')}"`);
        } else if (!this.value(b, dataAt)) return NOT_FAST;
      }
      if (encodingAt >= 0 || binary) {
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[M_ENCODING]);
        if (binary) {
          // `${encoding}/base64`, or 'base64' (an empty encoding too, as messageToWire does)
          // (the encoding as the decoder reads it: bytes that are not UTF-8, a lone surrogate's among them, its own way)
          if (encodingAt >= 0 && spanLength(b, encodingAt) > 0) {
            const encoding = unpackFirst(b.subarray(encodingAt, end)) as string;
            this.ascii(JSON.stringify(`${encoding}/base64`));
          } else this.bytes(T_BASE64);
        } else if (!this.value(b, encodingAt)) return NOT_FAST;
      }
      for (let w = 0; w < WIRE_AFTER_DATA.length; w++) {
        const field = WIRE_AFTER_DATA[w];
        if (ma[field] < 0) continue;
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[field]);
        if (!this.value(b, ma[field])) return NOT_FAST;
      }
      this.byte(0x7d);
    }
    this.bytes(T_END_EVENT);
    const keyNameAt = hit ? -1 : at[E_KEYNAME];
    const knownKeyName = known?.keyName;
    let keyNameFrom = 0;
    let keyNameTo = 0;
    if (keyNameAt >= 0 || knownKeyName !== undefined || clientIdAt >= 0 || connectionIdAt >= 0) {
      this.bytes(T_CREDENTIAL);
      let any = false;
      if (knownKeyName !== undefined) {
        any = true;
        this.copy(knownKeyName);
      } else if (keyNameAt >= 0) {
        any = true;
        keyNameFrom = this.pos - this.lineStart;
        this.bytes(EVENT_KEY_TEXT[E_KEYNAME]);
        if (!this.value(b, keyNameAt)) return NOT_FAST;
        keyNameTo = this.pos - this.lineStart;
      }
      if (clientIdAt >= 0) {
        if (any) this.byte(0x2c);
        any = true;
        this.bytes(MESSAGE_KEY_TEXT[M_CLIENTID]);
        if (!this.value(b, clientIdAt)) return NOT_FAST;
      }
      if (connectionIdAt >= 0) {
        if (any) this.byte(0x2c);
        this.bytes(MESSAGE_KEY_TEXT[M_CONNECTIONID]);
        if (!this.value(b, connectionIdAt)) return NOT_FAST;
      }
      this.byte(0x7d);
    }
    this.bytes(T_END_LINE);
    // The messages last (event-codec's layout): what came before them is this slot's prefix now.
    if (!hit && order[n - 1] === E_MESSAGES) {
      const line = this.lineStart;
      if (this.prefixes.size >= PREFIXES) this.prefixes.clear();
      this.prefixes.set(hash, {
        input: new Text(b.subarray(start, messagesAt)),
        output: new Text(this.buf.subarray(line + fieldsFrom, line + fieldsTo)),
        keyName: keyNameAt >= 0 ? new Text(this.buf.subarray(line + keyNameFrom, line + keyNameTo)) : undefined,
      });
    }
    return true;
  }

  /** The prefix under hash when the value b[start, end) starts with it (and goes on past it). */
  private prefixAt(hash: number, b: Uint8Array, start: number, end: number): Prefix | undefined {
    const known = this.prefixes.get(hash);
    if (known === undefined) return undefined;
    // compared 4 bytes at a time in JavaScript (Buffer.compare, a native call, cost 5% of the replay)
    const input = known.input;
    const n = input.length;
    if (n >= end - start) return undefined;
    const words = this.inputView;
    const want = input.view;
    let i = 0;
    for (; i + 4 <= n; i += 4) if (words.getInt32(start + i, true) !== want.getInt32(i, true)) return undefined;
    const tail = input.bytes;
    for (; i < n; i++) if (b[start + i] !== tail[i]) return undefined;
    return known;
  }

  /** Publishes' fields before their messages (MessagePack and JSON), by their key's hash. */
  private readonly prefixes = new Map<number, Prefix>();

  private readonly eventAt = new Int32Array(EVENT_KEYS.length);
  private readonly eventOrder = new Int32Array(16);
  private readonly messageAt = new Int32Array(MESSAGE_KEYS.length);

  /** A line's start up to its offset, per partition. */
  private lineHead(partition: number): Text {
    let head = this.heads[partition];
    if (head === undefined) {
      head = new Text(`{"topic":"messages","partition":${JSON.stringify(partition)},"offset":`);
      if (partition >= 0 && partition < 4096) this.heads[partition] = head;
    }
    return head;
  }

  private readonly heads: Text[] = [];

}

/**
 * The request's NDJSON, a chunk at a time (partition by partition, so each channel's in log
 * order), with the progress of the reading. `reuseChunks`: the reader is done with a chunk when it
 * asks for the next one (it has written it, not kept it), and its buffer is written again: no new
 * 256 KiB buffer (and its collection, and the system's fresh pages) every 256 KiB of output.
 */
export async function* replayNdjson(log: Log, request: ScopeRequest, onProgress: (p: ScopeProgress) => void = () => {}, reuseChunks = false): AsyncGenerator<Buffer> {
  const { parts, progress } = await readingPlan(log, request);
  const out = new NdjsonChunks();
  /** the chunks written so far, handed out one by one (and, reused, given back) */
  const handOut = function* (chunks: Buffer[]): Generator<Buffer> {
    for (const chunk of chunks) {
      yield chunk;
      if (reuseChunks) out.reuse(chunk);
    }
  };
  if (log.scan) {
    // The embedded log: its segments read in place, no record object made (the raw read makes one a record).
    const scope = new KeyScope(request);
    for (const { topic, partition, end } of parts) {
      const visit: RecordVisitor = (offset, timestamp, bytes, start, stop, key) => {
        if (out.visit(topic, partition, offset, timestamp, bytes, start, stop, key, scope, request)) progress.found++;
      };
      for (let from = 0; from < end; ) {
        out.scanStarts();
        const scanned = await log.scan(topic, partition, from, Math.min(5000, end - from), visit);
        if (scanned.count === 0) break;
        from = scanned.next;
        progress.read += scanned.count;
        onProgress(progress);
        if (out.full.length > 0) yield* handOut(out.full.splice(0));
      }
    }
    yield* handOut(out.take());
    return;
  }
  for (const { topic, partition, end } of parts) {
    for await (const records of readPartition(log, topic, partition, end)) {
      for (let i = 0; i < records.length; i++) if (out.record(records[i], request)) progress.found++;
      if (out.foreign > 0) progress.foreign = out.foreign;
      progress.read += records.length;
      onProgress(progress);
      if (out.full.length > 0) yield* handOut(out.full.splice(0));
    }
  }
  yield* handOut(out.take());
}
