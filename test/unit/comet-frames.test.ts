// A comet body cut into frames and frames joined into a body (src/realtime/comet/comet-frames.ts).
import { describe, expect, it } from 'vitest';
import { decode, encode } from '@msgpack/msgpack';
import { joinFrames, splitJsonArray, splitMsgpackArray } from '../../src/realtime/comet/comet-frames.js';

const texts = (items: Buffer[] | undefined): string[] | undefined => items?.map((b) => b.toString());

describe('splitJsonArray', () => {
  it('cuts an array into its elements, whatever they nest or their strings hold', () => {
    const body = Buffer.from(' [ {"action":15,"messages":[{"data":"a,]}[\\"x"}]} , {"action":0} ,[1,[2]], "s" ]\n');
    expect(texts(splitJsonArray(body, 10))).toEqual(['{"action":15,"messages":[{"data":"a,]}[\\"x"}]}', '{"action":0}', '[1,[2]]', '"s"']);
    expect(splitJsonArray(Buffer.from('[]'), 10)).toEqual([]);
  });

  it('refuses what is not one array, an empty element, trailing text, or more than maxItems', () => {
    for (const text of ['{"action":0}', '[{"action":0}', '[1,,2]', '[1,]', '[1] x', '', '"[1]"']) {
      expect(splitJsonArray(Buffer.from(text), 10), text).toBeUndefined();
    }
    expect(splitJsonArray(Buffer.from('[1,2,3]'), 2)).toBeUndefined();
    expect(splitJsonArray(Buffer.from('[1,2]'), 2)).toHaveLength(2);
  });
});

describe('splitMsgpackArray', () => {
  it('cuts an array into its elements, each decoding to what was packed', () => {
    const values = [{ action: 10, channel: 'c' }, { action: 15, messages: [{ data: new Uint8Array([1, 2]) }, { data: 'x'.repeat(300) }] }, [1, [2, { a: null }]], 'str'];
    const items = splitMsgpackArray(Buffer.from(encode(values)), 10)!;
    expect(items.map((b) => decode(new Uint8Array(b)))).toEqual(values);
    const many = Array.from({ length: 70_000 }, (_, i) => i);
    expect(splitMsgpackArray(Buffer.from(encode(many)), 100_000)).toHaveLength(70_000);
  });

  it('refuses a map, a truncated array, trailing bytes, or more than maxItems', () => {
    const packed = Buffer.from(encode([{ action: 0 }, 'abc']));
    expect(splitMsgpackArray(Buffer.from(encode({ action: 0 })), 10)).toBeUndefined();
    expect(splitMsgpackArray(packed.subarray(0, packed.length - 1), 10)).toBeUndefined();
    expect(splitMsgpackArray(Buffer.concat([packed, Buffer.from([0xc0])]), 10)).toBeUndefined();
    expect(splitMsgpackArray(packed, 1)).toBeUndefined();
    expect(splitMsgpackArray(Buffer.alloc(0), 10)).toBeUndefined();
  });
});

describe('joinFrames', () => {
  it('joins JSON frames into one array ending with a newline, and MessagePack frames under one array header', () => {
    expect(joinFrames(['{"action":0}', '{"action":4}'], 'json').toString()).toBe('[{"action":0},{"action":4}]\n');
    expect(joinFrames([], 'json').toString()).toBe('[]\n');
    for (const n of [0, 3, 15, 16, 70_000]) {
      const frames = Array.from({ length: n }, (_, i) => encode({ action: 15, i }));
      expect((decode(joinFrames(frames, 'msgpack')) as unknown[]).length, String(n)).toBe(n);
    }
    expect(decode(joinFrames([encode({ action: 11, channel: 'c' })], 'msgpack'))).toEqual([{ action: 11, channel: 'c' }]);
  });
});
