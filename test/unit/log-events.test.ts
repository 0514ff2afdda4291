import { describe, expect, it } from 'vitest';
import { decodeEvent, encodeEvent, type MessagesPublished } from '../../src/log/events.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';

const published = (i: number): MessagesPublished => ({
  type: 'messages.published',
  appId: 'app',
  channel: `ch-${i}`,
  transport: 'rest',
  messages: [
    { id: `id${i}:0`, timestamp: 1_700_000_000_000 + i, name: 'n', data: { nested: [1, 'two', null, { three: 3.5 }] } },
    { id: `id${i}:1`, timestamp: 1_700_000_000_000 + i, data: new Uint8Array([0, 1, 2, 255]), encoding: 'utf-8/base64', extras: { push: { title: 't' } } },
  ],
  clientIds: true,
});

describe('log events (MessagePack on the log)', () => {
  it('an event this process encoded is not decoded again, and equals what its bytes decode to', () => {
    const event = published(1);
    const bytes = encodeEvent(event);
    expect(decodeEvent(bytes)).toBe(event);
    // What another process (or this one after a restart) reads from the same bytes.
    expect(unpackValue(bytes)).toStrictEqual(event);
  });

  it('bytes read back from storage are decoded once and shared by every projection', () => {
    const copy = new Uint8Array(encodeEvent(published(2)));
    const first = decodeEvent(copy);
    expect(first).toStrictEqual(published(2));
    expect(decodeEvent(copy)).toBe(first);
  });

  it('small values share a slab without ever overwriting each other', () => {
    const values = Array.from({ length: 2000 }, (_, i) => packValue({ i, text: 'x'.repeat(i % 300) }));
    expect(new Set(values.map((v) => v.buffer)).size).toBeLessThan(values.length / 10);
    values.forEach((v, i) => expect(unpackValue(v)).toEqual({ i, text: 'x'.repeat(i % 300) }));
    const big = packValue({ text: 'y'.repeat(10_000) });
    expect(big.byteOffset).toBe(0);
    expect(big.buffer.byteLength).toBe(big.byteLength);
  });
});
