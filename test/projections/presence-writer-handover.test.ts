// A presence-history writer handed a partition (production mode: writers share the presence topic's
// partitions, projections/projection-set.ts) needs that partition's member set where it starts,
// since rows depend on it (a leave's last data, a drop's members). It takes it from the instance's
// presence snapshot and reads the partition from the snapshot's position on, not from 0; the rows
// it writes are those a writer that read the whole partition writes. On a real embedded log, real
// snapshot files and a real store (SQLite).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { appendPresenceChurn, churnRows } from '../helpers/presence-churn.js';
import { PresenceProjection } from '../../projections/presence/presence-projection.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { SnapshotStore } from '../../projections/snapshots.js';

const NOW = 1_900_000_000_000;
/** The churn is an hour old when the partition is handed over (a window of 2 minutes). */
const clock = { now: () => NOW + 3_600_000 };
const PARTITIONS = 4;
const EVENTS = 3000;
const CHANNELS = 24;

describe('a presence writer handed a partition', () => {
  let dir: string;
  let log: EmbeddedLog;
  let closers: (() => Promise<void> | void)[];
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'presence-handover-'));
    log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: PARTITIONS });
    closers = [];
    await appendPresenceChurn(log, { events: EVENTS, channels: CHANNELS, start: NOW, stepMs: 100 });
  });
  afterEach(async () => {
    for (const close of closers.reverse()) await close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const store = (name: string): SqliteHistoryStore => {
    const s = new SqliteHistoryStore(join(dir, `${name}.db`));
    closers.push(() => s.close());
    return s;
  };
  const projection = (s: SqliteHistoryStore, writes = true): PresenceProjection =>
    new PresenceProjection({ store: s, clock, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000, writes });
  const partition = async (p: number, from = 0, to = Infinity): Promise<LogRecord[]> => (await log.read(Topics.presence, p, from, 1e9)).filter((r) => r.offset < to);
  const rows = (s: SqliteHistoryStore): Promise<unknown[]> => churnRows(s, CHANNELS);

  it('starts it from the snapshot of its member set (not from 0) and writes the rows a writer that read the whole partition writes', async () => {
    const ends = await log.endOffsets(Topics.presence);
    const handed = [...ends].sort((a, b) => b[1] - a[1])[0][0]; // the partition with the most records
    const end = ends.get(handed)!;
    const snapAt = Math.floor(end * 0.6);
    // Just after the snapshot: the rows b writes depend on members that entered before it.
    const checkpointAt = snapAt + 3;

    // The reader of every partition, snapshotted part way (its positions: snapAt on the handed partition).
    const reader = projection(store('reader'), false);
    await reader.start();
    for (const [p, e] of ends) reader.apply(await partition(p, 0, p === handed ? snapAt : e));
    const snapshots = new SnapshotStore({ dir: join(dir, 'snapshots'), logId: 'test-log', log, logger: pino({ level: 'silent' }) });
    const taken = reader.snapshot();
    await snapshots.save(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, taken.positions, taken.state);

    // Writer a wrote the partition up to checkpointAt, then lost it (what it held unwritten is dropped).
    const shared = store('shared');
    const a = projection(shared);
    await a.start();
    await a.handOver([handed]);
    a.apply(await partition(handed, 0, checkpointAt));
    await a.history.flush();
    a.apply(await partition(handed, checkpointAt, end));
    a.revoke([handed]);
    await a.close();

    // Writer b gets it: from the snapshot's position, with the members of its channels as they were there.
    const b = projection(shared);
    await b.start();
    const from = await b.handOver([handed], { store: snapshots, partitionCount: PARTITIONS });
    expect(from).toEqual(new Map([[handed, snapAt]]));
    b.apply(await partition(handed, snapAt));
    await b.close();

    // The reference: one writer of the whole partition from 0.
    const whole = store('whole');
    const w = projection(whole);
    await w.start();
    await w.handOver([handed]);
    w.apply(await partition(handed));
    await w.close();
    const written = await rows(shared);
    expect(written.length).toBeGreaterThan(end / 2);
    expect(written).toEqual(await rows(whole));
    expect(b.memberCount()).toBe(w.memberCount());
  });

  it('without a snapshot old enough, starts it from 0', async () => {
    const ends = await log.endOffsets(Topics.presence);
    const reader = projection(store('reader'), false);
    await reader.start();
    for (const [p, e] of ends) reader.apply(await partition(p, 0, e));
    const snapshots = new SnapshotStore({ dir: join(dir, 'snapshots'), logId: 'test-log', log, logger: pino({ level: 'silent' }) });
    const taken = reader.snapshot();
    await snapshots.save(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, taken.positions, taken.state);
    // The store's checkpoint of partition 0 is behind the snapshot: its rows need the member set as it was then.
    const b = projection(store('shared'));
    await b.start();
    expect(await b.handOver([0], { store: snapshots, partitionCount: PARTITIONS })).toEqual(new Map([[0, 0]]));
    expect(b.memberCount()).toBe(0);
    await b.close();
  });
});
