// A string that begins with U+FEFF (a zero-width no-break space, or a byte order mark to some
// decoders) comes back from the log's MessagePack as it went in, whatever its length:
// @msgpack/msgpack decodes strings past 200 bytes with a TextDecoder, which dropped it.
import { describe, expect, it } from 'vitest';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';

describe('MessagePack strings keep a leading U+FEFF', () => {
  // UTF-8 bytes of the string: 3 for the U+FEFF, the rest ASCII; 200 is where the decoder changes its way
  it.each([4, 150, 199, 200, 201, 202, 203, 300, 70_000])('a string of %i bytes, U+FEFF first (and two of them, and one in the middle)', (bytes) => {
    for (const s of ['\uFEFF' + 'x'.repeat(bytes - 3), '\uFEFF\uFEFF' + 'y'.repeat(Math.max(0, bytes - 6)), 'z' + '\uFEFF' + 'w'.repeat(Math.max(0, bytes - 4))]) {
      expect(unpackValue(packValue(s))).toBe(s);
      expect(unpackValue(packValue({ data: s, list: [s] }))).toEqual({ data: s, list: [s] });
    }
  });

  it('a publish read back from the log (bytes with no decoded event on them) has its data, name and extras as published', () => {
    const data = '\uFEFF' + 'd'.repeat(400);
    const event = { type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ id: 'i:0', timestamp: 1, name: '\uFEFF' + 'n'.repeat(300), data, extras: { headers: { h: '\uFEFF' + 'h'.repeat(250) } } }] } as LogEvent;
    const copy = new Uint8Array(encodeEvent(event));
    expect(decodeEvent(copy)).toEqual(event);
  });

  it('bytes that are not UTF-8 after the U+FEFF still decode as before (U+FFFD), and a string cut short still throws', () => {
    const bad = Buffer.from(packValue('\uFEFF' + 'q'.repeat(300)));
    bad[bad.length - 1] = 0xff;
    expect(unpackValue(bad)).toBe('\uFEFF' + 'q'.repeat(299) + '\uFFFD');
    expect(() => unpackValue(bad.subarray(0, bad.length - 1))).toThrow();
  });
});
