import { describe, expect, it } from 'vitest';
import { MemoryTail } from '../../projections/history/memory-tail.js';
import type { HistoryEntry } from '../../projections/history/history-entry.js';
import type { StoredMessage } from '../../src/domain/message.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';

const entry = (serial: number, timestamp: number, channel = 'c'): HistoryEntry => ({
  appId: 'a',
  channel,
  serial,
  partition: 0,
  message: { id: `m${serial}`, timestamp },
});

describe('in-memory history tail (spec: history without persistence, two minutes)', () => {
  it('answers both directions with inclusive time bounds and a cursor', () => {
    const tail = new MemoryTail(120_000);
    for (let i = 1; i <= 5; i++) tail.add(entry(i, 1000 * i));
    const q = { appId: 'a', channel: 'c', start: 2000, end: 4000, limit: 10 };
    expect(tail.query({ ...q, direction: 'backwards' }).map((e) => e.serial)).toEqual([4, 3, 2]);
    expect(tail.query({ ...q, direction: 'forwards' }).map((e) => e.serial)).toEqual([2, 3, 4]);
    expect(tail.query({ ...q, direction: 'backwards', after: 4 }).map((e) => e.serial)).toEqual([3, 2]);
    expect(tail.query({ ...q, direction: 'forwards', after: 3, limit: 1 }).map((e) => e.serial)).toEqual([4]);
  });

  it('ignores a replayed entry and remembers ids for idempotent publishing', () => {
    const tail = new MemoryTail(120_000);
    tail.add(entry(1, 1000), true);
    tail.add(entry(1, 1000), true);
    expect(tail.count).toBe(1);
    expect(tail.idSeenAt('a', 'c', 'm1')).toBe(1000);
    expect(tail.idSeenAt('a', 'other', 'm1')).toBeUndefined();
  });

  it('evicts what is older than the window', () => {
    const tail = new MemoryTail(120_000);
    tail.add(entry(1, 0), true);
    tail.add(entry(2, 100_000));
    tail.add(entry(3, 0, 'd'));
    expect(tail.evict(130_000)).toBe(2);
    expect(tail.count).toBe(1);
    expect(tail.idSeenAt('a', 'c', 'm1')).toBeUndefined();
    expect(tail.query({ appId: 'a', channel: 'c', start: 0, end: 1e9, limit: 10, direction: 'forwards' })).toHaveLength(1);
  });
});

describe('in-memory history tail: messages kept by reference to their log record', () => {
  const messagesOf = (value: Uint8Array): StoredMessage[] => (unpackValue(value) as { messages: StoredMessage[] }).messages;
  const record = (ids: string[], timestamp: number): Uint8Array => packValue({ messages: ids.map((id) => ({ id, timestamp, data: `data of ${id}` })) });

  it('gives back each message of a record, decoded from the record bytes, in both directions', () => {
    const tail = new MemoryTail(120_000, messagesOf);
    const first = record(['a:0', 'a:1'], 1000);
    const second = record(['b:0'], 2000);
    tail.addRecord('app', 'c', 10, 0, 1000, first, 0);
    tail.addRecord('app', 'c', 11, 0, 1000, first, 1);
    tail.addRecord('app', 'c', 20, 1, 2000, second, 0);
    const q = { appId: 'app', channel: 'c', start: 0, end: 5000, limit: 10 };
    expect(tail.query({ ...q, direction: 'forwards' }).map((e) => [e.serial, e.partition, e.message.id, e.message.data])).toEqual([
      [10, 0, 'a:0', 'data of a:0'],
      [11, 0, 'a:1', 'data of a:1'],
      [20, 1, 'b:0', 'data of b:0'],
    ]);
    expect(tail.query({ ...q, direction: 'backwards', limit: 2 }).map((e) => e.message.id)).toEqual(['b:0', 'a:1']);
    expect(tail.query({ ...q, direction: 'backwards', start: 1500 }).map((e) => e.message.id)).toEqual(['b:0']);
  });

  it('indexes client-supplied ids, ignores replays and evicts by time', () => {
    const tail = new MemoryTail(120_000, messagesOf);
    const value = record(['client-1'], 0);
    tail.addRecord('app', 'c', 1, 0, 0, value, 0, 'client-1');
    tail.addRecord('app', 'c', 1, 0, 0, value, 0, 'client-1');
    tail.addRecord('app', 'c', 2, 0, 100_000, record(['x'], 100_000), 0);
    expect(tail.count).toBe(2);
    expect(tail.idSeenAt('app', 'c', 'client-1')).toBe(0);
    expect(tail.evict(130_000)).toBe(1);
    expect(tail.idSeenAt('app', 'c', 'client-1')).toBeUndefined();
    expect(tail.query({ appId: 'app', channel: 'c', start: 0, end: 1e9, limit: 10, direction: 'forwards' }).map((e) => e.message.id)).toEqual(['x']);
  });

  it('stays correct after evicting most of a long channel (its arrays are compacted)', () => {
    const tail = new MemoryTail(1000, messagesOf);
    for (let i = 0; i < 5000; i++) tail.addRecord('app', 'c', i, 0, i, record([`m${i}`], i), 0);
    expect(tail.evict(4900 + 1000)).toBe(4900);
    const all = tail.query({ appId: 'app', channel: 'c', start: 0, end: 1e9, limit: 1000, direction: 'forwards' });
    expect(all.map((e) => e.serial)).toEqual(Array.from({ length: 100 }, (_, i) => 4900 + i));
    expect(all[0].message.id).toBe('m4900');
    // New entries go into chunks the evicted ones gave back; the whole window still reads in order.
    for (let i = 5000; i < 7000; i++) tail.addRecord('app', 'c', i, 0, i, record([`m${i}`], i), 0);
    const back = tail.query({ appId: 'app', channel: 'c', start: 0, end: 1e9, limit: 5000, direction: 'backwards' });
    expect(back.map((e) => e.serial)).toEqual(Array.from({ length: 2100 }, (_, i) => 6999 - i));
    expect(back.map((e) => e.message.id)).toEqual(Array.from({ length: 2100 }, (_, i) => `m${6999 - i}`));
    // A channel evicted whole is gone, and starts afresh.
    expect(tail.evict(7000 + 1000)).toBe(2100);
    tail.addRecord('app', 'c', 7000, 0, 7500, record(['m7000'], 7500), 0);
    expect(tail.query({ appId: 'app', channel: 'c', start: 0, end: 1e9, limit: 10, direction: 'forwards' }).map((e) => e.message.id)).toEqual(['m7000']);
  });

  it('holds room for its live entries and at most two chunks more, however many it has evicted (memory follows the window, not the channel\'s age)', () => {
    const tail = new MemoryTail(1000, messagesOf);
    for (let i = 0; i < 5000; i++) {
      tail.addRecord('app', 'c', i, 0, i, record([`m${i}`], i), 0);
      tail.evict(i);
      expect(tail.capacityOf('app', 'c')).toBeLessThanOrEqual(1000 + 2 * 128);
    }
  });
});
