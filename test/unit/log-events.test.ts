import { describe, expect, it } from 'vitest';
import { decodeEvent, encodeEvent, encodePublished, isChannelUsed } from '../../src/log/event-codec.js';
import type { MessagesPublished } from '../../src/domain/events.js';
import type { StoredMessage } from '../../src/domain/message.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';

const published = (i: number): MessagesPublished => ({
  type: 'messages.published',
  appId: 'app',
  channel: `ch-${i}`,
  transport: 'rest',
  clientIds: true,
  messages: [
    { id: `id${i}:0`, timestamp: 1_700_000_000_000 + i, name: 'n', data: { nested: [1, 'two', null, { three: 3.5 }] } },
    { id: `id${i}:1`, timestamp: 1_700_000_000_000 + i, data: new Uint8Array([0, 1, 2, 255]), encoding: 'utf-8/base64', extras: { push: { title: 't' } } },
  ],
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

  describe('publish events are written field by field, with the same bytes as the generic encoder', () => {
    const strings = ['', 'a', 'bench', 'x'.repeat(31), 'y'.repeat(32), 'z'.repeat(255), 'w'.repeat(256), 'v'.repeat(70_000), 'chän', '日本語のチャンネル', 'emoji 🎉', 'lone \ud800 surrogate'];
    const numbers = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 1_795_271_006_361, Number.MAX_SAFE_INTEGER, -1, -33, 1.5, -(2 ** 40)];
    const datas: unknown[] = [...strings, { nested: [1, 'two', null, true, { three: 3.5 }] }, [], [1, 2], new Uint8Array([0, 1, 255])];
    const pick = <T>(list: T[], i: number): T => list[i % list.length];

    it('for every kind of field value', () => {
      for (let i = 0; i < 400; i++) {
        const message: Record<string, unknown> = { id: pick(strings, i) || 'id', timestamp: pick(numbers, i) };
        if (i % 2 === 0) message.name = pick(strings, i + 3);
        if (i % 3 !== 0) message.data = pick(datas, i);
        if (i % 5 === 0) message.encoding = 'utf-8/base64';
        if (i % 7 === 0) message.clientId = pick(strings, i + 1) || 'client';
        if (i % 11 === 0) message.connectionId = 'conn';
        if (i % 4 === 0) message.extras = { push: { notification: { title: pick(strings, i) } } };
        if (i % 13 === 0) message.action = pick(numbers, i);
        const event = {
          type: 'messages.published',
          appId: pick(strings, i + 5) || 'app',
          channel: pick(strings, i + 7) || 'ch',
          transport: i % 2 ? 'rest' : 'realtime',
          ...(i % 3 === 0 ? { clientIds: true } : {}),
          // The publishing key (audit replay), with and without clientIds before it.
          ...(i % 4 < 2 ? { keyName: pick(strings, i + 2) || 'app.key' } : {}),
          messages: Array.from({ length: 1 + (i % 20) }, (_, k) => ({ ...message, id: `${String(message.id)}:${k}` })),
        } as MessagesPublished;
        const fast = encodePublished(event);
        expect(fast, `event ${i} takes the field-by-field path`).toBeDefined();
        expect(Buffer.from(fast!).equals(Buffer.from(packValue(event))), `event ${i}`).toBe(true);
      }
    });

    it('a shape it does not know goes through the generic encoder, so nothing is lost', () => {
      const keyFirst = { keyName: 'app.k', ...published(5) };
      expect(encodePublished(keyFirst)).toBeUndefined();
      expect(unpackValue(encodeEvent(keyFirst))).toStrictEqual(keyFirst);
      // The layout before the messages went last (records of older logs): the generic encoder, read back the same.
      const keyLast = { ...published(5), keyName: 'app.k' };
      expect(encodePublished(keyLast)).toBeUndefined();
      expect(unpackValue(encodeEvent(keyLast))).toStrictEqual(keyLast);
      const odd = { ...published(3), messages: [{ id: 'a', timestamp: 1, unknown: 'kept' } as unknown as StoredMessage] };
      expect(encodePublished(odd)).toBeUndefined();
      expect(unpackValue(encodeEvent(odd))).toStrictEqual(odd);
      const undefinedField = { ...published(4), messages: [{ id: 'b', timestamp: 2, name: undefined }] };
      expect(unpackValue(encodeEvent(undefinedField))).toStrictEqual({ ...undefinedField, messages: [{ id: 'b', timestamp: 2 }] });
    });
  });
});

describe('isChannelUsed (delivery tells a channel.used from a publish without decoding it)', () => {
  // Bytes as read from the log: a copy, without the event the encoder attached.
  const read = (bytes: Uint8Array): Uint8Array => Uint8Array.from(bytes);
  it('is true for a channel.used as encoded, read or not; false for a publish and other events', () => {
    const used = encodeEvent({ type: 'channel.used', appId: 'app', channel: 'room' });
    expect(isChannelUsed(used)).toBe(true);
    expect(isChannelUsed(read(used))).toBe(true);
    for (const other of [encodeEvent(published(1)), packValue({ ...published(2) }), encodeEvent({ type: 'app.deleted', appId: 'app' } as never), packValue({ appId: 'a', type: 'channel.used' }), new Uint8Array(0)]) {
      expect(isChannelUsed(read(other))).toBe(false);
    }
  });
});
