// A refused realtime frame's header (its action and msgSerial), read in a bounded way without
// decoding it, so that a publish refused for its shape (src/codec/value-shape.ts) can be NACKed.
// Hand-written for the same reason as the shape walks: no decoder stops early.
import { newHead, readHead } from '../codec/msgpack-head.js';
import { BACKSLASH, CLOSERS, COMMA, OPENERS, QUOTE } from '../codec/value-shape.js';

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
/**
 * MessagePack values walked for a refused frame's header, at most. Was 100,000: a frame nested a
 * million deep then cost 5 to 10 ms of walking for each frame on this machine (issue 22's flood
 * bench), where the shape check that refused it took 0.05 ms.
 */
const HEADER_ITEMS = 4096;
const MSG_SERIAL_KEY = Buffer.concat([Buffer.from([0xa0 | MSG_SERIAL.length]), MSG_SERIAL]);
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

/**
 * The top-level numeric `action` and `msgSerial` of a MessagePack map, read without decoding the
 * rest: a bounded walk of its entries from the start (HEADER_ITEMS values); when that ends before
 * the frame does, a msgSerial that closes it (where it is when written after the messages), as
 * for JSON.
 */
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
  if (budget.items < 0 && header.msgSerial === undefined) {
    const trailing = trailingMsgSerial(bytes);
    if (trailing !== undefined) header.msgSerial = trailing;
  }
  return header;
}

/** A `msgSerial` key and an unsigned integer ending the bytes (read in place). */
function trailingMsgSerial(bytes: Uint8Array): number | undefined {
  const end = bytes.byteLength;
  const view = new DataView(bytes.buffer, bytes.byteOffset, end);
  // The integer's encodings: a positive fixint, uint 8, 16, 32, 64.
  for (const size of [1, 2, 3, 5, 9]) {
    const at = end - size;
    const keyAt = at - MSG_SERIAL_KEY.length;
    if (keyAt < 0) continue;
    const t = bytes[at];
    const value = size === 1 ? (t <= 0x7f ? t : undefined) : size === 2 && t === 0xcc ? bytes[at + 1] : size === 3 && t === 0xcd ? view.getUint16(at + 1) : size === 5 && t === 0xce ? view.getUint32(at + 1) : size === 9 && t === 0xcf ? Number(view.getBigUint64(at + 1)) : undefined;
    if (value === undefined) continue;
    let i = 0;
    while (i < MSG_SERIAL_KEY.length && bytes[keyAt + i] === MSG_SERIAL_KEY[i]) i++;
    if (i === MSG_SERIAL_KEY.length) return value;
  }
  return undefined;
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
