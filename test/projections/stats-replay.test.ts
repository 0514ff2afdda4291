import { describe, expect, it } from 'vitest';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { replayStats } from '../../src/cli/rebuild.js';
import { T0, TOPICS, allRecords, buildLog, crashAfter, isPersisted, rng, runToEnd, snapshot } from '../helpers/stats-log.js';

describe('stats projection replay safety (issue: never lost, never counted twice)', () => {
  it('crashing at any moment and resuming, or rebuilding from offset 0, gives identical numbers', async () => {
    const log = await buildLog();
    const reference = new SqliteStatsStore(':memory:');
    await runToEnd(log, reference, () => 1000);
    const expected = await snapshot(reference);
    const totals = Object.values(expected as Record<string, { counters: Record<string, number> }[]>).flat();
    expect(totals.length).toBeGreaterThan(20);

    const random = rng(7);
    for (let run = 0; run < 8; run++) {
      const store = new SqliteStatsStore(':memory:');
      // First life: random batches and random flushes, then a crash (no final flush).
      const stopAfter = Math.floor(random() * 3000);
      await crashAfter(log, store, stopAfter, random, 50, 0.3);
      // Second life: resume from the stored checkpoints.
      await runToEnd(log, store, () => 1 + Math.floor(random() * 200));
      expect(await snapshot(store), `run ${run}, crash after ${stopAfter} records`).toEqual(expected);
    }

    // Rebuild from offset 0 into a store that already holds the numbers: still identical.
    const rebuilt = new SqliteStatsStore(':memory:');
    await runToEnd(log, rebuilt, () => 1000);
    await runToEnd(log, rebuilt, () => 7); // checkpoints say "done": nothing changes
    expect(await snapshot(rebuilt)).toEqual(expected);
    await log.close();
  });

  it("the rebuild's replay, which visits records where they lie in the log (no record object), gives the numbers of the projection applied record by record", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stats-scan-'));
    try {
      const path = join(dir, 'log.db');
      const log = await buildLog(3000, path);
      const reference = new SqliteStatsStore(':memory:');
      await runToEnd(log, reference, () => 1000);
      const expected = await snapshot(reference);
      // From the log's window of recent records, then from its SQLite segments after a reopen;
      // in batches that end inside segments, and with writes inside the replay.
      const fromWindow = new SqliteStatsStore(':memory:');
      expect(await replayStats({ log, store: fromWindow, isPersisted, topics: TOPICS, batch: 97, flushEvery: 500 })).toBe(3000);
      expect(await snapshot(fromWindow)).toEqual(expected);
      await log.close();
      const reopened = new EmbeddedLog({ path, partitions: 3 });
      const fromSegments = new SqliteStatsStore(':memory:');
      expect(await replayStats({ log: reopened, store: fromSegments, isPersisted, topics: TOPICS, batch: 97, flushEvery: 500 })).toBe(3000);
      expect(await snapshot(fromSegments)).toEqual(expected);
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a late report whose row was not written before a crash is written after it (its interval being older than the final sample)', async () => {
    const report = (offset: number, timestamp: number, intervalStart: number, n: number): LogRecord => ({
      topic: Topics.usage,
      partition: 0,
      offset,
      key: 'app0',
      timestamp,
      value: encodeEvent({ type: 'usage.reported', appId: 'app0', intervalStart, instanceId: 'i1', counters: { 'apiRequests.all.succeeded': n } }),
    });
    // Reports every 6 s for 3 minutes, then one 3 minutes late, then one more on time.
    const records: LogRecord[] = [];
    for (let i = 0; i < 30; i++) records.push(report(i, T0 + i * 6000 + 100, T0 + i * 6000, 1));
    records.push(report(30, T0 + 180_200, T0 + 6000, 100));
    records.push(report(31, T0 + 186_100, T0 + 186_000, 1));
    const total = async (store: SqliteStatsStore): Promise<number> =>
      (await store.query({ appId: 'app0', unit: 'hour', start: 0, end: T0 + 3600_000 }))[0].counters['apiRequests.all.succeeded'];

    const store = new SqliteStatsStore(':memory:');
    const first = new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9 });
    await first.start(Topics.usage);
    first.apply(records.slice(0, 30));
    await first.flush(); // samples of the first 2 minutes are final now
    first.apply(records.slice(30, 31)); // the late report, then a crash before it is written
    const second = new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9 });
    const from = (await second.start(Topics.usage)).get(0)!;
    expect(from).toBeLessThan(30); // the replay reads the late report again
    second.apply(records.slice(from));
    await second.close();
    expect(await total(store)).toBe(30 + 100 + 1);
  });

  it('counts every event exactly once in the totals', async () => {
    const log = await buildLog();
    const store = new SqliteStatsStore(':memory:');
    await runToEnd(log, store, () => 37);
    let messages = 0;
    let presence = 0;
    let api = 0;
    let opened = 0;
    let connections = 0;
    for (const topic of TOPICS) {
      for (const records of await allRecords(log, topic)) {
        for (const r of records) {
          const e = decodeEvent(r.value);
          if (e.type === 'messages.published') messages += e.messages.length;
          if (e.type === 'presence.changed') presence += 1;
          if (e.type === 'usage.reported') api += e.counters['apiRequests.all.succeeded'];
          if (e.type === 'usage.reported') connections += e.connections ?? 0;
          if (e.type === 'connection.opened' && !e.resumed) opened += 1;
        }
      }
    }
    const sum = (key: string) => ['app0', 'app1', 'app2'].reduce(async (acc, app) => {
      const buckets = await store.query({ appId: app, unit: 'month', start: 0, end: T0 + 3600_000 });
      return (await acc) + buckets.reduce((n, b) => n + (b.counters[key] ?? 0), 0);
    }, Promise.resolve(0));
    expect(await sum('messages.inbound.rest.messages.count')).toBe(messages);
    expect(await sum('messages.inbound.realtime.presence.count')).toBe(presence);
    expect(await sum('apiRequests.all.succeeded')).toBe(api);
    expect(await sum('connections.all.opened')).toBe(opened);
    expect(opened).toBeGreaterThan(50);
    // Every reading counts once in its sample: the samples of all apps add up to all readings.
    let summed = 0;
    for (const app of ['app0', 'app1', 'app2']) {
      for (const b of await store.query({ appId: app, unit: 'month', start: 0, end: T0 + 3600_000 })) summed += b.connectionSum;
    }
    expect(summed).toBe(connections);
    expect(connections).toBeGreaterThan(100);
    await log.close();
  });
});
