// Bounds on a value's shape (nesting, widths), checked on its bytes before it is decoded (issue 22):
// realtime frames (src/realtime/frame-shape.ts) and REST bodies (src/app.ts). A frame
// within REALTIME_MAX_FRAME_BYTES could still cost seconds to decode (a MessagePack frame of 1 MB
// nested a million deep stalled every connection for 3.6 s; JSON nested 500,000 deep for 1.4 s; a
// HEARTBEAT of 70,000 keys for 1.0 s). Each walk is one pass over the bytes with no allocation but
// a stack of at most `maxDepth` counters: a few hundred µs a MiB measured (npm run bench: door).
// Hand-written because no decoder bounds depth or width before it builds the value. The stack is
// one array kept between calls (the walks are synchronous): allocating it per call made the REST
// body check 2.4 µs of every publish's 41 µs on the main thread (BENCH_CPU_PROF=1, 2026-11-27).
import { isUtf8 } from 'node:buffer';
import { newHead, readHead, strIsUtf8 } from './msgpack-head.js';

/** What a frame may hold: levels of nested arrays and maps, and entries in one of them. */
export interface ShapeLimits {
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
export function msgpackShape(bytes: Uint8Array, limits: ShapeLimits): ShapeFault {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  // remaining[d]: items still to read in the container open at depth d (depth 0: the frame itself);
  // each entry is written when its level opens, before it is read.
  const remaining = stackOf(limits.maxDepth + 1);
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

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const OPENERS = new Uint8Array(256);
OPENERS[0x5b] = 1; // [
OPENERS[0x7b] = 1; // {
export const CLOSERS = new Uint8Array(256);
CLOSERS[0x5d] = 1; // ]
CLOSERS[0x7d] = 1; // }

/**
 * JSON text's nesting and widths within `limits` (entries counted by the commas at a level, so a
 * malformed text may be counted loosely: JSON.parse refuses it next). Strings are skipped whole.
 */
export function jsonShape(text: Uint8Array, limits: ShapeLimits): ShapeFault {
  const end = text.byteLength;
  // Each level needs an opening byte: a shorter text cannot pass the depth, nor hold maxWidth entries.
  if (end <= limits.maxDepth && end <= limits.maxWidth) return undefined;
  // commas[d]: entries past the first at depth d, written when the level opens.
  const commas = stackOf(limits.maxDepth + 1);
  let depth = 0;
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

/** The walks' stack, kept between calls: each walk writes an entry before it reads it. */
let stack = new Float64Array(64);
function stackOf(size: number): Float64Array {
  if (stack.length < size) stack = new Float64Array(size);
  return stack;
}
