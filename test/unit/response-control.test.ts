// Control of response content (spec: Common behaviour, `fields`): what it keeps, and that picking
// reads each path once per request, not once per key of every object (review finding: 1,300 paths,
// which fit in a query string, over a page of 1,000 messages held the event loop half a second).
import { describe, expect, it } from 'vitest';
import { applyResponseControl, flattenValue, MAX_LONG_KEY_CHARS, MAX_LONG_KEYS, parseResponseControl, pickFields, selectPaths } from '../../src/http/response-control.js';

const fields = (spec: string) => parseResponseControl({ fields: spec })!;

describe('fields (spec: Common behaviour)', () => {
  it('keeps the fields on the paths, a path ending at a field keeping all below it, element by element on an array', () => {
    const page = [
      { id: 'a', name: 'n', data: { x: { deep: 1 }, y: 2, z: [1, 2] } },
      { id: 'b', data: 'text' },
    ];
    expect(applyResponseControl(page, fields('id,data.x,data.z'))).toEqual([
      { id: 'a', data: { x: { deep: 1 }, z: [1, 2] } },
      { id: 'b', data: 'text' },
    ]);
    // A path and a longer one through it: the shorter keeps the whole field.
    expect(applyResponseControl(page, fields('data.x.deep,data'))).toEqual([{ data: page[0].data }, { data: 'text' }]);
  });

  it('paths starting with array indexes pick elements by index', () => {
    expect(applyResponseControl([{ a: 1, b: 2 }, { a: 3 }, { a: 5 }], fields('0.a,2'))).toEqual({ 0: { a: 1 }, 2: { a: 5 } });
    expect(pickFields({ list: [{ a: 1, b: 2 }, { a: 3 }] }, [['list', '1', 'a']])).toEqual({ list: { 1: { a: 3 } } });
  });

  it('reads each path once, however many objects and keys the result has', () => {
    const messages = Array.from({ length: 200 }, (_, i) => ({ id: String(i), data: Object.fromEntries(Array.from({ length: 50 }, (_, k) => [`k${k}`, k])) }));
    const paths = Array.from({ length: 300 }, (_, i) => ['data', `k${i % 50}`]);
    let reads = 0;
    const counted = new Proxy(paths, {
      get(target, property, receiver) {
        if (typeof property === 'string' && /^\d+$/.test(property)) reads++;
        return Reflect.get(target, property, receiver);
      },
    });
    const picked = pickFields(messages, counted) as { data: Record<string, number> }[];
    expect(Object.keys(picked[0].data)).toHaveLength(50);
    expect(reads).toBeLessThanOrEqual(paths.length);
  });
});

describe('flatten and select are bounded (each long key repeats the path to its field)', () => {
  const refusal = expect.objectContaining({ code: 40003, statusCode: 400 });

  it('flatten=true and select give long keys for every field, as before', () => {
    expect(flattenValue([{ a: { b: [1, 2] }, c: [] }])).toEqual({ '0.a.b.0': 1, '0.a.b.1': 2, '0.c': [] });
    expect(selectPaths([{ a: { b: 1 } }, { a: { b: 2 } }], ['a', 'b'])).toEqual({ '0.a.b': 1, '1.a.b': 2 });
  });

  it(`more than ${MAX_LONG_KEYS} fields in one reply is refused with 40003 (a page of messages of deeply nested numbers froze the service)`, () => {
    const nested = (depth: number, leaves: number): unknown => (depth === 0 ? Array(leaves).fill(0) : [nested(depth - 1, leaves)]);
    const page = Array.from({ length: 10 }, () => ({ data: nested(20, 30_000) }));
    expect(() => flattenValue(page)).toThrowError(refusal);
    expect(() => applyResponseControl(page, parseResponseControl({ flatten: 'true' })!)).toThrowError(refusal);
    expect(() => selectPaths(Array(MAX_LONG_KEYS + 1).fill(0), ['*'])).toThrowError(refusal);
    // Just within: answered.
    expect(Object.keys(selectPaths(Array(MAX_LONG_KEYS).fill(0), ['*']))).toHaveLength(MAX_LONG_KEYS);
  });

  it(`more than ${MAX_LONG_KEY_CHARS} characters of keys is refused with 40003 (a long key over many fields)`, () => {
    const value = { ['k'.repeat(2000)]: Array(10_000).fill(0) };
    expect(() => flattenValue(value)).toThrowError(refusal);
    expect(() => selectPaths(value, ['*', '*'])).toThrowError(refusal);
  });
});

describe('bytes are one value, as their base64 text is in the text formats (spec: Control of response content)', () => {
  const page = [{ id: 'a', data: new Uint8Array([1, 2, 3]) }];
  it('flatten keeps message data bytes as one field, not a field per byte', () => {
    expect(flattenValue(page)).toEqual({ '0.id': 'a', '0.data': new Uint8Array([1, 2, 3]) });
  });

  it('fields and select do not walk into bytes: they answer what they answer for the base64 text', () => {
    const text = [{ id: 'a', data: 'AQID' }];
    for (const [spec, control] of [
      ['fields=data.0', parseResponseControl({ fields: 'data.0' })!],
      ['select=*.data.*', parseResponseControl({ select: '*.data.*' })!],
      ['select=*.data', parseResponseControl({ select: '*.data' })!],
    ] as const) {
      const fromBytes = applyResponseControl(page, control);
      const fromText = applyResponseControl(text, control);
      expect(JSON.stringify(fromBytes, (_, v) => (v instanceof Uint8Array ? 'AQID' : v)), spec).toBe(JSON.stringify(fromText));
    }
  });
});
