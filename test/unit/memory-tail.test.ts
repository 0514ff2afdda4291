import { describe, expect, it } from 'vitest';
import { MemoryTail } from '../../projections/history/memory-tail.js';
import type { HistoryEntry } from '../../projections/history/history-entry.js';

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
