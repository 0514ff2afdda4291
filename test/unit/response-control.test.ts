// Control of response content (spec: Common behaviour, `fields`): what it keeps, and that picking
// reads each path once per request, not once per key of every object (review finding: 1,300 paths,
// which fit in a query string, over a page of 1,000 messages held the event loop half a second).
import { describe, expect, it } from 'vitest';
import { applyResponseControl, parseResponseControl, pickFields } from '../../src/http/response-control.js';

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
