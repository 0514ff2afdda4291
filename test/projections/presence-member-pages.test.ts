// GET /channels/:id/presence pages by member key (`after` the last key of the page before), and
// realtime ATTACH and SYNC send the whole set. The member keys are kept in order beside the set as
// members come and go (projections/presence/sorted-member-keys.ts) instead of sorted on every read
// (a 250,000-member set took 300 to 450 ms a read): here, against a plain model, every page of
// every walk, between enters, updates, leaves and drops, on a real projection and store.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { PresenceProjection } from '../../projections/presence/presence-projection.js';
import { lowerBound, upperBound } from '../../projections/sorted-strings.js';

const NOW = 1_900_000_000_000;
const clock = { now: () => NOW };
const key = (m: { clientId: string; connectionId: string }): string => `${m.clientId}\u0000${m.connectionId}`;

/** A small deterministic PRNG: the same churn every run. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('presence member pages, in member key order as members come and go', () => {
  let dir: string;
  let store: SqliteHistoryStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'presence-pages-'));
    store = new SqliteHistoryStore(join(dir, 'projections.db'));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('binary searches find the first key not less than, and the first greater than, a key', () => {
    const keys = ['a', 'b', 'b\u0000x', 'c', 'e'];
    expect([lowerBound(keys, ''), lowerBound(keys, 'b'), lowerBound(keys, 'd'), lowerBound(keys, 'f')]).toEqual([0, 1, 4, 5]);
    expect([upperBound(keys, ''), upperBound(keys, 'b'), upperBound(keys, 'd'), upperBound(keys, 'e')]).toEqual([0, 2, 4, 5]);
  });

  it('every page of every walk equals the sorted model, filtered by clientId or not, between enters, updates, leaves and drops; the whole set for SYNC equals it unordered', async () => {
    const p = new PresenceProjection({ store, clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000 });
    await p.start();
    const random = prng(7);
    const model = new Map<string, { clientId: string; connectionId: string; data: string }>();
    let offset = 0;
    const apply = (event: Record<string, unknown>): void => {
      const record: LogRecord = {
        topic: 'presence',
        partition: 0,
        offset,
        key: 'app:room',
        timestamp: NOW + offset,
        value: encodeEvent({ type: 'presence.changed', appId: 'app', channel: 'room', event: { id: `e${offset}`, timestamp: NOW + offset, ...event } } as never),
      };
      offset++;
      p.apply([record]);
    };
    const walk = (limit: number, clientId?: string, connectionId?: string): string[] => {
      const seen: string[] = [];
      let after: string | undefined;
      for (let pages = 0; pages < 10_000; pages++) {
        const page = p.query({ appId: 'app', channel: 'room', limit, after, ...(clientId === undefined ? {} : { clientId }), ...(connectionId === undefined ? {} : { connectionId }) });
        seen.push(...page.members.map((m) => key({ clientId: m.clientId!, connectionId: m.connectionId })));
        if (page.next === undefined) return seen;
        expect(page.members).toHaveLength(limit);
        after = page.next;
      }
      throw new Error('no end of pages');
    };
    const expected = (clientId?: string, connectionId?: string): string[] =>
      [...model.entries()]
        .filter(([, m]) => (clientId === undefined || m.clientId === clientId) && (connectionId === undefined || m.connectionId === connectionId))
        .map(([k]) => k)
        .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 150; i++) {
        const clientId = `u${Math.floor(random() * 60)}`;
        const connectionId = `c${Math.floor(random() * 25)}`;
        const r = random();
        if (r < 0.55) {
          const data = `d${offset}`;
          apply({ action: random() < 0.8 ? 'enter' : 'update', clientId, connectionId, data });
          model.set(key({ clientId, connectionId }), { clientId, connectionId, data });
        } else if (r < 0.95) {
          apply({ action: 'leave', clientId, connectionId });
          model.delete(key({ clientId, connectionId }));
        } else {
          apply({ action: 'drop', connectionId });
          for (const [k, m] of model) if (m.connectionId === connectionId) model.delete(k);
        }
      }
      const limit = 1 + Math.floor(random() * 40);
      expect(walk(limit)).toEqual(expected());
      const someone = `u${Math.floor(random() * 60)}`;
      expect(walk(limit, someone)).toEqual(expected(someone));
      const connection = `c${Math.floor(random() * 25)}`;
      expect(walk(limit, undefined, connection)).toEqual(expected(undefined, connection));
      expect(walk(limit, someone, connection)).toEqual(expected(someone, connection));
      expect(p.query({ appId: 'app', channel: 'room', limit: 0 })).toEqual({ members: [] });
      const whole = [...(p.presentSet('app', 'room')?.values() ?? [])];
      expect(whole.map((m) => key({ clientId: m.clientId!, connectionId: m.connectionId })).sort()).toEqual(expected().slice().sort());
      for (const m of whole) expect(m.data).toBe(model.get(key({ clientId: m.clientId!, connectionId: m.connectionId }))!.data);
    }
    expect(model.size).toBeGreaterThan(100);
  });

  it('a page filtered by clientId or by connectionId reads those members, not the whole set (GET /channels/:id/presence?clientId= or ?connectionId=)', async () => {
    const p = new PresenceProjection({ store, clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000 });
    await p.start();
    let offset = 0;
    const enter = (clientId: string, connectionId: string): LogRecord => ({
      topic: 'presence',
      partition: 0,
      offset: offset++,
      key: 'app:room',
      timestamp: NOW,
      value: encodeEvent({ type: 'presence.changed', appId: 'app', channel: 'room', event: { id: `e${offset}`, timestamp: NOW, action: 'enter', clientId, connectionId } }),
    });
    for (let c = 0; c < 100; c++) p.apply(Array.from({ length: 1000 }, (_, i) => enter(`m${String(i).padStart(4, '0')}`, `c${c}`)));
    // A clientId that another's starts with, up to the separator, is not that one's.
    p.apply([enter('m0500\u0000x', 'c0'), enter('m0500', 'c100'), enter('m05', 'c0')]);
    p.query({ appId: 'app', channel: 'room', limit: 1 });
    const reads = vi.spyOn(Map.prototype, 'get');
    try {
      const first = p.query({ appId: 'app', channel: 'room', clientId: 'm0500', limit: 100 });
      expect(first.members.map((m) => m.connectionId)).toEqual([...Array.from({ length: 100 }, (_, c) => `c${c}`), 'c100'].sort().slice(0, 100));
      const rest = p.query({ appId: 'app', channel: 'room', clientId: 'm0500', limit: 100, after: first.next });
      expect(rest).toEqual({ members: [expect.objectContaining({ clientId: 'm0500', connectionId: 'c99' })] });
      expect(p.query({ appId: 'app', channel: 'room', clientId: 'nobody', limit: 100 })).toEqual({ members: [] });
      expect(p.query({ appId: 'app', channel: 'room', clientId: 'm05', limit: 100 }).members.map((m) => m.connectionId)).toEqual(['c0']);
      // The members of the pages, and the one past each that says whether there is a next page.
      expect(reads.mock.calls.length).toBeLessThan(500);
    } finally {
      reads.mockRestore();
    }
    // By connectionId: the connection's members, once a first read grouped them.
    p.query({ appId: 'app', channel: 'room', connectionId: 'c7', limit: 1 });
    p.apply([enter('late', 'c7')]);
    const byConnection = vi.spyOn(Map.prototype, 'get');
    try {
      const page = p.query({ appId: 'app', channel: 'room', connectionId: 'c7', limit: 1000 });
      expect(page.members).toHaveLength(1001 - 1);
      expect(page.next).toBeDefined();
      const last = p.query({ appId: 'app', channel: 'room', connectionId: 'c7', limit: 1000, after: page.next });
      expect(last.members.map((m) => m.clientId)).toEqual(['m0999']);
      expect(page.members.map((m) => m.clientId)).toEqual([...Array.from({ length: 999 }, (_, i) => `m${String(i).padStart(4, '0')}`), 'late'].sort().slice(0, 1000));
      expect(p.query({ appId: 'app', channel: 'room', connectionId: 'nobody', limit: 100 })).toEqual({ members: [] });
      expect(byConnection.mock.calls.length).toBeLessThan(2500);
    } finally {
      byConnection.mockRestore();
    }
  });
});
