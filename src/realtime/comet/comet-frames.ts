// A comet request or response body holds an array of ProtocolMessages (README: Comet fallback):
// a send's body is cut into one frame per element, each then read as a WebSocket frame is (its
// budget, shape limits and decoding: connection.ts); a recv's answer joins the frames the
// connection sent, encoded once as for a WebSocket, into one array.
import { BACKSLASH, CLOSERS, COMMA, OPENERS, QUOTE } from '../../codec/value-shape.js';
import { newHead, readHead } from '../../codec/msgpack-head.js';
import type { Frame, WireFormat } from '../protocol.js';

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * The elements of a JSON array, as slices of `body` (not copied), or undefined when the body is
 * not an array (or has more than `maxItems` elements). An element that is not valid JSON is left
 * for the frame decoder to refuse.
 */
export function splitJsonArray(body: Buffer, maxItems: number): Buffer[] | undefined {
  const end = body.byteLength;
  let pos = 0;
  while (pos < end && isSpace(body[pos])) pos++;
  if (body[pos] !== 0x5b) return undefined;
  const items: Buffer[] = [];
  let depth = 0;
  let start = pos + 1;
  const push = (stop: number): boolean => {
    let a = start;
    let b = stop;
    while (a < b && isSpace(body[a])) a++;
    while (b > a && isSpace(body[b - 1])) b--;
    if (a === b) return items.length === 0 && body[stop] === 0x5d; // `[]` holds nothing; `[1,,2]` is malformed
    items.push(body.subarray(a, b));
    return items.length <= maxItems;
  };
  for (; pos < end; pos++) {
    const c = body[pos];
    if (c === QUOTE) {
      for (pos++; pos < end; pos++) {
        const s = body[pos];
        if (s === BACKSLASH) pos++;
        else if (s === QUOTE) break;
      }
    } else if (OPENERS[c]) {
      depth++;
    } else if (CLOSERS[c]) {
      depth--;
      if (depth === 0) {
        if (!push(pos)) return undefined;
        for (pos++; pos < end; pos++) if (!isSpace(body[pos])) return undefined;
        return items;
      }
    } else if (c === COMMA && depth === 1) {
      if (!push(pos)) return undefined;
      start = pos + 1;
    }
  }
  return undefined;
}

/** The elements of a MessagePack array, as slices of `body`, or undefined when it is not one (or is truncated, or too long). */
export function splitMsgpackArray(body: Buffer, maxItems: number): Buffer[] | undefined {
  if (body.byteLength === 0) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const head = newHead();
  if (!readHead(body, view, 0, head) || !head.container || head.items !== head.entries) return undefined;
  const count = head.entries;
  if (count > maxItems) return undefined;
  const items: Buffer[] = [];
  let pos = head.next;
  for (let i = 0; i < count; i++) {
    const start = pos;
    // One value: its header, then as many more as it holds.
    let remaining = 1;
    while (remaining > 0) {
      if (pos >= body.byteLength || !readHead(body, view, pos, head)) return undefined;
      remaining += head.items - 1;
      pos = head.next;
    }
    if (pos > body.byteLength) return undefined;
    items.push(body.subarray(start, pos));
  }
  return pos === body.byteLength ? items : undefined;
}

/** The frames as one body: a JSON array ending with a newline (the SDK's streamed reads split on it), or a MessagePack array. */
export function joinFrames(frames: readonly Frame[], format: WireFormat): Buffer {
  if (format === 'json') return Buffer.from(`[${frames.join(',')}]\n`);
  const n = frames.length;
  const header = n < 16 ? Buffer.from([0x90 | n]) : n < 0x10000 ? Buffer.from([0xdc, n >> 8, n & 0xff]) : Buffer.from([0xdd, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
  return Buffer.concat([header, ...frames.map((f) => (typeof f === 'string' ? Buffer.from(f) : f))]);
}
