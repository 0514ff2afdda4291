/**
 * One MessagePack value's header, read in place: the one table of header forms that the walks over
 * undecoded MessagePack share (the UTF-8 check of REST bodies, src/codec/msgpack-utf8.ts; the
 * realtime frame's shape and header, src/realtime/frame-shape.ts). A walk keeps its own count of
 * the items still to read; nothing is allocated per value.
 */
export interface MsgpackHead {
  /** Where what follows this value's own bytes (header and payload, not the items it holds) begins: may lie past the end of a truncated value. */
  next: number;
  /** Whether it is an array or a map. */
  container: boolean;
  /** Items it holds: an array's elements, a map's keys and values. */
  items: number;
  /** An array's elements or a map's entries. */
  entries: number;
  /** A string's length in bytes (its payload ends at `next`), or -1. */
  str: number;
}

export const newHead = (): MsgpackHead => ({ next: 0, container: false, items: 0, entries: 0, str: -1 });

/** Reads the header at `pos` into `head`; false for 0xc1, which MessagePack never uses (the decoder refuses it). */
export function readHead(bytes: Uint8Array, view: DataView, pos: number, head: MsgpackHead): boolean {
  const end = bytes.byteLength;
  const b = bytes[pos++];
  head.container = false;
  head.items = 0;
  head.entries = 0;
  head.str = -1;
  if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) {
    head.next = pos;
    return true;
  }
  if (b <= 0x9f) {
    head.container = true;
    head.entries = b & 0x0f;
    head.items = b <= 0x8f ? 2 * head.entries : head.entries;
    head.next = pos;
    return true;
  }
  if (b <= 0xbf) {
    head.str = b & 0x1f;
    head.next = pos + head.str;
    return true;
  }
  const u8 = bytes[pos] ?? 0;
  const u16 = pos + 2 <= end ? view.getUint16(pos) : 0;
  const u32 = pos + 4 <= end ? view.getUint32(pos) : 0;
  let next: number;
  switch (b) {
    case 0xc4: next = pos + 1 + u8; break;
    case 0xc5: next = pos + 2 + u16; break;
    case 0xc6: next = pos + 4 + u32; break;
    case 0xc7: next = pos + 2 + u8; break;
    case 0xc8: next = pos + 3 + u16; break;
    case 0xc9: next = pos + 5 + u32; break;
    case 0xca: case 0xce: case 0xd2: next = pos + 4; break;
    case 0xcb: case 0xcf: case 0xd3: next = pos + 8; break;
    case 0xcc: case 0xd0: next = pos + 1; break;
    case 0xcd: case 0xd1: next = pos + 2; break;
    case 0xd4: next = pos + 2; break;
    case 0xd5: next = pos + 3; break;
    case 0xd6: next = pos + 5; break;
    case 0xd7: next = pos + 9; break;
    case 0xd8: next = pos + 17; break;
    case 0xd9: head.str = u8; next = pos + 1 + u8; break;
    case 0xda: head.str = u16; next = pos + 2 + u16; break;
    case 0xdb: head.str = u32; next = pos + 4 + u32; break;
    case 0xdc: case 0xdd: case 0xde: case 0xdf: {
      const n = b === 0xdc || b === 0xde ? u16 : u32;
      head.container = true;
      head.entries = n;
      head.items = b >= 0xde ? 2 * n : n;
      next = pos + (b === 0xdc || b === 0xde ? 2 : 4);
      break;
    }
    default:
      return false;
  }
  head.next = next;
  return true;
}

/** Whether the string `head` read, if any, is UTF-8 (a truncated one passes: the decoder refuses it). */
export const strIsUtf8 = (bytes: Uint8Array, head: MsgpackHead, isUtf8: (b: Uint8Array) => boolean): boolean =>
  head.str < 0 || head.next > bytes.byteLength || isUtf8(bytes.subarray(head.next - head.str, head.next));
