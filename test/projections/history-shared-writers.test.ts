// History written once by instances that share the partitions (production mode: one reader of
// every partition per instance, writers that hand partitions over; projections/projection-set.ts),
// on a real store (SQLite) shared by the projections as ClickHouse is by the instances.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { HistoryProjection } from '../../projections/history/history-projection.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { PresenceProjection } from '../../projections/presence/presence-projection.js';

const NOW = 1_900_000_000_000;
const clock = { now: () => NOW + 10_000 };

const record = (partition: number, offset: number, channel = `persisted:p${partition}`): LogRecord => ({
  topic: 'messages',
  partition,
  offset,
  key: `app:${channel}`,
  timestamp: NOW + offset,
  value: encodeEvent({ type: 'messages.published', appId: 'app', channel, transport: 'rest', messages: [{ id: `m${partition}-${offset}`, timestamp: NOW + offset, data: `d${offset}` }] }),
});
const records = (partition: number, from: number, to: number): LogRecord[] => Array.from({ length: to - from }, (_, i) => record(partition, from + i));
const all = { appId: 'app', start: 0, end: Number.MAX_SAFE_INTEGER, limit: 1000, direction: 'forwards' as const };

describe('history projections sharing the writing of one store', () => {
  let dir: string;
  let stores: SqliteHistoryStore[];
  /** Every row handed to a store's write (the store keeps one per serial; this counts them all). */
  let written: string[];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'shared-writers-'));
    stores = [];
    written = [];
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const store = (): SqliteHistoryStore => {
    const s = new SqliteHistoryStore(join(dir, 'projections.db'));
    stores.push(s);
    const write = s.write.bind(s);
    s.write = (rows, checkpoint, marks) => {
      written.push(...rows.map((r) => r.message.id));
      return write(rows, checkpoint, marks);
    };
    return s;
  };
  const projection = (writes = true): HistoryProjection =>
    new HistoryProjection({ store: store(), clock, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000, writes });

  it('a reader answers from its tail of every partition and writes nothing: no row, no checkpoint', async () => {
    const reader = projection(false);
    await reader.start();
    reader.apply(records(0, 0, 5));
    reader.apply(records(1, 0, 3));
    expect((await reader.query({ ...all, channel: 'persisted:p0' })).map((e) => e.message.id)).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4']);
    await reader.close();
    const check = store();
    await check.init();
    expect(await check.query({ ...all, channel: 'persisted:p0' })).toEqual([]);
    expect(written).toEqual([]);
    expect(await check.loadCheckpoint()).toEqual(new Map());
    expect(await check.loadMarks()).toEqual([]);
  });

  it('a partition handed from one writer to another is written once: the first drops what it had not written, the second starts at its stored checkpoint', async () => {
    const a = projection();
    const b = projection();
    await a.start();
    await b.start();
    expect(await a.handOver([0, 1])).toEqual(new Map([[0, 0], [1, 0]]));
    a.apply(records(0, 0, 4));
    a.apply(records(1, 0, 3));
    await a.flush();
    a.apply(records(1, 3, 5)); // applied, not written yet, when partition 1 goes to b
    a.revoke([1]);
    // b starts partition 1 where a stored it; it re-reads the tail window before that for its own
    // tail (the log is younger than the window here: from 0), and writes only what follows.
    expect(await b.handOver([1])).toEqual(new Map([[1, 0]]));
    b.apply(records(1, 0, 6));
    a.apply(records(0, 4, 6));
    await a.flush();
    await b.flush();
    const check = store();
    await check.init();
    const ids = async (channel: string): Promise<string[]> => (await check.query({ ...all, channel })).map((e) => e.message.id);
    expect(await ids('persisted:p0')).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4', 'm0-5']);
    expect(await ids('persisted:p1')).toEqual(['m1-0', 'm1-1', 'm1-2', 'm1-3', 'm1-4', 'm1-5']);
    expect(written.sort()).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4', 'm0-5', 'm1-0', 'm1-1', 'm1-2', 'm1-3', 'm1-4', 'm1-5']);
    // Each writer's checkpoint write left the other's partition alone.
    expect(await check.loadCheckpoint()).toEqual(new Map([[0, 6], [1, 6]]));
    expect(b.unstored + a.unstored).toBe(0);
  });

  it("a presence writer that loses a partition forgets its channels' members, and rebuilds them from 0 when it gets it back", async () => {
    const presenceRecord = (partition: number, offset: number, action: 'enter' | 'leave', clientId: string): LogRecord => ({
      topic: 'presence',
      partition,
      offset,
      key: `app:room${partition}`,
      timestamp: NOW + offset,
      value: encodeEvent({ type: 'presence.changed', appId: 'app', channel: `room${partition}`, event: { action, id: `e${partition}-${offset}`, clientId, connectionId: 'c1', timestamp: NOW + offset } }),
    });
    const writer = new PresenceProjection({ store: store(), clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000 });
    await writer.start();
    await writer.handOver([0, 1]);
    writer.apply([presenceRecord(0, 0, 'enter', 'ann')]);
    writer.apply([presenceRecord(1, 0, 'enter', 'bob')]);
    expect(writer.memberCount()).toBe(2);
    writer.revoke([1]);
    expect(writer.query({ appId: 'app', channel: 'room1', limit: 10 }).members).toEqual([]);
    expect(writer.query({ appId: 'app', channel: 'room0', limit: 10 }).members.map((m) => m.clientId)).toEqual(['ann']);
    expect(writer.memberCount()).toBe(1);
    expect(await writer.handOver([1])).toEqual(new Map([[1, 0]]));
    writer.apply([presenceRecord(1, 0, 'enter', 'bob')]);
    expect(writer.memberCount()).toBe(2);
    await writer.close();
  });

  it('a reader keeps past its window what no writer has stored yet (a killed writer\'s partitions wait for the group), and lets it go once the store holds it', async () => {
    let now = NOW + 10_000;
    const moving = { now: () => now };
    const reader = new HistoryProjection({ store: store(), clock: moving, tailMs: 1_000, retentionOf: () => 24, flushIntervalMs: 60_000, writes: false });
    const writer = new HistoryProjection({ store: store(), clock: moving, tailMs: 1_000, retentionOf: () => 24, flushIntervalMs: 60_000 });
    await reader.start();
    await writer.start();
    await writer.handOver([0]);
    writer.apply(records(0, 0, 3));
    await writer.flush(); // stored: offsets 0-2
    // Records 3-5 are older than the reader's window when it reads them, and no writer has them.
    reader.apply(records(0, 0, 6));
    now += 60_000;
    await reader.followStore();
    reader.evict();
    const ids = async (): Promise<string[]> => (await reader.query({ ...all, channel: 'persisted:p0' })).map((e) => e.message.id);
    expect(await ids()).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4', 'm0-5']);
    expect(reader.tail.count).toBe(3);

    // A reader started now (a restart) reads them from the log, however old, since the store lacks them.
    const restarted = new HistoryProjection({ store: store(), clock: moving, tailMs: 1_000, retentionOf: () => 24, flushIntervalMs: 60_000, writes: false });
    const from = await restarted.start();
    expect(from.get(0)).toBeLessThanOrEqual(3);
    restarted.apply(records(0, from.get(0)!, 6));
    expect((await restarted.query({ ...all, channel: 'persisted:p0' })).map((e) => e.message.id)).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4', 'm0-5']);

    // The writer catches up: the store answers for them, and the reader lets them go.
    writer.apply(records(0, 3, 6));
    await writer.flush();
    await reader.followStore();
    reader.evict();
    expect(reader.tail.count).toBe(0);
    expect(await ids()).toEqual(['m0-0', 'm0-1', 'm0-2', 'm0-3', 'm0-4', 'm0-5']);
    for (const p of [reader, writer, restarted]) await p.close();
  });

  it('what a reader keeps for the store is bounded (maxUnstoredRows): past it the window alone decides', async () => {
    let now = NOW;
    const reader = new HistoryProjection({ store: store(), clock: { now: () => now }, tailMs: 1_000, retentionOf: () => 24, flushIntervalMs: 60_000, writes: false, maxUnstoredRows: 4 });
    await reader.start();
    reader.apply(records(0, 0, 3));
    reader.apply(records(1, 0, 3));
    expect(reader.tail.count).toBe(6); // within the window when they came
    now += 60_000;
    reader.evict();
    // Each partition's 3 are kept whole or not at all: one channel fits in the 4, the other does not.
    expect(reader.tail.count).toBe(3);
    expect(reader.tail.keptPastWindow).toBe(3);
    await reader.close();
  });

  it("a sealed writer (a graceful stop, before its consumer leaves the group) writes what it holds once, then nothing: what it applies after is the next holder's", async () => {
    const a = projection();
    const b = projection();
    await a.start();
    await b.start();
    await a.handOver([0]);
    a.apply(records(0, 0, 3));
    await a.seal();
    // Applied between its last write and its leaving: b, handed the partition, starts from the sealed checkpoint.
    a.apply(records(0, 3, 5));
    expect(await b.handOver([0])).toEqual(new Map([[0, 0]]));
    b.apply(records(0, 0, 7));
    await b.flush();
    await a.flush();
    await a.close();
    const check = store();
    await check.init();
    // Before: a's close wrote m0-3, m0-4 and checkpoint 5 over b's 7.
    expect(await check.loadCheckpoint()).toEqual(new Map([[0, 7]]));
    expect(written.filter((id) => id === 'm0-3' || id === 'm0-4')).toEqual(['m0-3', 'm0-4']);
  });

  it('a partition handed over while a write is in flight keeps its stored checkpoint: the records the store holds are not written again', async () => {
    const a = projection();
    const b = projection();
    await a.start();
    await b.start();
    // b wrote partition 1 up to offset 5 (it held it before).
    await b.handOver([1]);
    b.apply(records(1, 0, 5));
    await b.flush();
    b.revoke([1]);
    // a holds partition 0; its write is in flight when partition 1 is handed to it.
    await a.handOver([0]);
    a.apply(records(0, 0, 3));
    const aStore = stores[0];
    const write = aStore.write.bind(aStore);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    aStore.write = async (rows, checkpoint, marks) => {
      await held;
      return write(rows, checkpoint, marks);
    };
    const flushing = a.flush();
    const from = await a.handOver([1]);
    release();
    await flushing;
    aStore.write = write;
    written.length = 0;
    // The records from where the hand-over said (the tail window's start, for repeats) up to the store's checkpoint, then a new one.
    a.apply(records(1, from.get(1)!, 6));
    await a.flush();
    // Before: the finished write set the stored checkpoint to its own, without partition 1, and
    // every record of partition 1 read again for the tail was written again (m1-0 to m1-4).
    expect(written).toEqual(['m1-5']);
    await a.close();
    await b.close();
  });
});
