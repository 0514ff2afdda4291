// JSON written as bytes, for the replay's transcoder (ndjson.ts): which bytes of a string
// JSON.stringify writes as they are and how it escapes the others, and whole numbers' digits.

/** "00" to "99": two digits a division (measured: half the divisions of one digit a time) */
const PAIRS = Buffer.from(Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0')).join(''));

/** The digits of n (a whole number below 10^8) at out[o...]; where they end. */
export function digits(out: Uint8Array, o: number, n: number): number {
  const end = o + (n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 10000 ? 4 : n < 100000 ? 5 : n < 1000000 ? 6 : n < 10000000 ? 7 : 8);
  let i = end - 2;
  for (; i >= o; i -= 2) {
    const q = (n / 100) | 0;
    const r = 2 * (n - q * 100);
    out[i] = PAIRS[r];
    out[i + 1] = PAIRS[r + 1];
    n = q;
  }
  // an odd count: the first digit alone
  if (i === o - 1) out[o] = 0x30 + n;
  return end;
}

/** n (below 10^8) as 8 digits, zeros in front. */
export function eightDigits(out: Uint8Array, o: number, n: number): number {
  for (let i = o + 6; i >= o; i -= 2) {
    const q = (n / 100) | 0;
    const r = 2 * (n - q * 100);
    out[i] = PAIRS[r];
    out[i + 1] = PAIRS[r + 1];
    n = q;
  }
  return o + 8;
}

/** 1 for a byte JSON.stringify writes as it is (printable ASCII but the quote and the backslash), 2 for UTF-8's, 0 for an escape */
export const PLAIN = new Uint8Array(256);
for (let c = 0x20; c < 0x80; c++) PLAIN[c] = c === 0x22 || c === 0x5c ? 0 : 1;
for (let c = 0x80; c < 0x100; c++) PLAIN[c] = 2;
/** the letter after the backslash of JSON.stringify's short escapes (0: \u00xx) */
export const SHORT_ESCAPE = new Uint8Array(256);
for (const [c, letter] of [[0x22, '"'], [0x5c, '\\'], [0x08, 'b'], [0x0c, 'f'], [0x0a, 'n'], [0x0d, 'r'], [0x09, 't']] as const) SHORT_ESCAPE[c] = letter.charCodeAt(0);
export const HEX = Buffer.from('0123456789abcdef');
