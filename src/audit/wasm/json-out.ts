// AssemblyScript (compiled with publish-line.ts, its entry): MessagePack read where it lies and
// JSON written, in the module's memory, for the replay's publish transcoder. As json-chunks.ts and
// msgpack-spans.ts do in JavaScript, byte for byte the same JSON; what they would not write as
// JSON.stringify does is declined (false, 0): a float, a map, a number past 2^53, bad UTF-8.

export const PLAIN: u32 = 0; // 256 bytes: 1 as it is, 2 UTF-8's, 0 an escape
export const SHORT: u32 = 256; // 256 bytes: the letter of a short escape, 0: \u00xx
export const HEX: u32 = 512; // 16 bytes
export const B64: u32 = 528; // 64 bytes
export const PAIRS: u32 = 592; // 200 bytes: "00" to "99"
export const KONST: u32 = 2048; // 40 slots of 48 bytes: the output's constants (konst)
/** konst numbers of the values' constants (the publish's own follow) */
export const K_NULL: u32 = 0;
export const K_FALSE: u32 = 1;
export const K_TRUE: u32 = 2;

export function setText(at: u32, s: string): void {
  for (let i = 0; i < s.length; i++) store<u8>(at + <u32>i, <u8>s.charCodeAt(i));
}

export function setKonst(k: i32, s: string): void {
  const at = KONST + 48 * <u32>k;
  store<u8>(at, <u8>s.length);
  setText(at + 8, s);
}

export function initTables(): void {
  for (let c: u32 = 0; c < 256; c++) store<u8>(PLAIN + c, c >= 0x80 ? 2 : c >= 0x20 && c != 0x22 && c != 0x5c ? 1 : 0);
  for (let c: u32 = 0; c < 256; c++) store<u8>(SHORT + c, 0);
  store<u8>(SHORT + 0x22, 0x22);
  store<u8>(SHORT + 0x5c, 0x5c);
  store<u8>(SHORT + 0x08, 0x62);
  store<u8>(SHORT + 0x0c, 0x66);
  store<u8>(SHORT + 0x0a, 0x6e);
  store<u8>(SHORT + 0x0d, 0x72);
  store<u8>(SHORT + 0x09, 0x74);
  setText(HEX, '0123456789abcdef');
  setText(B64, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/');
  for (let i: u32 = 0; i < 100; i++) {
    store<u8>(PAIRS + 2 * i, <u8>(0x30 + i / 10));
    store<u8>(PAIRS + 2 * i + 1, <u8>(0x30 + (i % 10)));
  }
  setKonst(K_NULL, 'null');
  setKonst(K_FALSE, 'false');
  setKonst(K_TRUE, 'true');
}

/** where the output is written */
let o: u32 = 0;
/** the end of the value being read */
let lim: u32 = 0;

/** lists open in value(): past NEST_MAX the record is declined (ndjson.ts's generic path applies the log's depth rule, src/log/event-shape.ts) */
let nest: u32 = 0;
const NEST_MAX: u32 = 64;

/** A value ending at `limit` to read, its JSON written at `out`. */
export function begin(out: u32, limit: u32): void {
  o = out;
  lim = limit;
  nest = 0;
}

/** Where the JSON written ends. */
export function written(): u32 {
  return o;
}

@inline export function u8At(p: u32): u32 {
  return <u32>load<u8>(p);
}
@inline export function be16(p: u32): u32 {
  return (u8At(p) << 8) | u8At(p + 1);
}
@inline export function be32(p: u32): u32 {
  return bswap<u32>(load<u32>(p));
}
@inline export function put(c: u32): void {
  store<u8>(o, <u8>c);
  o++;
}
/** The output's constant k (a slot of 48 bytes at KONST: its length, then its bytes from 8 on), copied 8 bytes a store. */
export function konst(k: u32): void {
  const at = KONST + 48 * k;
  const n = u8At(at);
  for (let i: u32 = 0; i < n; i += 8) store<u64>(o + i, load<u64>(at + 8 + i));
  o += n;
}

/** Where the value at p ends, or 0 past the end or a form not read here. */
export function skip(p: u32): u32 {
  if (p >= lim) return 0;
  const h = u8At(p);
  let end: u32;
  if (h <= 0x7f || h >= 0xe0 || h == 0xc0 || h == 0xc2 || h == 0xc3) end = p + 1;
  else if (h >= 0xa0 && h <= 0xbf) end = p + 1 + (h & 0x1f);
  else if (h >= 0x80 && h <= 0x8f) return skipItems(p + 1, 2 * (h & 0x0f));
  else if (h >= 0x90 && h <= 0x9f) return skipItems(p + 1, h & 0x0f);
  else if (h == 0xcc || h == 0xd0) end = p + 2;
  else if (h == 0xcd || h == 0xd1) end = p + 3;
  else if (h == 0xce || h == 0xd2 || h == 0xca) end = p + 5;
  else if (h == 0xcf || h == 0xd3 || h == 0xcb) end = p + 9;
  else if (h == 0xd9 || h == 0xc4) end = p + 2 + u8At(p + 1);
  else if (h == 0xda || h == 0xc5) end = p + 3 + be16(p + 1);
  else if (h == 0xdb || h == 0xc6) {
    const n = be32(p + 1);
    if (n > lim) return 0;
    end = p + 5 + n;
  } else if (h == 0xdc) return skipItems(p + 3, be16(p + 1));
  else if (h == 0xde) return skipItems(p + 3, 2 * be16(p + 1));
  else return 0;
  return end <= lim ? end : 0;
}

function skipItems(p: u32, n: u32): u32 {
  for (let i: u32 = 0; i < n && p != 0; i++) p = skip(p);
  return p;
}

/** Where the str or bin at p starts, and (spanLength) how many bytes. */
export function spanStart(p: u32): u32 {
  const h = u8At(p);
  if (h >= 0xa0 && h <= 0xbf) return p + 1;
  if (h == 0xd9 || h == 0xc4) return p + 2;
  if (h == 0xda || h == 0xc5) return p + 3;
  return p + 5;
}
export function spanLength(p: u32): u32 {
  const h = u8At(p);
  if (h >= 0xa0 && h <= 0xbf) return h & 0x1f;
  if (h == 0xd9 || h == 0xc4) return u8At(p + 1);
  if (h == 0xda || h == 0xc5) return be16(p + 1);
  return be32(p + 1);
}
@inline export function isStr(h: u32): bool {
  return (h >= 0xa0 && h <= 0xbf) || h == 0xd9 || h == 0xda || h == 0xdb;
}

/** Whether b[s, e) is well-formed UTF-8 (as Buffer's isUtf8: no overlong form, no surrogate, none past U+10FFFF). */
export function wellFormed(s: u32, e: u32): bool {
  let i = s;
  while (i < e) {
    const c = u8At(i);
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      if (i + 1 >= e || (u8At(i + 1) & 0xc0) != 0x80) return false;
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (i + 2 >= e) return false;
      const c1 = u8At(i + 1);
      if ((c1 & 0xc0) != 0x80 || (u8At(i + 2) & 0xc0) != 0x80) return false;
      if (c == 0xe0 && c1 < 0xa0) return false;
      if (c == 0xed && c1 >= 0xa0) return false;
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (i + 3 >= e) return false;
      const c1 = u8At(i + 1);
      if ((c1 & 0xc0) != 0x80 || (u8At(i + 2) & 0xc0) != 0x80 || (u8At(i + 3) & 0xc0) != 0x80) return false;
      if (c == 0xf0 && c1 < 0x90) return false;
      if (c == 0xf4 && c1 >= 0x90) return false;
      i += 4;
    } else return false;
  }
  return true;
}

/** A string's bytes b[s, e) as JSON.stringify writes them, without the quotes; false: not UTF-8. */
export function escaped(s: u32, e: u32): bool {
  let checked = false;
  let i = s;
  while (i < e) {
    // 8 bytes at once (SWAR): those before the first that needs a look (>= 0x80, < 0x20, a quote or
    // a backslash; the test flags too much only above a byte it flags rightly) go in one store. The
    // bytes past e are made plain; what is stored past the string is written over after it.
    let w = load<u64>(i);
    const left = e - i;
    if (left < 8) w = (w & ((<u64>1 << (<u64>left << 3)) - 1)) | (0x4141414141414141 << (<u64>left << 3));
    const q = w ^ 0x2222222222222222;
    const k = w ^ 0x5c5c5c5c5c5c5c5c;
    const flags = (w | (w - 0x2020202020202020) | ((q - 0x0101010101010101) & ~q) | ((k - 0x0101010101010101) & ~k)) & 0x8080808080808080;
    store<u64>(o, w);
    if (flags == 0) {
      const n: u32 = left < 8 ? left : 8;
      o += n;
      i += n;
      continue;
    }
    const plain = <u32>(ctz<u64>(flags) >> 3);
    o += plain;
    i += plain;
    const c = u8At(i);
    i++;
    if (c >= 0x80) {
      if (!checked && !wellFormed(s, e)) return false;
      checked = true;
      put(c);
      continue;
    }
    put(0x5c);
    const short = u8At(SHORT + c);
    if (short != 0) put(short);
    else {
      put(0x75);
      put(0x30);
      put(0x30);
      put(u8At(HEX + (c >> 4)));
      put(u8At(HEX + (c & 0x0f)));
    }
  }
  return true;
}

/** The digits of n (below 10^8) at o. */
export function small(n: u32): void {
  const len: u32 = n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : n < 100000 ? 5 : n < 1000000 ? 6 : n < 10000000 ? 7 : 8;
  let i = o + len;
  while (n >= 100) {
    const q = n / 100;
    i -= 2;
    store<u16>(i, load<u16>(PAIRS + 2 * (n - q * 100)));
    n = q;
  }
  if (n >= 10) store<u16>(i - 2, load<u16>(PAIRS + 2 * n));
  else store<u8>(i - 1, <u8>(0x30 + n));
  o += len;
}

/** A whole number below 2^53, its digits: 32-bit divisions, 8 digits at a time. */
export function int(n: u64): void {
  if (n < 100000000) {
    small(<u32>n);
    return;
  }
  const hi = n / 100000000;
  let lo = <u32>(n - hi * 100000000);
  int(hi);
  for (let i: u32 = 6; ; i -= 2) {
    const q = lo / 100;
    store<u16>(o + i, load<u16>(PAIRS + 2 * (lo - q * 100)));
    lo = q;
    if (i == 0) break;
  }
  o += 8;
}

const SAFE: u64 = 9007199254740991;

/** A value as JSON.stringify writes what the decoder gives; false: not one read here. */
export function value(p: u32): bool {
  const h = u8At(p);
  if (isStr(h)) {
    const s = spanStart(p);
    put(0x22);
    if (!escaped(s, s + spanLength(p))) return false;
    put(0x22);
    return true;
  }
  if (h <= 0x7f) {
    int(h);
    return true;
  }
  if (h >= 0xe0) {
    put(0x2d);
    int(256 - h);
    return true;
  }
  if (h >= 0x90 && h <= 0x9f) {
    const n = h & 0x0f;
    if (++nest > NEST_MAX) return false;
    put(0x5b);
    let q = p + 1;
    for (let i: u32 = 0; i < n; i++) {
      if (i > 0) put(0x2c);
      if (q >= lim || !value(q)) return false;
      q = skip(q);
      if (q == 0) return false;
    }
    put(0x5d);
    nest--;
    return true;
  }
  switch (h) {
    case 0xcc:
      int(u8At(p + 1));
      return true;
    case 0xcd:
      int(be16(p + 1));
      return true;
    case 0xce:
      int(be32(p + 1));
      return true;
    case 0xcf: {
      const n = bswap<u64>(load<u64>(p + 1));
      if (n > SAFE) return false;
      int(n);
      return true;
    }
    case 0xc0:
      konst(K_NULL);
      return true;
    case 0xc2:
      konst(K_FALSE);
      return true;
    case 0xc3:
      konst(K_TRUE);
      return true;
  }
  return false;
}

/** base64 of b[s, s + n), padded */
export function base64(s: u32, n: u32): void {
  let i = s;
  const e = s + n;
  for (; i + 3 <= e; i += 3) {
    const v = (u8At(i) << 16) | (u8At(i + 1) << 8) | u8At(i + 2);
    put(u8At(B64 + (v >> 18)));
    put(u8At(B64 + ((v >> 12) & 63)));
    put(u8At(B64 + ((v >> 6) & 63)));
    put(u8At(B64 + (v & 63)));
  }
  if (e - i == 1) {
    const v = u8At(i) << 16;
    put(u8At(B64 + (v >> 18)));
    put(u8At(B64 + ((v >> 12) & 63)));
    put(0x3d);
    put(0x3d);
  } else if (e - i == 2) {
    const v = (u8At(i) << 16) | (u8At(i + 1) << 8);
    put(u8At(B64 + (v >> 18)));
    put(u8At(B64 + ((v >> 12) & 63)));
    put(u8At(B64 + ((v >> 6) & 63)));
    put(0x3d);
  }
}

