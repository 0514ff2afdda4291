// The realtime frame checks made on bytes before decoding (src/realtime/frame-shape.ts) agree
// with the values the bytes decode to: depth and widths of random JSON values, in both encodings.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { encode } from '@msgpack/msgpack';
import { jsonHeader, msgpackHeader } from '../../src/realtime/frame-shape.js';
import { jsonShape, msgpackShape } from '../../src/codec/value-shape.js';

function depthOf(v: unknown): number {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf));
  if (typeof v === 'object' && v !== null) return 1 + Math.max(0, ...Object.values(v).map(depthOf));
  return 0;
}

function widthOf(v: unknown): number {
  if (Array.isArray(v)) return Math.max(v.length, ...v.map(widthOf));
  if (typeof v === 'object' && v !== null) return Math.max(Object.keys(v).length, ...Object.values(v).map(widthOf));
  return 0;
}

const value = fc.jsonValue({ maxDepth: 8 });
const strings = fc.string({ unit: 'binary' });

describe('frame shape, checked on the bytes', () => {
  it('JSON and MessagePack: refused for depth exactly when nested deeper than the limit, for width exactly when a container holds more than it', () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 12 }), (v, maxDepth, maxWidth) => {
        const depth = depthOf(v);
        const width = widthOf(v);
        const expected = depth > maxDepth ? 'depth' : width > maxWidth ? 'width' : undefined;
        const limits = { maxDepth, maxWidth };
        const json = jsonShape(Buffer.from(JSON.stringify(v)), limits);
        const msgpack = msgpackShape(encode(v), limits);
        // A walk stops at the first fault it meets: either may come first when both apply.
        if (depth > maxDepth && width > maxWidth) {
          expect(json).toBeDefined();
          expect(msgpack).toBeDefined();
        } else {
          expect(json).toBe(expected);
          expect(msgpack).toBe(expected);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('strings with brackets, commas, quotes and escapes count for nothing', () => {
    fc.assert(
      fc.property(fc.array(strings, { maxLength: 5 }), (items) => {
        const v = { action: 0, items };
        expect(jsonShape(Buffer.from(JSON.stringify(v)), { maxDepth: 2, maxWidth: 5 })).toBeUndefined();
        expect(msgpackShape(encode(v), { maxDepth: 2, maxWidth: 5 })).toBeUndefined();
      }),
    );
  });

  it('MessagePack strings that are not UTF-8 are found, at any depth', () => {
    const bad = Buffer.from([0x81, 0xa1, 0x61, 0x91, 0x91, 0xa2, 0xed, 0xa0]);
    expect(msgpackShape(bad, { maxDepth: 10, maxWidth: 10 })).toBe('utf8');
  });

  it('a million levels cost one pass: refused at the limit without building anything', () => {
    expect(msgpackShape(Buffer.alloc(1_000_000, 0x91), { maxDepth: 40, maxWidth: 10 })).toBe('depth');
    expect(jsonShape(Buffer.from('['.repeat(1_000_000)), { maxDepth: 40, maxWidth: 10 })).toBe('depth');
  });
});

describe("a refused frame's header (action and msgSerial, to NACK a publish)", () => {
  const deep = { v: JSON.parse('['.repeat(300) + ']'.repeat(300)) };
  it('read from the start, and (JSON) from the end where the SDK writes msgSerial, after the messages', () => {
    for (const pm of [
      { action: 15, msgSerial: 7, channel: 'c', messages: [{ data: deep }] },
      { action: 15, channel: 'c', messages: [{ data: deep }], msgSerial: 7 },
    ]) {
      expect(jsonHeader(Buffer.from(JSON.stringify(pm)))).toEqual({ action: 15, msgSerial: 7 });
      expect(msgpackHeader(encode(pm, { maxDepth: 1000 }))).toEqual({ action: 15, msgSerial: 7 });
    }
  });

  it('only top-level keys count: a msgSerial inside the messages, or inside a string, is not taken', () => {
    expect(jsonHeader(Buffer.from(JSON.stringify({ action: 15, messages: [{ msgSerial: 3, data: '"msgSerial":4}' }] })))).toEqual({ action: 15 });
    expect(msgpackHeader(encode({ action: 15, messages: [{ msgSerial: 3 }] }))).toEqual({ action: 15 });
  });

  it('bounded: a msgSerial deep in the middle of a large JSON frame is not searched for', () => {
    const pm = `{"action":15,"messages":[{"data":"${'x'.repeat(10_000)}"}],"msgSerial":5,"channel":"c"}`;
    expect(jsonHeader(Buffer.from(pm))).toEqual({ action: 15 });
  });

  it('bounded: MessagePack values past the first 4,096 are not walked; a msgSerial closing the frame is still read', () => {
    const wide = Array.from({ length: 5000 }, (_, i) => ({ data: i }));
    expect(msgpackHeader(encode({ action: 15, messages: wide, msgSerial: 5, channel: 'c' }))).toEqual({ action: 15 });
    for (const msgSerial of [5, 200, 70_000, 2 ** 31, 2 ** 40]) {
      expect(msgpackHeader(encode({ action: 15, channel: 'c', messages: wide, msgSerial }))).toEqual({ action: 15, msgSerial });
    }
    // The bench's deep frame: action read, nothing else made up.
    const head = Buffer.from(encode({ action: 0 })).subarray(1);
    const deepest = Buffer.concat([Buffer.from([0x82]), head, Buffer.from([0xa2, 0x69, 0x64]), Buffer.alloc(1_000_000, 0x91), Buffer.from([0x00])]);
    expect(msgpackHeader(deepest)).toEqual({ action: 0 });
  });
});
