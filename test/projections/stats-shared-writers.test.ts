// Stats written once by instances that share the partitions (production mode: a writer per
// instance in one consumer group per topic, and on every instance a reader of every partition that
// keeps its stats cache exact and waits for its own writes in the store; projections/projection-set.ts),
// on a real store (SQLite, one file) shared by the instances as ClickHouse is.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Base } from '../../src/domain/stats-sample.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { StatsReader } from '../../projections/stats/stats-reader.js';
import { CachedStatsStore } from '../../projections/stats/stats-cache.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import type { StatsRow } from '../../projections/stats/stats-store.js';

const T0 = Date.UTC(2031, 4, 1, 12);
const COUNT = Base.inbound('rest', 'messages', 'count');
const record = (partition: number, offset: number, appId = 'app'): LogRecord => ({
  topic: 'messages',
  partition,
  offset,
  key: `${appId}:c${partition}`,
  timestamp: T0 + offset * 10,
  value: encodeEvent({ type: 'messages.published', appId, channel: `c${partition}`, transport: 'rest', messages: [{ id: `m${partition}-${offset}`, timestamp: T0 + offset * 10, data: 'x' }] }),
});
const records = (partition: number, from: number, to: number): LogRecord[] => Array.from({ length: to - from }, (_, i) => record(partition, from + i));
const hour = { appId: 'app', unit: 'hour' as const, start: T0 - 3_600_000, end: T0 + 3_600_000 };

describe('stats projections sharing the writing of one store', () => {
  let dir: string;
  let stores: SqliteStatsStore[];
  /** Every row handed to a store's write, as `key@version` (the store keeps one per key; this counts them all). */
  let written: string[];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'stats-shared-'));
    stores = [];
    written = [];
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const store = (): SqliteStatsStore => {
    const s = new SqliteStatsStore(join(dir, 'stats.db'));
    stores.push(s);
    const write = s.write.bind(s);
    s.write = (topic: string, rows: StatsRow[], checkpoint) => {
      written.push(...rows.map((r) => `${r.appId}/${r.interval}/${r.partition}/${r.slot}@${r.version}`));
      return write(topic, rows, checkpoint);
    };
    return s;
  };
  const writer = async (partitions: number[]): Promise<StatsProjection> => {
    const w = new StatsProjection({ store: store(), isPersisted: () => false, flushIntervalMs: 60_000 });
    w.revoke('messages', [...(await w.start('messages')).keys()]);
    await w.handOver('messages', partitions);
    return w;
  };
  /** One instance's read side: its cache over the store, and its reader of every partition. */
  const instance = async (own?: StatsProjection): Promise<{ cache: CachedStatsStore; reader: StatsReader }> => {
    const inner = store();
    await inner.init();
    const cache = new CachedStatsStore(inner, { maxRows: 10_000, maxAgeMs: 3_600_000, clock: { now: () => T0 } });
    const reader = new StatsReader({ store: inner, invalidate: (touched) => cache.invalidate(touched), flushOwn: own && (() => own.flush()), pollMs: 60_000 });
    cache.mayKeep = (appId) => reader.mayKeep(appId);
    await reader.start('messages');
    return { cache, reader };
  };
  const counted = async (cache: CachedStatsStore): Promise<number> => (await cache.query(hour)).reduce((n, b) => n + (b.counters[COUNT] ?? 0), 0);

  it('a read on one instance includes what the other instance\'s writer wrote since the read before, though that read\'s rows were held', async () => {
    const a = await writer([0]);
    const b = await writer([1]);
    const { cache, reader } = await instance(a);
    a.apply(records(0, 0, 5));
    reader.apply(records(0, 0, 5));
    await reader.reflect([['messages', [{ partition: 0, offset: 4 }]]], 1000);
    expect(await counted(cache)).toBe(5);
    expect(await counted(cache)).toBe(5);
    expect(cache.hits).toBe(1); // the second read was answered from memory

    // b writes partition 1; a's reader applies the same records: a's held rows of that hour go.
    b.apply(records(1, 0, 3));
    reader.apply(records(1, 0, 3));
    expect(reader.mayKeep('app')).toBe(false);
    await b.flush();
    await reader.reflect([['messages', [{ partition: 1, offset: 2 }]]], 1000);
    expect(reader.mayKeep('app')).toBe(true);
    expect(await counted(cache)).toBe(8);
    expect(reader.waiting).toBe(0);
    await Promise.all([a.close(), b.close()]);
  });

  it('a read that waits for its own writes written by the other instance waits for that writer\'s flush, and fails past its time', async () => {
    const a = await writer([0]);
    const b = await writer([1]);
    const { cache, reader } = await instance(a);
    b.apply(records(1, 0, 4));
    reader.apply(records(1, 0, 4));
    // Not written by b yet: the wait runs out.
    await expect(reader.reflect([['messages', [{ partition: 1, offset: 3 }]]], 50)).rejects.toThrow(/have not written 4 records/);
    // Meanwhile a read keeps nothing of the app: its rows in the store lack these records.
    expect(await counted(cache)).toBe(0);
    expect(await counted(cache)).toBe(0);
    expect(cache.hits).toBe(0);
    const waiting = reader.reflect([['messages', [{ partition: 1, offset: 3 }]]], 5000);
    let done = false;
    void waiting.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(done).toBe(false);
    await b.flush();
    await waiting;
    expect(await counted(cache)).toBe(4);
    await Promise.all([a.close(), b.close()]);
  });

  it('reads waiting together for a stalled writer stand in once a partition, not once each (dashboards polling while a writer is gone)', async () => {
    const b = await writer([1]); // holds partition 1 and never writes it (its instance stalled)
    const inner = store();
    await inner.init();
    const cache = new CachedStatsStore(inner, { maxRows: 10_000, maxAgeMs: 3_600_000, clock: { now: () => T0 } });
    const all = records(1, 0, 6);
    let standIns = 0;
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const reader = new StatsReader({
      store: inner,
      invalidate: (touched) => cache.invalidate(touched),
      pollMs: 60_000,
      // As the service's stand-in does (projection-set.ts): a projection of its own writes the samples.
      standIn: async (topic, partition, upTo) => {
        standIns++;
        await held;
        const own = store();
        await own.init();
        const projection = new StatsProjection({ store: own, isPersisted: () => false, flushIntervalMs: 60_000 });
        const from = (await projection.handOver(topic, [partition])).get(partition) ?? 0;
        projection.apply(all.slice(from, upTo));
        await projection.close();
      },
    });
    await reader.start('messages');
    reader.apply(all);
    const reads = Array.from({ length: 8 }, () => reader.reflect([['messages', [{ partition: 1, offset: 5 }]]], 2_000));
    // Past half their wait, every read stands in; one stand-in runs, the others wait for it.
    for (let i = 0; i < 200 && reader.standIns < 8; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(reader.standIns).toBe(8);
    release();
    await Promise.all(reads);
    expect(standIns).toBe(1);
    expect(await counted(cache)).toBe(6);
    reader.close();
    await b.close();
  });

  it('a read whose stand-in is still running ends as soon as the writer has written its rows (a rebalance ending), not at its deadline', async () => {
    const b = await writer([1]);
    const inner = store();
    await inner.init();
    const cache = new CachedStatsStore(inner, { maxRows: 10_000, maxAgeMs: 3_600_000, clock: { now: () => T0 } });
    const all = records(1, 0, 3);
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    // A stand-in that does not finish while the read waits (under load its writes take seconds).
    let standingIn = false;
    const reader = new StatsReader({
      store: inner,
      invalidate: (touched) => cache.invalidate(touched),
      pollMs: 60_000,
      standIn: () => {
        standingIn = true;
        return held;
      },
    });
    cache.mayKeep = (appId) => reader.mayKeep(appId);
    await reader.start('messages');
    b.apply(all);
    reader.apply(all);
    let outcome = 'waiting';
    const read = reader.reflect([['messages', [{ partition: 1, offset: 2 }]]], 10_000).then(
      () => (outcome = 'answered'),
      (err: Error) => (outcome = err.message),
    );
    for (let i = 0; i < 6_000 && !standingIn; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(reader.standIns).toBe(1);
    expect(standingIn).toBe(true);
    await b.flush();
    for (let i = 0; i < 3_000 && outcome === 'waiting'; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(outcome).toBe('answered');
    expect(await counted(cache)).toBe(3);
    release();
    await read;
    reader.close();
    await b.close();
  }, 120_000);

  it('a partition handed from one writer to another is counted once and each row version written once: the first drops what it had not written, the second starts at the stored checkpoint', async () => {
    const a = await writer([0, 1]);
    const b = await writer([]);
    const { cache, reader } = await instance();
    a.apply(records(1, 0, 6));
    await a.flush();
    a.apply(records(1, 6, 9)); // applied, not written, when partition 1 goes to b
    a.revoke('messages', [1]);
    await a.flush();
    const from = await b.handOver('messages', [1]);
    expect(from.get(1)).toBe(0); // the open sample's first record: the sample is rebuilt whole
    const all = records(1, 0, 12);
    b.apply(all.slice(from.get(1)));
    reader.apply(all);
    await b.flush();
    await reader.reflect([['messages', [{ partition: 1, offset: 11 }]]], 1000);
    expect(await counted(cache)).toBe(12);
    expect(written.length).toBe(new Set(written).size);
    await Promise.all([a.close(), b.close()]);
  });

  it('holds at most maxPending records waiting for their rows; past it the cache keeps nothing of any app until the store has them', async () => {
    const b = await writer([1]);
    const inner = store();
    await inner.init();
    const cache = new CachedStatsStore(inner, { maxRows: 10_000, maxAgeMs: 3_600_000, clock: { now: () => T0 } });
    const reader = new StatsReader({ store: inner, invalidate: (touched) => cache.invalidate(touched), maxPending: 2, pollMs: 60_000 });
    cache.mayKeep = (appId) => reader.mayKeep(appId);
    await reader.start('messages');
    // Records of three apps, each in a sample of its own: the third is not kept, and blocks every app.
    const many = ['x', 'y', 'z'].map((appId, i) => record(1, i, appId));
    b.apply(many);
    reader.apply(many);
    expect(reader.waiting).toBe(2);
    expect(reader.mayKeep('other')).toBe(false);
    await b.flush();
    await reader.reflect([['messages', [{ partition: 1, offset: 2 }]]], 1000);
    expect(reader.waiting).toBe(0);
    expect(reader.mayKeep('other')).toBe(true);
    await b.close();
  });

  it('a read waiting for its own records that change no stats row (an instance\'s heartbeats) does not wait for a writer to pass them', async () => {
    const b = await writer([1]); // holds partition 1 and writes nothing while the read waits
    const inner = store();
    await inner.init();
    const reader = new StatsReader({ store: inner, invalidate: () => undefined, pollMs: 60_000 });
    await reader.start('messages');
    const counted = records(1, 0, 2);
    b.apply(counted);
    reader.apply(counted);
    await b.flush();
    const alive: LogRecord[] = [2, 3].map((offset) => ({ ...record(1, offset), value: encodeEvent({ type: 'instance.alive', instanceId: 'i1' }) }));
    b.apply(alive);
    reader.apply(alive);
    await reader.reflect([['messages', [{ partition: 1, offset: 3 }]]], 1000);
    // A counted record after them waits for its row as before.
    const next = [record(1, 4)];
    reader.apply(next);
    await expect(reader.reflect([['messages', [{ partition: 1, offset: 4 }]]], 50)).rejects.toThrow(/have not written/);
    b.apply(next);
    await b.flush();
    await reader.reflect([['messages', [{ partition: 1, offset: 4 }]]], 1000);
    reader.close();
    await b.close();
  });

  it('a record that changes no sample still moves the stored checkpoint on, so a wait for it ends', async () => {
    const a = await writer([0]);
    const { reader } = await instance(a);
    const closed: LogRecord = { ...record(0, 0), topic: 'messages', value: encodeEvent({ type: 'connection.closed', appId: 'app', connectionId: 'c1', instanceId: 'i1' }) };
    a.apply([closed]);
    reader.apply([closed]);
    await reader.reflect([['messages', [{ partition: 0, offset: 0 }]]], 1000);
    expect(written).toEqual([]);
    await a.close();
  });
});
