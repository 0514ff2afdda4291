import { describe, expect, it } from 'vitest';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { decodeEvent } from '../../src/log/events.js';
import { T0, TOPICS, allRecords, buildLog, crashAfter, rng, runToEnd, snapshot } from '../helpers/stats-log.js';

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

  it('counts every event exactly once in the totals', async () => {
    const log = await buildLog();
    const store = new SqliteStatsStore(':memory:');
    await runToEnd(log, store, () => 37);
    let messages = 0;
    let presence = 0;
    let api = 0;
    for (const topic of TOPICS) {
      for (const records of await allRecords(log, topic)) {
        for (const r of records) {
          const e = decodeEvent(r.value);
          if (e.type === 'messages.published') messages += e.messages.length;
          if (e.type === 'presence.changed') presence += 1;
          if (e.type === 'usage.reported') api += e.counters['apiRequests.all.succeeded'];
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
    await log.close();
  });
});
