// The JSON bytes of the audit replay's NDJSON (ndjson.ts, whose transcoder extends this): a
// buffer of its own per chunk, handed out when full, a line never split between two; constants
// and plain bytes moved 4 at a time through DataViews; whole numbers written as digits with no
// string made; a MessagePack value written as JSON.stringify writes what the decoder gives, its
// strings copied byte for byte with their escapes written in place. Hand-written because the
// replay's speed is measured against the raw log read (issue 27; README: Replay for audits):
// each choice here is one measured there, and said where it is made.
import { isUtf8 } from 'node:buffer';
import { unpackFirst } from '../codec/msgpack.js';
import { isProtoKeyRefusal } from '../codec/msgpack-own-keys.js';
import { nestsDeeperThan } from '../log/event-shape.js';
import { skip, spanLength, spanStart, u32 } from './msgpack-spans.js';
import { T_FALSE, T_NULL, T_TRUE, Text } from './ndjson-layout.js';
import { digits, eightDigits, HEX, PLAIN, SHORT_ESCAPE } from './json-bytes.js';

/** Levels of lists and maps a value written here may nest (the WebAssembly transcoder's NEST_MAX): deeper, the record is declined to the generic path, which applies the log's own rule (RECORD_MAX_DEPTH). */
const VALUE_MAX_DEPTH = 64;

const CHUNK_BYTES = 256 * 1024;
/** Chunks kept to write again (reuse): the most a scan of 5,000 records fills at ~420 bytes a line, and some (4 MiB) */
const SPARE_CHUNKS = 16;
/** From this many bytes a constant is copied by TypedArray.set, below it by a loop (measured: 43 ns against 28 at 32 bytes, 15 against 28 at 8) */
const LONG_COPY = 24;

/** The JSON being written, a chunk at a time. */
export class JsonChunks {
  protected buf = Buffer.allocUnsafe(CHUNK_BYTES);
  /** buf, as 4-byte words are written to it */
  protected view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  /** the value being transcoded, as 4-byte words are read from it (made again for each segment) */
  protected input: Uint8Array = Buffer.alloc(0);
  protected inputView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
  protected pos = 0;
  /** chunks full, to hand out */
  readonly full: Buffer[] = [];
  /** where the line being written starts: a new buffer takes it along, so a line is never split (nor lost when undone) */
  protected lineStart = 0;

  /** chunks handed out and given back (reuse), to write again instead of new ones */
  private readonly spare: Buffer<ArrayBuffer>[] = [];

  /**
   * A chunk handed out (full, take) that its reader is done with: its buffer is written again.
   * A new chunk of 256 KiB for each one written cost the replay a collection and the system's
   * fresh pages every 256 KiB (measured: see replayNdjson).
   */
  reuse(chunk: Buffer): void {
    if (chunk.byteOffset !== 0 || this.spare.length >= SPARE_CHUNKS) return;
    const whole = Buffer.from(chunk.buffer as ArrayBuffer, 0, chunk.buffer.byteLength);
    if (whole.length >= CHUNK_BYTES && whole.buffer !== this.buf.buffer) this.spare.push(whole);
  }

  protected room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const partial = this.pos - this.lineStart;
    const want = Math.max(CHUNK_BYTES, 2 * (partial + n));
    const spare = this.spare.pop();
    const next = spare !== undefined && spare.length >= want ? spare : Buffer.allocUnsafe(want);
    this.buf.copy(next, 0, this.lineStart, this.pos);
    if (this.lineStart > 0) this.full.push(this.buf.subarray(0, this.lineStart));
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.length);
    this.lineStart = 0;
    this.pos = partial;
  }

  /** The chunks written so far (the last one however full), emptied. */
  take(): Buffer[] {
    if (this.pos > 0) {
      this.full.push(this.buf.subarray(0, this.pos));
      this.buf = this.spare.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES);
      this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
      this.pos = 0;
      this.lineStart = 0;
    }
    return this.full.splice(0);
  }

  protected text(s: string): void {
    this.lineStart = this.pos;
    this.room(3 * s.length);
    this.pos += this.buf.write(s, this.pos, 'utf8');
    this.lineStart = this.pos;
  }

  /** the end of the value being transcoded */
  protected limit = 0;
  /** bytes kept free for the rest of the line being transcoded */
  protected reserve = 0;

  protected byte(c: number): void {
    this.buf[this.pos++] = c;
  }

  protected bytes(src: Text): void {
    const n = src.length;
    if (n >= LONG_COPY) {
      this.buf.set(src.bytes, this.pos);
      this.pos += n;
      return;
    }
    this.copy(src);
  }

  /** A constant however long, 4 bytes a store (TypedArray.set, a native call, costs more up to some 100 bytes: measured). */
  protected copy(src: Text): void {
    const n = src.length;
    // 4 bytes a store (DataView's are single instructions once optimised), then the rest
    const out = this.view;
    const from = src.view;
    let o = this.pos;
    let i = 0;
    for (; i + 4 <= n; i += 4, o += 4) out.setInt32(o, from.getInt32(i, true), true);
    const tail = src.bytes;
    const buf = this.buf;
    for (; i < n; i++) buf[o++] = tail[i];
    this.pos = o;
  }

  /** A whole number (an offset, a partition, a time: never negative), its digits written directly. */
  protected int(n: number): void {
    if (!(n >= 0 && n <= Number.MAX_SAFE_INTEGER && Math.floor(n) === n)) {
      this.ascii(JSON.stringify(n));
      return;
    }
    // Digits by 32-bit division, 8 at a time (no string made: a 13-digit time, four a line, made
    // strings that cost more than this and their collection); a time's first digits (the same for
    // 27 hours) kept from the number before.
    const out = this.buf;
    let o = this.pos;
    if (n < 1e8) o = digits(out, o, n);
    else {
      // below 2^53, hi is below 10^8
      const hi = Math.floor(n / 1e8);
      if (hi !== this.high) {
        this.high = hi;
        this.highDigits = digits(this.highText, 0, hi);
      }
      const from = this.highText;
      for (let i = 0; i < this.highDigits; i++) out[o++] = from[i];
      o = eightDigits(out, o, n - hi * 1e8);
    }
    this.pos = o;
  }

  /** the first digits (n / 10^8) of the last number past 10^8, and how many */
  private high = -1;
  private readonly highText = Buffer.alloc(8);
  private highDigits = 0;

  /** Text (JSON already): written as UTF-8. */
  protected ascii(s: string): void {
    // and the rest of the line's reservation (publish)
    this.room(s.length * 3 + this.reserve);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /** A value as JSON.stringify writes what the decoder gives: strings and numbers here, anything else decoded and stringified. */
  protected value(b: Uint8Array, p: number): boolean {
    const h = b[p];
    if ((h >= 0xa0 && h <= 0xbf) || h === 0xd9 || h === 0xda || h === 0xdb) {
      const s = spanStart(b, p);
      const e = s + spanLength(b, p);
      const out = this.buf;
      const view = this.view;
      // publish() made it b's
      const words = this.inputView;
      let o = this.pos;
      out[o++] = 0x22;
      let checked = false;
      for (let i = s; i < e; i++) {
        if (i + 4 <= e) {
          // 4 bytes at once when none needs a look (SWAR: no byte >= 0x80, < 0x20, a quote or a
          // backslash; the tests flag too much at times, never too little), else one by one.
          const w = words.getInt32(i, true);
          const q = w ^ 0x22222222;
          const k = w ^ 0x5c5c5c5c;
          if (((w | (w - 0x20202020) | ((q - 0x01010101) & ~q) | ((k - 0x01010101) & ~k)) & 0x80808080) === 0) {
            view.setInt32(o, w, true);
            o += 4;
            i += 3;
            continue;
          }
        }
        const c = b[i];
        const plain = PLAIN[c];
        if (plain === 1) {
          out[o++] = c;
          continue;
        }
        if (plain === 2) {
          // Non-ASCII: as it is when the string is well-formed UTF-8 (JSON.stringify writes it so),
          // checked once; otherwise as the decoder reads it (its own way with bad bytes), decoded.
          if (!checked && !isUtf8(b.subarray(s, e))) {
            // (read from the bytes to the record's end: the decoder reads a sequence cut short on into them)
            this.ascii(JSON.stringify(unpackFirst(b.subarray(p, this.limit))));
            return true;
          }
          checked = true;
          out[o++] = c;
          continue;
        }
        // An escape as JSON.stringify writes it: \" \\ \b \f \n \r \t, else \u00xx.
        out[o++] = 0x5c;
        const short = SHORT_ESCAPE[c];
        if (short !== 0) out[o++] = short;
        else {
          out[o++] = 0x75;
          out[o++] = 0x30;
          out[o++] = 0x30;
          out[o++] = HEX[c >> 4];
          out[o++] = HEX[c & 0x0f];
        }
      }
      out[o++] = 0x22;
      this.pos = o;
      return true;
    }
    if (h <= 0x7f) {
      this.int(h);
      return true;
    }
    switch (h) {
      case 0xcc:
        this.int(b[p + 1]);
        return true;
      case 0xcd:
        this.int((b[p + 1] << 8) | b[p + 2]);
        return true;
      case 0xce:
        this.int(u32(b, p + 1));
        return true;
      case 0xcf:
        this.int(u32(b, p + 1) * 0x1_0000_0000 + u32(b, p + 5));
        return true;
      case 0xc0:
        this.bytes(T_NULL);
        return true;
      case 0xc2:
        this.bytes(T_FALSE);
        return true;
      case 0xc3:
        this.bytes(T_TRUE);
        return true;
    }
    const end = skip(b, p, this.limit);
    if (end < 0) return false;
    let json: string | undefined;
    try {
      const decoded = unpackFirst(b.subarray(p, this.limit));
      // Lists and maps nested deep: the generic path applies the log's depth rule (src/log/event-shape.ts).
      if (nestsDeeperThan(decoded, VALUE_MAX_DEPTH)) return false;
      json = JSON.stringify(decoded);
    } catch (err) {
      // a map key "__proto__", which the decoder refuses: the generic path reads it (decodeEvent, src/log/event-codec.ts)
      if (isProtoKeyRefusal(err)) return false;
      throw err;
    }
    if (json === undefined) return false;
    this.ascii(json);
    return true;
  }
}
