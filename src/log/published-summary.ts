/**
 * What the stats projection needs of a `messages.published` event (app, channel, transport, how
 * many messages and their data size), read straight from its MessagePack bytes without building
 * the event: decoding every message (ids, data strings) and collecting that garbage was some 60% of
 * a stats rebuild's time (issue 14, measured with the profiler). Anything unexpected (another event,
 * data that is neither text nor bytes, a string that is not UTF-8 where base64 is counted) gives
 * undefined, and the caller decodes the event as usual, so the result is the same either way
 * (test/unit/published-summary.test.ts compares the two on random events).
 */
export interface PublishedSummary {
  appId: string;
  channel: string;
  transport: string;
  count: number;
  /** the sum of dataSize(data, encoding) over the messages */
  data: number;
}

const BASE64_TAIL = /(^|\/)base64$/;

/** The names read, as their UTF-8 bytes. */
const NAME = Object.fromEntries(
  Object.entries({ type: 'type', appId: 'appId', channel: 'channel', transport: 'transport', messages: 'messages', published: 'messages.published', data: 'data', encoding: 'encoding' }).map(
    ([k, v]) => [k, new TextEncoder().encode(v)],
  ),
) as Record<'type' | 'appId' | 'channel' | 'transport' | 'messages' | 'published' | 'data' | 'encoding', Uint8Array>;

class Unexpected extends Error {}
const unexpected = new Unexpected();

export function summarizePublished(value: Uint8Array): PublishedSummary | undefined {
  const into: PublishedSummary = { appId: '', channel: '', transport: '', count: 0, data: 0 };
  return readPublished(value, 0, value.length, into) ? into : undefined;
}

/**
 * summarizePublished of the event at bytes[start, end), written into `into` (a rebuild reuses one
 * object for every record); false where the event must be decoded.
 */
export function readPublished(bytes: Uint8Array, start: number, end: number, into: PublishedSummary): boolean {
  end = Math.min(end, bytes.length);
  if (fastSummary(bytes, start, end, into)) return true;
  reader.reset(bytes, start, end);
  try {
    return reader.summary(into);
  } catch (err) {
    if (err === unexpected) return false;
    throw err;
  } finally {
    reader.reset(EMPTY);
  }
}

const EMPTY = new Uint8Array(0);

/** Writes a summary into `into`; true. */
function fill(into: PublishedSummary, appId: string, channel: string, transport: string, count: number, data: number): true {
  into.appId = appId;
  into.channel = channel;
  into.transport = transport;
  into.count = count;
  into.data = data;
  return true;
}

/** A cursor over MessagePack bytes (methods, not closures: this runs once per record). */
class Reader {
  private b: Uint8Array = EMPTY;
  private pos = 0;
  private end = 0;
  /** the last string read: payload start and length */
  private strStart = 0;
  private strLen = 0;

  reset(b: Uint8Array, start = 0, end = b.length): void {
    this.b = b;
    this.pos = start;
    this.end = end;
  }

  private need(n: number): void {
    if (this.pos + n > this.end) throw unexpected;
  }

  private u8(): number {
    this.need(1);
    return this.b[this.pos++];
  }

  private u16(): number {
    this.need(2);
    const v = (this.b[this.pos] << 8) | this.b[this.pos + 1];
    this.pos += 2;
    return v;
  }

  private u32(): number {
    this.need(4);
    const b = this.b;
    const v = ((b[this.pos] << 24) | (b[this.pos + 1] << 16) | (b[this.pos + 2] << 8) | b[this.pos + 3]) >>> 0;
    this.pos += 4;
    return v;
  }

  /** Entries of a map (keys and values) or array at type byte t, or -1 for any other type. */
  private container(t: number): number {
    if (t >= 0x80 && t <= 0x8f) return (t & 0x0f) * 2;
    if (t >= 0x90 && t <= 0x9f) return t & 0x0f;
    if (t === 0xde) return this.u16() * 2;
    if (t === 0xdf) return this.u32() * 2;
    if (t === 0xdc) return this.u16();
    if (t === 0xdd) return this.u32();
    return -1;
  }

  /** Reads the string at type byte t into strStart/strLen; false if it is not a string. */
  private str(t: number): boolean {
    let len: number;
    if (t >= 0xa0 && t <= 0xbf) len = t & 0x1f;
    else if (t === 0xd9) len = this.u8();
    else if (t === 0xda) len = this.u16();
    else if (t === 0xdb) len = this.u32();
    else return false;
    this.need(len);
    this.strStart = this.pos;
    this.strLen = len;
    this.pos += len;
    return true;
  }

  private bin(t: number): number {
    let len: number;
    if (t === 0xc4) len = this.u8();
    else if (t === 0xc5) len = this.u16();
    else if (t === 0xc6) len = this.u32();
    else return -1;
    this.need(len);
    this.pos += len;
    return len;
  }

  /** Skips one value of any type, nested ones included. */
  private skip(): void {
    let pending = 1;
    while (pending > 0) {
      pending--;
      const t = this.u8();
      if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) continue;
      const n = this.container(t);
      if (n >= 0) {
        pending += n;
        continue;
      }
      if (this.str(t) || this.bin(t) >= 0) continue;
      let size: number;
      switch (t) {
        case 0xcc: case 0xd0: size = 1; break;
        case 0xcd: case 0xd1: size = 2; break;
        case 0xca: case 0xce: case 0xd2: size = 4; break;
        case 0xcb: case 0xcf: case 0xd3: size = 8; break;
        case 0xd4: size = 2; break;
        case 0xd5: size = 3; break;
        case 0xd6: size = 5; break;
        case 0xd7: size = 9; break;
        case 0xd8: size = 17; break;
        case 0xc7: size = this.u8() + 1; break;
        case 0xc8: size = this.u16() + 1; break;
        case 0xc9: size = this.u32() + 1; break;
        default: throw unexpected; // 0xc1: never used
      }
      this.need(size);
      this.pos += size;
    }
  }

  /** Whether the last string read is this name (its bytes, see NAME). */
  private strIs(name: Uint8Array): boolean {
    if (this.strLen !== name.length) return false;
    const b = this.b;
    const start = this.strStart;
    for (let i = 0; i < name.length; i++) if (b[start + i] !== name[i]) return false;
    return true;
  }

  private text(): string {
    return this.strLen <= MAX_INTERNED ? intern(this.b, this.strStart, this.strLen) : utf8(this.b, this.strStart, this.strLen);
  }

  summary(into: PublishedSummary): boolean {
    const fields = this.container(this.u8());
    if (fields < 0 || fields % 2 !== 0) return false;
    let type = false;
    let appId: string | undefined;
    let channel: string | undefined;
    let transport: string | undefined;
    let count = -1;
    let data = 0;
    for (let f = 0; f < fields / 2; f++) {
      if (!this.str(this.u8())) return false;
      // The field's name by its length first: one comparison per field, not one per name.
      const len = this.strLen;
      const field = len === 4 ? NAME.type : len === 5 ? NAME.appId : len === 7 ? NAME.channel : len === 9 ? NAME.transport : len === 8 ? NAME.messages : undefined;
      if (field === undefined || !this.strIs(field)) {
        this.skip();
      } else if (field === NAME.type) {
        if (!this.str(this.u8()) || !this.strIs(NAME.published)) return false;
        type = true;
      } else if (field === NAME.appId) {
        if (!this.str(this.u8())) return false;
        appId = this.text();
      } else if (field === NAME.channel) {
        if (!this.str(this.u8())) return false;
        channel = this.text();
      } else if (field === NAME.transport) {
        if (!this.str(this.u8())) return false;
        transport = this.text();
      } else {
        const t = this.u8();
        if (!((t >= 0x90 && t <= 0x9f) || t === 0xdc || t === 0xdd)) return false;
        count = this.container(t);
        for (let m = 0; m < count; m++) {
          const size = this.messageData();
          if (size < 0) return false;
          data += size;
        }
      }
    }
    if (this.pos !== this.end || !type || appId === undefined || channel === undefined || transport === undefined || count < 0) return false;
    return fill(into, appId, channel, transport, count, data);
  }

  /** dataSize(data, encoding) of the message map here, or -1 when the event must be decoded. */
  private messageData(): number {
    const entries = this.container(this.u8());
    if (entries < 0 || entries % 2 !== 0) return -1;
    let strStart = -1;
    let strLen = 0;
    let bytes = 0;
    let base64 = false;
    for (let e = 0; e < entries / 2; e++) {
      if (!this.str(this.u8())) return -1;
      if (this.strLen === 4 && this.strIs(NAME.data)) {
        const t = this.u8();
        if (t === 0xc0) continue;
        if (this.str(t)) {
          strStart = this.strStart;
          strLen = this.strLen;
          continue;
        }
        const len = this.bin(t);
        if (len < 0) return -1; // JSON data: counted by its JSON text, so decoded
        bytes = len;
      } else if (this.strLen === 8 && this.strIs(NAME.encoding)) {
        if (!this.str(this.u8())) return -1;
        base64 = BASE64_TAIL.test(this.text());
      } else {
        this.skip();
      }
    }
    if (strStart < 0) return bytes;
    const b = this.b;
    if (base64) {
      // Buffer.byteLength(s, 'base64'), for the ASCII text that base64 is.
      let n = strLen;
      for (let i = strStart; i < strStart + n; i++) if (b[i] >= 0x80) return -1;
      if (n > 0 && b[strStart + n - 1] === 0x3d) n--;
      if (n > 1 && b[strStart + n - 1] === 0x3d) n--;
      return (n * 3) >>> 2;
    }
    // MessagePack strings are UTF-8: their byte length. A lone surrogate (ED A0..BF) may decode
    // to replacement characters of another length: decoded as usual.
    for (let i = strStart; i < strStart + strLen; i++) {
      if (b[i] === 0xed && b[i + 1] >= 0xa0) return -1;
    }
    return strLen;
  }
}

const reader = new Reader();

/**
 * Strings read before, by their UTF-8 bytes: the app ids, channel names and transports of a log
 * repeat record after record, and decoding each anew was a sixth of a stats rebuild's time (issue
 * 14, profiled), most of it the garbage. A direct-mapped table: a slot holds the last string whose
 * bytes hashed to it, so the memory is bounded whatever the log holds.
 */
const MAX_INTERNED = 128;
const SLOTS = 4096;
const internedBytes: (Uint8Array | undefined)[] = new Array(SLOTS).fill(undefined);
const internedText: string[] = new Array(SLOTS).fill('');

const utf8 = (b: Uint8Array, start: number, len: number): string => Buffer.from(b.buffer, b.byteOffset + start, len).toString('utf8');

function intern(b: Uint8Array, start: number, len: number): string {
  // FNV-1a of the bytes.
  let h = 0x811c9dc5;
  for (let i = start; i < start + len; i++) h = Math.imul(h ^ b[i], 0x01000193);
  const slot = (h >>> 0) & (SLOTS - 1);
  const known = internedBytes[slot];
  if (known !== undefined && known.length === len) {
    let same = true;
    for (let i = 0; i < len; i++) {
      if (known[i] !== b[start + i]) {
        same = false;
        break;
      }
    }
    if (same) return internedText[slot];
  }
  const text = utf8(b, start, len);
  // A copy: a Buffer's slice is a view, which would keep the whole log segment it came from.
  internedBytes[slot] = Uint8Array.prototype.slice.call(b, start, start + len);
  internedText[slot] = text;
  return text;
}

/**
 * The layout encodePublished writes (src/log/event-codec.ts), read straight through: five fields in
 * their order, messages whose fields are strings or numbers but for `data`. Anything else gives
 * undefined and the Reader above reads the event field by field (the same result, some four times
 * slower: a method call per value).
 */
const HEAD = bytesOf(new Uint8Array([0x85, 0xa4, ...NAME.type, 0xb2, ...NAME.published, 0xa5, ...NAME.appId]));
/** HEAD after its map header: 5 fields, or 6 or 7 with clientIds and keyName after the messages */
const HEAD_FIELDS = bytesOf(HEAD.bytes.subarray(1));
const CLIENT_IDS_KEY = bytesOf(new Uint8Array([0xa9, ...new TextEncoder().encode('clientIds')]));
const KEY_NAME_KEY = bytesOf(new Uint8Array([0xa7, ...new TextEncoder().encode('keyName')]));
const CHANNEL_KEY = bytesOf(new Uint8Array([0xa7, ...NAME.channel]));
const TRANSPORT_KEY = bytesOf(new Uint8Array([0xa9, ...NAME.transport]));
const MESSAGES_KEY = bytesOf(new Uint8Array([0xa8, ...NAME.messages]));
const DATA = bytesOf(NAME.data);
const ENCODING = bytesOf(NAME.encoding);

/** Where the string at p starts and ends (fixstr, str 8, str 16) within `end`, or -1; sets `strEnd`. */
let strEnd = 0;
function strAt(b: Uint8Array, p: number, end: number): number {
  const t = b[p];
  let start: number;
  let len: number;
  if (t >= 0xa0 && t <= 0xbf) {
    start = p + 1;
    len = t & 0x1f;
  } else if (t === 0xd9) {
    start = p + 2;
    len = b[p + 1];
  } else if (t === 0xda) {
    start = p + 3;
    len = (b[p + 1] << 8) | b[p + 2];
  } else return -1;
  strEnd = start + len;
  return strEnd <= end && p < end ? start : -1;
}

/** Bytes to look for, with their whole 32-bit words (big-endian) to compare four at a time. */
interface Bytes {
  bytes: Uint8Array;
  words: Uint32Array;
}

function bytesOf(bytes: Uint8Array): Bytes {
  const words = new Uint32Array(bytes.length >>> 2);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < words.length; i++) words[i] = view.getUint32(4 * i);
  return { bytes, words };
}

/** The bytes fastSummary reads, as a DataView (one per buffer: a log segment holds many records). */
let viewOf: Uint8Array | undefined;
let view: DataView = new DataView(new ArrayBuffer(0));

/** Whether `prefix` is at p of the buffer `view` shows, within `end` (a byte compare was half of fastSummary's time). */
function startsWith(b: Uint8Array, p: number, prefix: Bytes, end: number): boolean {
  const n = prefix.bytes.length;
  if (p + n > end) return false;
  const words = prefix.words;
  for (let i = 0; i < words.length; i++) if (view.getUint32(p + 4 * i) !== words[i]) return false;
  const bytes = prefix.bytes;
  for (let i = words.length * 4; i < n; i++) if (b[p + i] !== bytes[i]) return false;
  return true;
}

/** The short string at p, interned (see intern), or undefined; sets `strEnd`. */
function namedAt(b: Uint8Array, p: number, end: number): string | undefined {
  const start = strAt(b, p, end);
  if (start < 0 || strEnd - start > MAX_INTERNED) return undefined;
  return intern(b, start, strEnd - start);
}

const REST = bytesOf(new TextEncoder().encode('rest'));
const REALTIME = bytesOf(new TextEncoder().encode('realtime'));

/** The transport at p: the two the service writes without a lookup, any other interned. */
function transportAt(b: Uint8Array, p: number, end: number): string | undefined {
  const start = strAt(b, p, end);
  if (start < 0) return undefined;
  const len = strEnd - start;
  if (len === 4 && startsWith(b, start, REST, end)) return 'rest';
  if (len === 8 && startsWith(b, start, REALTIME, end)) return 'realtime';
  return len > MAX_INTERNED ? undefined : intern(b, start, len);
}

/**
 * Where the first 0xED byte at or after `from` is, or -1: one search of a log segment for all its
 * records rather than one a record (a search is bounded by the buffer's end, not the record's).
 * Kept while the reads of one buffer go forwards (a segment's records, in order); a read at or
 * before the last searches again, so a buffer refilled and read from its start is searched anew.
 * The log's buffers never change.
 */
let edIn: Uint8Array | undefined;
let edFrom = 0;
let edAt = -1;
function nextEd(b: Uint8Array, from: number): number {
  if (b !== edIn || from <= edFrom || (edAt !== -1 && edAt < from)) {
    edIn = b;
    edAt = b.indexOf(0xed, from);
  }
  edFrom = from;
  return edAt;
}

function fastSummary(b: Uint8Array, from: number, end: number, into: PublishedSummary): boolean {
  if (b !== viewOf) {
    view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    viewOf = b;
  }
  const header = b[from];
  if (from >= end || header < 0x85 || header > 0x87 || !startsWith(b, from + 1, HEAD_FIELDS, end)) return false;
  const appId = namedAt(b, from + HEAD.bytes.length, end);
  if (appId === undefined || !startsWith(b, strEnd, CHANNEL_KEY, end)) return false;
  const channel = namedAt(b, strEnd + CHANNEL_KEY.bytes.length, end);
  if (channel === undefined || !startsWith(b, strEnd, TRANSPORT_KEY, end)) return false;
  const transport = transportAt(b, strEnd + TRANSPORT_KEY.bytes.length, end);
  if (transport === undefined) return false;
  let p = strEnd;
  if (!startsWith(b, p, MESSAGES_KEY, end)) return false;
  p += MESSAGES_KEY.bytes.length;
  const t = b[p];
  if (p >= end || t < 0x90 || t > 0x9f) return false;
  const count = t & 0x0f;
  p++;
  let data = 0;
  for (let m = 0; m < count; m++) {
    const h = b[p];
    if (p >= end || h < 0x80 || h > 0x8f) return false;
    const fields = h & 0x0f;
    p++;
    let size = 0;
    for (let f = 0; f < fields; f++) {
      const key = strAt(b, p, end);
      if (key < 0) return false;
      p = strEnd;
      const keyLen = strEnd - key;
      const v = b[p];
      // `data`: text without an encoding is counted by its bytes; anything else (an encoding,
      // bytes, JSON) is the Reader's.
      if (keyLen === 4 && startsWith(b, key, DATA, end)) {
        const vs = strAt(b, p, end);
        if (vs < 0) return false;
        // A lone surrogate (ED A0..BF) may decode to characters of another length: the Reader's.
        const ed = nextEd(b, vs);
        if (ed !== -1 && ed < strEnd) return false;
        size = strEnd - vs;
        p = strEnd;
      } else if (keyLen === 8 && startsWith(b, key, ENCODING, end)) {
        return false;
      } else if (strAt(b, p, end) >= 0) {
        p = strEnd;
      } else if (p >= end) {
        return false;
      } else if (v <= 0x7f) {
        p += 1;
      } else if (v === 0xcb || v === 0xcf || v === 0xd3) {
        p += 9;
      } else if (v === 0xce || v === 0xd2 || v === 0xca) {
        p += 5;
      } else {
        return false;
      }
    }
    data += size;
  }
  // The optional fields after the messages, in encodePublished's order.
  let extra = (header & 0x0f) - 5;
  if (extra > 0 && startsWith(b, p, CLIENT_IDS_KEY, end)) {
    p += CLIENT_IDS_KEY.bytes.length;
    if (p >= end || (b[p] !== 0xc2 && b[p] !== 0xc3)) return false;
    p++;
    extra--;
  }
  if (extra > 0 && startsWith(b, p, KEY_NAME_KEY, end)) {
    if (strAt(b, p + KEY_NAME_KEY.bytes.length, end) < 0) return false;
    p = strEnd;
    extra--;
  }
  if (extra !== 0 || p !== end) return false;
  return fill(into, appId, channel, transport, count, data);
}
