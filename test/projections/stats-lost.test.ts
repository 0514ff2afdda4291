// Records the log deleted before the stats projection applied them (README: Records the log deleted
// before they were applied; ConsumeOptions.lost): its checkpoint moves past them, so that a start
// after the loss neither reads from before the log's start again (where the loss was met, logged
// and counted again at every start) nor rewrites the rows it had written with samples rebuilt
// without the records the log deleted.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';
import { T0 } from '../helpers/stats-log.js';

/** A publish of `n` messages at `timestamp`, at `offset` of the messages topic's partition 0. */
const publish = (offset: number, timestamp: number, n = 1): LogRecord => ({
  topic: Topics.messages,
  partition: 0,
  offset,
  key: 'a:ch',
  timestamp,
  value: encodeEvent({ type: 'messages.published', appId: 'a', channel: 'ch', transport: 'rest', messages: Array.from({ length: n }, (_, i) => ({ id: `${offset}:${i}`, timestamp, data: 'x' })) }),
});

const projection = (store: SqliteStatsStore): StatsProjection => new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9 });

/** Messages counted in the hour of T0. */
const counted = async (store: SqliteStatsStore): Promise<number> =>
  (await store.query({ appId: 'a', unit: 'hour', start: 0, end: T0 + 3600_000 })).reduce((n, b) => n + (b.counters['messages.inbound.rest.messages.count'] ?? 0), 0);

describe('stats projection: records the log deleted before it applied them', () => {
  it('while it runs: its open samples are written as they are and final, the checkpoint moves past the loss, and a record after it in one of their intervals is a row of its own (a start after it reads no record before the loss)', async () => {
    const store = new SqliteStatsStore(':memory:');
    const first = projection(store);
    await first.start(Topics.messages);
    first.apply([0, 1, 2, 3, 4].map((o) => publish(o, T0 + 100 + o)));
    await first.flush();
    expect((await store.loadCheckpoint(Topics.messages)).get(0)).toMatchObject({ from: 0, applied: 5 });

    // Offsets 5..9 deleted before they were applied; the sample of T0 holds 0..4, and is open.
    first.lost(Topics.messages, 0, 10);
    await first.flush();
    expect((await store.loadCheckpoint(Topics.messages)).get(0)).toEqual({ from: 10, finalized: T0, applied: 10 });
    // After the loss: one publish of 2 in T0's interval, one of 3 in the next.
    first.apply([publish(10, T0 + 3000, 2), publish(11, T0 + 6100, 3)]);
    await first.flush();
    expect(await counted(store)).toBe(5 + 2 + 3);
    const checkpoint = (await store.loadCheckpoint(Topics.messages)).get(0)!;
    expect(checkpoint.from).toBeGreaterThanOrEqual(10);

    // A start after it: reads from the checkpoint (nothing before the loss), counts nothing twice.
    const second = projection(store);
    const from = (await second.start(Topics.messages)).get(0)!;
    expect(from).toBeGreaterThanOrEqual(10);
    second.apply([publish(10, T0 + 3000, 2), publish(11, T0 + 6100, 3)].filter((r) => r.offset >= from));
    second.apply([publish(12, T0 + 6200, 4)]);
    await second.close();
    expect(await counted(store)).toBe(5 + 2 + 3 + 4);
  });

  it('at a start, with nothing after the loss (the partition emptied): the checkpoint moves to the log\'s start', async () => {
    const store = new SqliteStatsStore(':memory:');
    const first = projection(store);
    await first.start(Topics.messages);
    first.apply([publish(0, T0 + 100), publish(1, T0 + 200)]);
    await first.close();
    const second = projection(store);
    expect((await second.start(Topics.messages)).get(0)).toBe(0);
    second.lost(Topics.messages, 0, 7);
    await second.flush();
    expect((await store.loadCheckpoint(Topics.messages)).get(0)).toMatchObject({ from: 7, applied: 7 });
    const third = projection(store);
    expect((await third.start(Topics.messages)).get(0)).toBe(7);
    await second.close();
    await third.close();
    expect(await counted(store)).toBe(2);
  });

  it('at a start, when the log deleted only records it had written (before its checkpoint\'s `applied`): the rows written are not replaced by samples rebuilt without them, and what follows counts', async () => {
    const store = new SqliteStatsStore(':memory:');
    const first = projection(store);
    await first.start(Topics.messages);
    const before = [0, 1, 2, 3, 4, 5].map((o) => publish(o, T0 + 100 + o));
    first.apply(before);
    await first.close(); // one open sample of T0 with 0..5 written; the checkpoint from 0, applied 6
    expect(await counted(store)).toBe(6);

    // The log starts at 3 now: 3..5 are replayed, then what follows.
    const second = projection(store);
    expect((await second.start(Topics.messages)).get(0)).toBe(0);
    second.lost(Topics.messages, 0, 3);
    second.apply(before.slice(3));
    await second.flush();
    // Before the replay passes 6 no checkpoint is written (a crash meets the loss again, the same way).
    second.apply([publish(6, T0 + 2000, 2), publish(7, T0 + 6100, 3)]);
    await second.close();
    expect(await counted(store)).toBe(6 + 2 + 3);
    const checkpoint = (await store.loadCheckpoint(Topics.messages)).get(0)!;
    expect(checkpoint.from).toBeGreaterThanOrEqual(3);
    expect(checkpoint.applied).toBe(8);

    // And a start after it counts nothing twice.
    const third = projection(store);
    const from = (await third.start(Topics.messages)).get(0)!;
    third.apply([...before, publish(6, T0 + 2000, 2), publish(7, T0 + 6100, 3)].filter((r) => r.offset >= from));
    await third.close();
    expect(await counted(store)).toBe(6 + 2 + 3);
  });

  it('embedded: a start behind the log\'s retention (a partition idle longer than LOG_RETENTION_HOURS, its open sample spread over segments retention deleted) keeps the rows written, goes on from the log\'s start, and the next start does not meet the loss again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stats-lost-'));
    const path = join(dir, 'log.db');
    const store = new SqliteStatsStore(join(dir, 'stats.db'));
    const append = async (log: EmbeddedLog, offset: number, timestamp: number): Promise<void> => {
      const r = publish(offset, timestamp);
      await log.append(Topics.messages, [{ key: r.key, timestamp, value: r.value }]);
    };
    /** The stats projection run as the service wires it (projections/projection-set.ts), until caught up; then stopped. */
    const run = async (log: EmbeddedLog, then?: (stats: StatsProjection) => Promise<void>): Promise<void> => {
      const stats = projection(store);
      const runner = new ProjectionRunner({ log, logger: pino({ level: 'silent' }) });
      await runner.start({
        name: 'stats',
        topics: [Topics.messages],
        from: (topic: Topic) => stats.start(topic),
        handle: (records: LogRecord[]) => stats.apply(records),
        lost: (topic: Topic, partition: number, next: number) => stats.lost(topic, partition, next),
      });
      await then?.(stats);
      await runner.stop();
      await stats.close();
    };
    try {
      // Three appends (a segment each) in one 6-second sample, which stays open: nothing follows.
      let log = new EmbeddedLog({ path, retentionMs: 1000 });
      for (const offset of [0, 1, 2]) await append(log, offset, T0 + 100 + offset);
      await run(log);
      expect(await counted(store)).toBe(3);
      expect((await store.loadCheckpoint(Topics.messages)).get(0)).toMatchObject({ from: 0, applied: 3 });
      expect(await log.enforceRetention(T0 + 10_000)).toBe(2); // the partition's newest segment stays
      await log.close();

      // Met at the start: offsets 0 and 1 are gone; 2 is read again into the row written already.
      log = new EmbeddedLog({ path });
      await run(log, async (stats) => {
        await append(log, 3, T0 + 400); // in the same interval, after it
        await stats.visible(Topics.messages, [{ partition: 0, offset: 3 }], 10_000);
      });
      expect(log.lostRecords()).toEqual([{ topic: Topics.messages, count: 2 }]);
      expect(await counted(store)).toBe(4); // not 2: the sample rebuilt from offset 2 did not replace the row of 0..2
      expect((await store.loadCheckpoint(Topics.messages)).get(0)!.from).toBeGreaterThanOrEqual(2);
      await log.close();

      // The next start reads nothing before the log's start.
      log = new EmbeddedLog({ path });
      await run(log);
      expect(log.lostRecords()).toEqual([]);
      expect(await counted(store)).toBe(4);
      await log.close();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
