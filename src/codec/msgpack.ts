import { Decoder, Encoder } from '@msgpack/msgpack';

// One encoder and one decoder for the process: @msgpack's encode()/decode() build a new one per
// call, which showed up in the publish path's profile. Both are synchronous, so sharing is safe.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

// Small values are copied into a shared slab instead of each getting an ArrayBuffer of its own:
// allocating (and later collecting) one ArrayBuffer per log event was a fifth of the publish
// path's main-thread time. A slab region is written once and never reused; the slab is freed when
// no value in it is referenced any more. Same idea as Node's Buffer pool.
const SLAB_BYTES = 64 * 1024;
const POOLED_MAX = 4 * 1024;
let slab = new Uint8Array(SLAB_BYTES);
let slabUsed = 0;

/**
 * MessagePack bytes of a value (undefined fields left out): a view that is safe to keep and never
 * overwritten. Small values share their ArrayBuffer with others, so never transfer `.buffer` to
 * another thread.
 */
export function packValue(value: unknown): Uint8Array {
  return pooled(encoder.encodeSharedRef(value));
}

/** A copy of bytes that are about to be overwritten: in the slab when small, else on its own. */
function pooled(bytes: Uint8Array): Uint8Array {
  // new Uint8Array(view) copies (a Buffer's slice() would not).
  if (bytes.byteLength > POOLED_MAX) return new Uint8Array(bytes);
  if (slabUsed + bytes.byteLength > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const out = slab.subarray(slabUsed, slabUsed + bytes.byteLength);
  out.set(bytes);
  // 8-byte alignment keeps every view's offset a multiple of 8, as allocations are.
  slabUsed += (bytes.byteLength + 7) & ~7;
  return out;
}

// A string's leading U+FEFF is kept: @msgpack/msgpack decodes a string of more than 200 bytes
// (its TEXT_DECODER_THRESHOLD) with a WHATWG TextDecoder, which takes a leading EF BB BF for a byte
// order mark and drops it, so a message whose data or name began with U+FEFF came back from the
// log one character short (history, the audit replay), while shorter strings kept theirs. Its
// string decoding is wrapped here (a method of its own, not declared: checked by the tests of
// test/unit/msgpack-bom.test.ts at that length and on either side of it).
const STRINGS_DECODED_BY_TEXT_DECODER = 200;
const keepingBom = new TextDecoder('utf-8', { ignoreBOM: true });
type StringDecoding = { decodeUtf8String(byteLength: number, headerOffset: number): string; bytes: Uint8Array; pos: number };
const strings = decoder as unknown as StringDecoding;
const decodeUtf8String = strings.decodeUtf8String;
strings.decodeUtf8String = function (this: StringDecoding, byteLength: number, headerOffset: number): string {
  if (byteLength <= STRINGS_DECODED_BY_TEXT_DECODER) return decodeUtf8String.call(this, byteLength, headerOffset);
  const at = this.pos + headerOffset;
  const b = this.bytes;
  // (called first: its checks, and it moves past the string)
  const s = decodeUtf8String.call(this, byteLength, headerOffset);
  return b[at] === 0xef && b[at + 1] === 0xbb && b[at + 2] === 0xbf ? keepingBom.decode(b.subarray(at, at + byteLength)) : s;
};

export function unpackValue(bytes: Uint8Array): unknown {
  return decoder.decode(bytes);
}

/**
 * The first value of bytes, whatever follows it, as unpackValue reads it inside a larger value:
 * a string whose last bytes begin a UTF-8 sequence they do not finish (not UTF-8: the log never
 * holds one as the service writes it) is read on into the bytes after it, as the library's decoder
 * does, not cut at its end (the audit replay's transcoder, src/audit/json-chunks.ts, reads values
 * out of a record this way, to say what the whole record's decoding says).
 */
export function unpackFirst(bytes: Uint8Array): unknown {
  for (const value of decoder.decodeMulti(bytes)) return value;
  return undefined;
}

/**
 * Writes MessagePack field by field, for the hot event shapes whose fields are known (see
 * src/log/event-codec.ts): no generic walk over keys, direct property reads. Strings that are plain
 * ASCII are written a byte a character; any other value goes through the shared encoder. The
 * output uses the same forms as the shared encoder (smallest header that fits), so both give the
 * same bytes for the same value.
 */
export class MsgpackWriter {
  private buf = Buffer.allocUnsafeSlow(16 * 1024);
  private pos = 0;

  reset(): this {
    this.pos = 0;
    // One huge value must not keep its buffer for the life of the process.
    if (this.buf.length > 1024 * 1024) this.buf = Buffer.allocUnsafeSlow(16 * 1024);
    return this;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  private header(n: number, fix: number, fixMax: number, c8: number | undefined, c16: number, c32: number): void {
    this.room(5);
    const b = this.buf;
    if (n < fixMax) b[this.pos++] = fix + n;
    else if (c8 !== undefined && n < 0x100) {
      b[this.pos++] = c8;
      b[this.pos++] = n;
    } else if (n < 0x10000) {
      b[this.pos++] = c16;
      this.pos = b.writeUInt16BE(n, this.pos);
    } else {
      b[this.pos++] = c32;
      this.pos = b.writeUInt32BE(n, this.pos);
    }
  }

  map(size: number): this {
    this.header(size, 0x80, 16, undefined, 0xde, 0xdf);
    return this;
  }

  array(size: number): this {
    this.header(size, 0x90, 16, undefined, 0xdc, 0xdd);
    return this;
  }

  /** A map key (the field names written this way are ASCII, so no encoding is needed). */
  key(name: string): this {
    return this.string(name);
  }

  string(s: string): this {
    if (typeof s !== 'string') return this.value(s);
    const n = s.length;
    if (n < 0x10000) {
      // ASCII: one byte a character (anything else goes through the shared encoder).
      const start = this.pos;
      this.header(n, 0xa0, 32, 0xd9, 0xda, 0xdb);
      this.room(n);
      const b = this.buf;
      const at = this.pos;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) {
          this.pos = start;
          return this.raw(encoder.encodeSharedRef(s));
        }
        b[at + i] = c;
      }
      this.pos = at + n;
      return this;
    }
    return this.raw(encoder.encodeSharedRef(s));
  }

  /** A number: whole numbers from 0 to 2^53 in the smallest unsigned form, others as the shared encoder writes them. */
  number(n: number): this {
    if (!Number.isSafeInteger(n) || n < 0) return this.value(n);
    this.room(9);
    const b = this.buf;
    if (n < 0x80) b[this.pos++] = n;
    else if (n < 0x100) {
      b[this.pos++] = 0xcc;
      b[this.pos++] = n;
    } else if (n < 0x10000) {
      b[this.pos++] = 0xcd;
      this.pos = b.writeUInt16BE(n, this.pos);
    } else if (n < 0x1_0000_0000) {
      b[this.pos++] = 0xce;
      this.pos = b.writeUInt32BE(n, this.pos);
    } else {
      b[this.pos++] = 0xcf;
      this.pos = b.writeUInt32BE(Math.floor(n / 0x1_0000_0000), this.pos);
      this.pos = b.writeUInt32BE(n >>> 0, this.pos);
    }
    return this;
  }

  /** Any value: a string as string() writes it, anything else through the shared encoder. */
  value(v: unknown): this {
    return typeof v === 'string' ? this.string(v) : this.raw(encoder.encodeSharedRef(v));
  }

  raw(bytes: Uint8Array): this {
    this.room(bytes.byteLength);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.byteLength;
    return this;
  }

  /** The bytes written, as a value that is safe to keep (see packValue). */
  done(): Uint8Array {
    return pooled(this.buf.subarray(0, this.pos));
  }
}
