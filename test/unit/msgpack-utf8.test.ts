import { describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { msgpackShape } from '../../src/codec/value-shape.js';

/** The REST bodies' check (src/app.ts): the shape walk with the body limits, UTF-8 included. */
const msgpackStringsAreUtf8 = (bytes: Uint8Array): boolean => msgpackShape(bytes, { maxDepth: 512, maxWidth: Number.MAX_SAFE_INTEGER }) !== 'utf8';

// Issue 10, item 8: invalid UTF-8 was silently rewritten; MessagePack strings are checked before decoding.
const invalid = Buffer.from([0xc3, 0x28]); // a lead byte followed by a non-continuation byte

/** `value` encoded, with the placeholder string "@@" replaced by invalid UTF-8 bytes of the same length. */
const withInvalid = (value: unknown): Uint8Array => {
  const bytes = Buffer.from(encode(value));
  const at = bytes.indexOf(Buffer.from('@@'));
  invalid.copy(bytes, at);
  return bytes;
};

describe('MessagePack strings must be UTF-8', () => {
  it('passes values whose strings are valid, whatever else they hold', () => {
    const value = {
      name: 'héllo ✓ 😀', data: new Uint8Array([0xff, 0xfe, 0xc3]), n: [1, -1, 300, -300, 70000, 2 ** 40, -(2 ** 40), 1.5],
      b: [true, false, null], long: 'x'.repeat(70_000), nested: { a: [{ b: 'ü'.repeat(40) }] }, when: new Date(0),
    };
    expect(msgpackStringsAreUtf8(encode(value))).toBe(true);
  });

  it.each([
    ['a top-level string', '@@'],
    ['a map value', { data: '@@' }],
    ['a map key', { '@@': 1 }],
    ['a string after binary and numbers', { b: new Uint8Array([1, 2, 0xc3]), n: 70000, s: 'ok', t: ['x', '@@'] }],
    ['a str8 string', { s: '@@' + 'x'.repeat(40) }],
    ['a str16 string', { s: '@@' + 'x'.repeat(300) }],
    ['a str32 string', { s: '@@' + 'x'.repeat(70_000) }],
  ])('finds invalid UTF-8 in %s', (_where, value) => {
    expect(msgpackStringsAreUtf8(withInvalid(value))).toBe(false);
  });

  it('does not throw or loop on truncated or hostile headers', () => {
    expect(msgpackStringsAreUtf8(Uint8Array.from([0xdd, 0xff, 0xff, 0xff, 0xff]))).toBe(true);
    expect(msgpackStringsAreUtf8(Uint8Array.from([0xdb, 0xff, 0xff, 0xff, 0xff, 0x41]))).toBe(true);
    expect(msgpackStringsAreUtf8(Uint8Array.from([0xc1]))).toBe(true);
    expect(msgpackStringsAreUtf8(new Uint8Array(0))).toBe(true);
  });
});
