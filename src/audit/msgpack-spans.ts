// Reading MessagePack where it lies, for the replay's transcoder (ndjson.ts): where a value ends,
// where a str's or bin's bytes are, which of a few known keys a str is. Nothing is decoded.

export const u32 = (b: Uint8Array, p: number): number => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;

export const isStr = (b: Uint8Array, p: number): boolean => (b[p] >= 0xa0 && b[p] <= 0xbf) || b[p] === 0xd9 || b[p] === 0xda || b[p] === 0xdb;

/** Where the bytes of the str or bin at p start. */
export function spanStart(b: Uint8Array, p: number): number {
  const h = b[p];
  if (h >= 0xa0 && h <= 0xbf) return p + 1;
  if (h === 0xd9 || h === 0xc4) return p + 2;
  if (h === 0xda || h === 0xc5) return p + 3;
  return p + 5;
}

/** How many bytes the str or bin at p holds. */
export function spanLength(b: Uint8Array, p: number): number {
  const h = b[p];
  if (h >= 0xa0 && h <= 0xbf) return h & 0x1f;
  if (h === 0xd9 || h === 0xc4) return b[p + 1];
  if (h === 0xda || h === 0xc5) return (b[p + 1] << 8) | b[p + 2];
  return u32(b, p + 1);
}

export function strEquals(b: Uint8Array, p: number, want: Buffer): boolean {
  if (!isStr(b, p)) return false;
  const s = spanStart(b, p);
  if (spanLength(b, p) !== want.length) return false;
  for (let i = 0; i < want.length; i++) if (b[s + i] !== want[i]) return false;
  return true;
}

/**
 * A few known keys (fixstr), looked up by length and first byte, then compared once: a loop over
 * every key compared each (5.9% of the replay's CPU, measured) before.
 */
export class KeyTable {
  /** (length << 8 | first byte) -> key number + 1; 0: none, -1: several (searched) */
  private readonly slots = new Int8Array(32 * 256);

  constructor(private readonly keys: Buffer[]) {
    keys.forEach((key, k) => {
      if (key.length === 0 || key.length > 31) throw new Error(`KeyTable holds fixstr keys of 1 to 31 bytes, not ${key.length}`);
      const slot = (key.length << 8) | key[0];
      this.slots[slot] = this.slots[slot] === 0 ? k + 1 : -1;
    });
  }

  /** The field number of the str key at p, or -1. */
  keyOf(b: Uint8Array, p: number): number {
    const h = b[p];
    if (h < 0xa1 || h > 0xbf) return -1;
    const length = h & 0x1f;
    const slot = this.slots[(length << 8) | b[p + 1]];
    if (slot === 0) return -1;
    if (slot < 0) return keyOf(b, p, this.keys);
    const key = this.keys[slot - 1];
    for (let i = 1; i < length; i++) if (b[p + 1 + i] !== key[i]) return -1;
    return slot - 1;
  }
}

/** The field number of the str key at p among `keys`, or -1. */
export function keyOf(b: Uint8Array, p: number, keys: Buffer[]): number {
  const h = b[p];
  if (h < 0xa0 || h > 0xbf) return -1;
  const length = h & 0x1f;
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    if (key.length !== length) continue;
    let i = 0;
    while (i < length && b[p + 1 + i] === key[i]) i++;
    if (i === length) return k;
  }
  return -1;
}

/** Where the MessagePack value at p ends, or -1 past the end (or a form the log never holds). */
export function skip(b: Uint8Array, p: number, limit: number): number {
  if (p < 0 || p >= limit) return -1;
  const h = b[p];
  let end: number;
  if (h <= 0x7f || h >= 0xe0 || h === 0xc0 || h === 0xc2 || h === 0xc3) end = p + 1;
  else if (h >= 0xa0 && h <= 0xbf) end = p + 1 + (h & 0x1f);
  else if (h >= 0x80 && h <= 0x8f) return skipItems(b, p + 1, 2 * (h & 0x0f), limit);
  else if (h >= 0x90 && h <= 0x9f) return skipItems(b, p + 1, h & 0x0f, limit);
  else
    switch (h) {
      case 0xcc:
      case 0xd0:
        end = p + 2;
        break;
      case 0xcd:
      case 0xd1:
        end = p + 3;
        break;
      case 0xce:
      case 0xd2:
      case 0xca:
        end = p + 5;
        break;
      case 0xcf:
      case 0xd3:
      case 0xcb:
        end = p + 9;
        break;
      case 0xd9:
      case 0xc4:
        end = p + 2 + b[p + 1];
        break;
      case 0xda:
      case 0xc5:
        end = p + 3 + ((b[p + 1] << 8) | b[p + 2]);
        break;
      case 0xdb:
      case 0xc6:
        end = p + 5 + u32(b, p + 1);
        break;
      case 0xdc:
        return skipItems(b, p + 3, (b[p + 1] << 8) | b[p + 2], limit);
      case 0xdd:
        return skipItems(b, p + 5, u32(b, p + 1), limit);
      case 0xde:
        return skipItems(b, p + 3, 2 * ((b[p + 1] << 8) | b[p + 2]), limit);
      case 0xdf:
        return skipItems(b, p + 5, 2 * u32(b, p + 1), limit);
      default:
        return -1; // ext: never in an event
    }
  return end <= limit ? end : -1;
}

function skipItems(b: Uint8Array, p: number, n: number, limit: number): number {
  for (let i = 0; i < n && p >= 0; i++) p = skip(b, p, limit);
  return p;
}
