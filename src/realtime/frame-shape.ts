// Bounds on a client frame's shape, checked on its bytes before it is decoded (issue 22): a frame
// within REALTIME_MAX_FRAME_BYTES could still cost seconds to decode (a MessagePack frame of 1 MB
// nested a million deep stalled every connection for 3.6 s; JSON nested 500,000 deep for 1.4 s; a
// HEARTBEAT of 70,000 keys for 1.0 s). Each walk is one pass over the bytes with no allocation but
// a stack of at most `maxDepth` counters: a few hundred µs a MiB measured (npm run bench: door).
// Hand-written because no decoder bounds depth or width before it builds the value.
import { isUtf8 } from 'node:buffer';
import { newHead, readHead, strIsUtf8 } from '../codec/msgpack-head.js';

/** What a frame may hold: levels of nested arrays and maps, and entries in one of them. */
export interface FrameShapeLimits {
  maxDepth: number;
  maxWidth: number;
}

/** Why a frame was refused before decoding, or undefined when its shape is within the limits. */
export type ShapeFault = 'depth' | 'width' | 'utf8' | undefined;

/**
 * A MessagePack value's nesting and widths within `limits`, and every string in it UTF-8 (the
 * decoder would turn invalid bytes into U+FFFD, silently rewriting what a client sent). A value
 * that ends early passes here and is refused by the decoder.
 */
export function msgpackShape(bytes: Uint8Array, limits: FrameShapeLimits): ShapeFault {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  // remaining[d]: items still to read in the container open at depth d (depth 0: the frame itself).
  const remaining = new Float64Array(limits.maxDepth + 1);
  let depth = 0;
  remaining[0] = 1;
  const head = newHead();
  let pos = 0;
  while (pos < end) {
    while (depth > 0 && remaining[depth] === 0) depth--;
    if (remaining[depth] === 0) break;
    remaining[depth]--;
    if (!readHead(bytes, view, pos, head)) return undefined;
    if (!strIsUtf8(bytes, head, isUtf8)) return 'utf8';
    if (head.container) {
      if (head.entries > limits.maxWidth) return 'width';
      // An empty container is a level too, as JSON's scan counts it.
      if (depth === limits.maxDepth) return 'depth';
      if (head.items > 0) remaining[++depth] = head.items;
    }
    pos = head.next;
  }
  return undefined;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPENERS = new Uint8Array(256);
OPENERS[0x5b] = 1; // [
OPENERS[0x7b] = 1; // {
const CLOSERS = new Uint8Array(256);
CLOSERS[0x5d] = 1; // ]
CLOSERS[0x7d] = 1; // }

/**
 * JSON text's nesting and widths within `limits` (entries counted by the commas at a level, so a
 * malformed text may be counted loosely: JSON.parse refuses it next). Strings are skipped whole.
 */
export function jsonShape(text: Uint8Array, limits: FrameShapeLimits): ShapeFault {
  const commas = new Float64Array(limits.maxDepth + 1);
  let depth = 0;
  const end = text.byteLength;
  for (let pos = 0; pos < end; pos++) {
    const c = text[pos];
    if (c === QUOTE) {
      for (pos++; pos < end; pos++) {
        const s = text[pos];
        if (s === BACKSLASH) pos++;
        else if (s === QUOTE) break;
      }
    } else if (OPENERS[c]) {
      if (depth === limits.maxDepth) return 'depth';
      commas[++depth] = 0;
    } else if (CLOSERS[c]) {
      if (depth > 0) depth--;
    } else if (c === COMMA && depth > 0 && ++commas[depth] >= limits.maxWidth) {
      return 'width';
    }
  }
  return undefined;
}

/** A refused frame's top-level `action` and `msgSerial`, when it has them as numbers: enough to NACK a publish. */
export interface FrameHeader {
  action?: number;
  msgSerial?: number;
}

const ACTION = Buffer.from('action');
const MSG_SERIAL = Buffer.from('msgSerial');

/** Which of the two wanted keys bytes[start, start + length) spells, compared in place (no string made). */
function wantedKey(bytes: Uint8Array, start: number, length: number): keyof FrameHeader | undefined {
  const key = length === ACTION.length ? ACTION : length === MSG_SERIAL.length ? MSG_SERIAL : undefined;
  if (!key) return undefined;
  for (let i = 0; i < length; i++) if (bytes[start + i] !== key[i]) return undefined;
  return key === ACTION ? 'action' : 'msgSerial';
}

const SPACE = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) SPACE[c] = 1;

/** How much of a refused frame is read for its header: its start, and for JSON its end too. */
const HEADER_PREFIX_BYTES = 4096;
const HEADER_ITEMS = 100_000;
/** `"msgSerial":N}` closing JSON text: where the SDK writes it (it sets msgSerial after the messages). */
const TRAILING_MSG_SERIAL = /"msgSerial"\s*:\s*(\d{1,16})\s*}\s*$/;

/**
 * The top-level numeric `action` and `msgSerial` of JSON text, read without decoding it: the
 * top-level keys of its first 4 KiB, and a msgSerial that closes it. Anything else is unknown
 * (the frame is then a protocol error): a refused frame costs a bounded read, however large.
 */
export function jsonHeader(text: Uint8Array): FrameHeader {
  const header: FrameHeader = {};
  const tail = TRAILING_MSG_SERIAL.exec(Buffer.from(text.buffer, text.byteOffset + Math.max(0, text.byteLength - 64), Math.min(64, text.byteLength)).toString('latin1'));
  if (tail) header.msgSerial = Number(tail[1]);
  const end = Math.min(text.byteLength, HEADER_PREFIX_BYTES);
  let depth = 0;
  for (let pos = 0; pos < end; pos++) {
    const c = text[pos];
    if (c === QUOTE) {
      const start = pos + 1;
      for (pos++; pos < end; pos++) {
        const s = text[pos];
        if (s === BACKSLASH) pos++;
        else if (s === QUOTE) break;
      }
      if (depth !== 1) continue;
      const key = wantedKey(text, start, pos - start);
      if (!key) continue;
      // `: <digits>` after the key: a number is read; anything else leaves the field unknown.
      let at = pos + 1;
      while (at < end && SPACE[text[at]]) at++;
      if (text[at] !== 0x3a) continue;
      at++;
      while (at < end && SPACE[text[at]]) at++;
      let n = 0;
      let digits = 0;
      while (at < end && text[at] >= 0x30 && text[at] <= 0x39 && digits < 16) n = n * 10 + text[at++] - 0x30, digits++;
      if (digits > 0 && (at === end || SPACE[text[at]] || text[at] === COMMA || text[at] === 0x7d)) header[key] = n;
      if (header.action !== undefined && header.msgSerial !== undefined) return header;
    } else if (OPENERS[c]) depth++;
    else if (CLOSERS[c]) depth--;
  }
  return header;
}

/** The top-level numeric `action` and `msgSerial` of a MessagePack map, read without decoding the rest (a bounded walk). */
export function msgpackHeader(bytes: Uint8Array): FrameHeader {
  const header: FrameHeader = {};
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  const b0 = bytes[0];
  let entries = b0 >= 0x80 && b0 <= 0x8f ? b0 & 0x0f : b0 === 0xde && end >= 3 ? view.getUint16(1) : b0 === 0xdf && end >= 5 ? view.getUint32(1) : 0;
  let pos = b0 === 0xde ? 3 : b0 === 0xdf ? 5 : 1;
  // Its top-level map's entries, each value skipped by its headers, HEADER_ITEMS values at most in all.
  const budget = { items: HEADER_ITEMS };
  while (entries-- > 0 && pos < end) {
    const k = bytes[pos];
    const key = k >= 0xa0 && k <= 0xbf && pos + 1 + (k & 0x1f) <= end ? wantedKey(bytes, pos + 1, k & 0x1f) : undefined;
    pos = skipMsgpack(bytes, view, pos, budget);
    const v = bytes[pos];
    let value: number | undefined;
    if (v <= 0x7f) value = v;
    else if (v === 0xcc && pos + 2 <= end) value = bytes[pos + 1];
    else if (v === 0xcd && pos + 3 <= end) value = view.getUint16(pos + 1);
    else if (v === 0xce && pos + 5 <= end) value = view.getUint32(pos + 1);
    else if (v === 0xcf && pos + 9 <= end) value = Number(view.getBigUint64(pos + 1));
    if (key !== undefined && value !== undefined) header[key] = value;
    if (header.action !== undefined && header.msgSerial !== undefined) return header;
    pos = skipMsgpack(bytes, view, pos, budget);
  }
  return header;
}

/** Where the MessagePack value at `pos` ends: its headers walked, nothing decoded, no recursion. */
function skipMsgpack(bytes: Uint8Array, view: DataView, pos: number, budget: { items: number }): number {
  const head = newHead();
  let items = 1;
  while (items > 0 && pos < bytes.byteLength) {
    if (--budget.items < 0) return bytes.byteLength;
    items--;
    if (!readHead(bytes, view, pos, head)) return bytes.byteLength;
    items += head.items;
    pos = head.next;
  }
  return pos;
}
