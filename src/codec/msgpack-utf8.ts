import { isUtf8 } from 'node:buffer';

/**
 * Whether every string in a MessagePack value is valid UTF-8. The decoder does not check: it turns
 * invalid bytes into U+FFFD (or into other characters), silently rewriting what a client sent.
 * Walks the value's headers without decoding it (no allocation, no recursion, so no depth or size
 * of value can hurt); a value that ends early passes here and is refused by the decoder.
 */
export function msgpackStringsAreUtf8(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  let pos = 0;
  let items = 1;
  const str = (length: number): boolean => {
    if (pos + length > end) return true; // truncated: the decoder refuses it
    const ok = isUtf8(bytes.subarray(pos, pos + length));
    pos += length;
    return ok;
  };
  while (items > 0 && pos < end) {
    items--;
    const b = bytes[pos++];
    if (b <= 0x7f || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) continue;
    if (b <= 0x8f) items += 2 * (b & 0x0f);
    else if (b <= 0x9f) items += b & 0x0f;
    else if (b <= 0xbf) {
      if (!str(b & 0x1f)) return false;
    } else {
      switch (b) {
        case 0xc4: pos += 1 + (bytes[pos] ?? 0); break;
        case 0xc5: pos += 2 + (pos + 2 <= end ? view.getUint16(pos) : 0); break;
        case 0xc6: pos += 4 + (pos + 4 <= end ? view.getUint32(pos) : 0); break;
        case 0xc7: pos += 2 + (bytes[pos] ?? 0); break;
        case 0xc8: pos += 3 + (pos + 2 <= end ? view.getUint16(pos) : 0); break;
        case 0xc9: pos += 5 + (pos + 4 <= end ? view.getUint32(pos) : 0); break;
        case 0xca: pos += 4; break;
        case 0xcb: pos += 8; break;
        case 0xcc: case 0xd0: pos += 1; break;
        case 0xcd: case 0xd1: pos += 2; break;
        case 0xce: case 0xd2: pos += 4; break;
        case 0xcf: case 0xd3: pos += 8; break;
        case 0xd4: pos += 2; break;
        case 0xd5: pos += 3; break;
        case 0xd6: pos += 5; break;
        case 0xd7: pos += 9; break;
        case 0xd8: pos += 17; break;
        case 0xd9: { const n = bytes[pos] ?? 0; pos += 1; if (!str(n)) return false; break; }
        case 0xda: { const n = pos + 2 <= end ? view.getUint16(pos) : 0; pos += 2; if (!str(n)) return false; break; }
        case 0xdb: { const n = pos + 4 <= end ? view.getUint32(pos) : 0; pos += 4; if (!str(n)) return false; break; }
        case 0xdc: items += pos + 2 <= end ? view.getUint16(pos) : 0; pos += 2; break;
        case 0xdd: items += pos + 4 <= end ? view.getUint32(pos) : 0; pos += 4; break;
        case 0xde: items += 2 * (pos + 2 <= end ? view.getUint16(pos) : 0); pos += 2; break;
        case 0xdf: items += 2 * (pos + 4 <= end ? view.getUint32(pos) : 0); pos += 4; break;
        default: return true; // 0xc1, never used: the decoder refuses it
      }
    }
  }
  return true;
}
