import { isUtf8 } from 'node:buffer';
import { newHead, readHead, strIsUtf8 } from './msgpack-head.js';

/**
 * Whether every string in a MessagePack value is valid UTF-8. The decoder does not check: it turns
 * invalid bytes into U+FFFD (or into other characters), silently rewriting what a client sent.
 * Walks the value's headers without decoding it (no allocation, no recursion, so no depth or size
 * of value can hurt); a value that ends early passes here and is refused by the decoder.
 */
export function msgpackStringsAreUtf8(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const head = newHead();
  let pos = 0;
  let items = 1;
  while (items > 0 && pos < bytes.byteLength) {
    items--;
    if (!readHead(bytes, view, pos, head)) return true;
    if (!strIsUtf8(bytes, head, isUtf8)) return false;
    items += head.items;
    pos = head.next;
  }
  return true;
}
