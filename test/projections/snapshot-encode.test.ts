// A snapshot's state encoded in slices (projections/snapshot-encode.ts; README: A bounded start,
// Cost): the same bytes as one encode(), and the event loop gets turns before the end (at the
// presence members' limit one encode() held it 2.7 s).
import { encode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeInSlices } from '../../projections/snapshot-encode.js';

const same = async (state: unknown) => expect(Buffer.from(await encodeInSlices(state)).equals(Buffer.from(encode(state, { ignoreUndefined: true })))).toBe(true);

describe('snapshot state encoded in slices', () => {
  it('gives the bytes one encode() gives, for states shaped as the projections make them and any JSON-like value', async () => {
    const member = (i: number) => ({ id: `c${i}:0:0`, clientId: `client-${i}`, connectionId: `conn-${i}`, timestamp: 1_700_000_000_000 + i, data: i % 3 ? `d${i}` : new Uint8Array([i & 0xff, 1, 2]), encoding: undefined, extras: i % 5 ? undefined : { x: i } });
    // Presence: channels of members, one with more than 65,535 (an array32 header), and fields left undefined.
    await same({ channels: [['app\u0000a', [member(1), member(2)]], ['app\u0000big', Array.from({ length: 70_000 }, (_, i) => member(i))]], newest: 5, skipped: undefined });
    // Apps: events and revocations; a top-level object of 16 and more fields (a map16 header); lists of 15, 16 and 65,536.
    await same({ events: [{ type: 'app.created', app: { appId: 'a', keys: [] } }], revocations: [['k', 'a', [['clientId:x', [[1, 2]]]]]] });
    await same(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`f${i}`, i % 4 ? i : undefined])));
    for (const n of [0, 15, 16, 65_535, 65_536]) await same({ list: Array.from({ length: n }, (_, i) => i) });
    await fc.assert(fc.asyncProperty(fc.jsonValue(), async (value) => {
      await same({ value, list: [value, [value]] });
    }), { numRuns: 200 });
  });

  it('gives the event loop turns before the last value is encoded (one encode() held it to the end)', async () => {
    let turned = false;
    let turnedBeforeLast: boolean | undefined;
    const last = {
      get v() {
        turnedBeforeLast = turned;
        return 1;
      },
    };
    const state = { channels: [...Array.from({ length: 10_000 }, (_, i) => ({ i })), last] };
    const encoding = encodeInSlices(state);
    setImmediate(() => (turned = true));
    await encoding;
    expect(turnedBeforeLast).toBe(true);
  });
});
