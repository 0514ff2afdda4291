import { describe, expect, it } from 'vitest';
import type { StatsRow, StatsStore } from '../../projections/stats/stats-store.js';
import { T0, buildLog, crashAfter, rng, runToEnd, snapshot, statsRow } from '../helpers/stats-log.js';

export interface StatsStoreFactory {
  /** A new, empty store of its own. */
  open: () => Promise<StatsStore>;
  cleanup: () => Promise<void>;
}

/** A real counter: stores may keep only the known ones (BASE_COUNTERS). */
const C = 'messages.inbound.rest.messages.count';

const row = statsRow;

/** One contract, every stats store (STYLE: one port, one contract suite, several adapters). */
export function statsStoreContract(name: string, factory: () => Promise<StatsStoreFactory>, options: { replayRuns: number }): void {
  describe(`StatsStore contract: ${name}`, () => {
    const withStore = async (fn: (store: StatsStore, f: StatsStoreFactory) => Promise<void>): Promise<void> => {
      const f = await factory();
      try {
        const store = await f.open();
        await store.init();
        await fn(store, f);
      } finally {
        await f.cleanup();
      }
    };

    it('folds samples into minute, hour, day and month buckets: counters add, peaks are the largest sample', async () => {
      await withStore(async (store) => {
        await store.write('messages', [
          row({ interval: T0, channels: 2, counters: { [C]: 1 } }),
          row({ interval: T0, partition: 1, channels: 3, counters: { [C]: 2 } }), // same sample, another partition
          row({ interval: T0 + 6000, channels: 1, counters: { [C]: 4 } }),
          row({ interval: T0 + 3600_000, channels: 7, counters: { [C]: 8 } }),
          row({ interval: Date.UTC(2030, 1, 1), channels: 1, counters: { [C]: 16 } }),
          row({ appId: 'other', counters: { [C]: 100 } }),
        ], new Map([[0, { from: 5, finalized: -Infinity }]]));
        const minutes = await store.query({ appId: 'a', unit: 'minute', start: 0, end: Date.UTC(2031, 0, 1) });
        expect(minutes.map((b) => [b.start, b.counters[C], b.channelMax, b.channelSamples, b.channelSum])).toEqual([
          [T0, 7, 5, 2, 6],
          [T0 + 3600_000, 8, 7, 1, 7],
          [Date.UTC(2030, 1, 1), 16, 1, 1, 1],
        ]);
        const hours = await store.query({ appId: 'a', unit: 'hour', start: 0, end: Date.UTC(2031, 0, 1) });
        expect(hours.map((b) => b.start)).toEqual([T0, T0 + 3600_000, Date.UTC(2030, 1, 1)]);
        const days = await store.query({ appId: 'a', unit: 'day', start: 0, end: Date.UTC(2031, 0, 1) });
        expect(days.map((b) => [b.counters[C], b.channelMax, b.channelMin])).toEqual([[15, 7, 1], [16, 1, 1]]);
        const months = await store.query({ appId: 'a', unit: 'month', start: 0, end: Date.UTC(2031, 0, 1) });
        expect(months.map((b) => [b.start, b.counters[C], b.lastSample])).toEqual([
          [Date.UTC(2030, 0, 1), 15, T0 + 3600_000],
          [Date.UTC(2030, 1, 1), 16, Date.UTC(2030, 1, 1)],
        ]);
        expect(await store.query({ appId: 'a', unit: 'minute', start: T0 + 6000, end: T0 + 6000 })).toHaveLength(1);
      });
    });

    it('open connections fold like channels: summed per 6-second sample over partitions and slots, then peak, min, mean, count', async () => {
      await withStore(async (store) => {
        await store.write('usage', [
          row({ interval: T0, channels: 0, connections: 2 }),
          row({ interval: T0, partition: 1, channels: 0, connections: 3 }), // another instance's reading, another partition
          row({ interval: T0 + 6000, channels: 4, connections: 1 }),
          row({ interval: T0 + 6000, slot: 99, version: 98, channels: 0, connections: 1 }), // a late report
          row({ interval: T0 + 12_000, channels: 2, connections: 0 }), // counters, no connection open
          row({ interval: T0 + 3600_000, connections: 7 }),
        ], new Map());
        const minutes = await store.query({ appId: 'a', unit: 'minute', start: 0, end: Date.UTC(2031, 0, 1) });
        expect(minutes.map((b) => [b.start, b.connectionSamples, b.connectionSum, b.connectionMax, b.connectionMin, b.channelMax])).toEqual([
          [T0, 2, 7, 5, 2, 4],
          [T0 + 3600_000, 1, 7, 7, 7, 1],
        ]);
        const [day] = await store.query({ appId: 'a', unit: 'day', start: 0, end: Date.UTC(2031, 0, 1) });
        expect([day.connectionSamples, day.connectionSum, day.connectionMax, day.connectionMin]).toEqual([3, 14, 7, 2]);
        // A sample written again replaces its reading, not adds to it.
        await store.write('usage', [row({ interval: T0, version: 2, channels: 0, connections: 6 })], new Map());
        const [minute] = await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 + 59_999 });
        expect([minute.connectionSum, minute.connectionMax]).toEqual([11, 9]);
      });
    });

    it('a sample written again replaces the earlier one only with the same or a newer version; slots are separate rows', async () => {
      await withStore(async (store) => {
        await store.write('usage', [row({ version: 5, counters: { [C]: 5 } })], new Map());
        await store.write('usage', [row({ version: 3, counters: { [C]: 3 } })], new Map());
        await store.write('usage', [row({ version: 5, counters: { [C]: 5 } })], new Map());
        expect((await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 }))[0].counters[C]).toBe(5);
        await store.write('usage', [row({ version: 7, counters: { [C]: 7 } }), row({ slot: 99, version: 98, counters: { [C]: 1 } })], new Map());
        expect((await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 }))[0].counters[C]).toBe(8);
      });
    });

    it('a sample that arrives late for a minute, hour, day and month already rolled up counts in every unit, as summing the samples does', async () => {
      await withStore(async (store) => {
        const units = ['minute', 'hour', 'day', 'month'] as const;
        const all = (unit: (typeof units)[number]) => ({ appId: 'a', unit, start: 0, end: Date.UTC(2031, 0, 1) });
        await store.write('usage', [
          row({ interval: T0, channels: 2, connections: 1, counters: { [C]: 1 } }),
          row({ interval: T0 + 60_000, channels: 1, connections: 5, counters: { [C]: 2 } }),
          row({ interval: T0 + 86_400_000 * 3, channels: 4, counters: { [C]: 4 } }),
        ], new Map());
        for (const unit of units) expect(await store.query(all(unit))).toEqual(await store.queryFromSamples(all(unit)));
        // Late: a row of its own (slot) in a minute long rolled up, and a new sample in an old minute.
        await store.write('usage', [
          row({ interval: T0, slot: 500, version: 499, channels: 3, connections: 2, counters: { [C]: 8 } }),
          row({ interval: T0 + 12_000, partition: 2, version: 7, channels: 9, counters: { [C]: 16 } }),
        ], new Map());
        for (const unit of units) {
          const buckets = await store.query(all(unit));
          expect(buckets, unit).toEqual(await store.queryFromSamples(all(unit)));
          expect(buckets.reduce((n, b) => n + b.counters[C], 0)).toBe(31);
        }
        const [month] = await store.query(all('month'));
        expect([month.channelMax, month.channelMin, month.channelSamples, month.connectionMax, month.connectionSum]).toEqual([9, 1, 4, 5, 8]);
      });
    });

    it('a page cut anywhere (a window inside buckets) gives what summing its samples gives', async () => {
      await withStore(async (store) => {
        const rows: StatsRow[] = [];
        const random = rng(5);
        for (let i = 0; i < 400; i++) {
          const interval = T0 + Math.floor(random() * 40 * 86_400_000 / 6000) * 6000;
          rows.push(row({ interval, partition: i % 3, version: i, channels: Math.floor(random() * 4), connections: Math.floor(random() * 3), counters: { [C]: 1 + i } }));
        }
        await store.write('messages', rows, new Map());
        // Replayed rows (the same again) and older versions of some (left out, as FINAL leaves them).
        await store.write('messages', rows.filter((_, i) => i % 3 === 0), new Map());
        await store.write('messages', rows.filter((_, i) => i % 5 === 0 && i > 0).map((r) => ({ ...r, version: r.version - 1, counters: { [C]: 1_000_000 } })), new Map());
        const newest = Math.max(...rows.map((r) => r.interval));
        for (let k = 0; k < 16; k++) {
          const a = T0 + Math.floor(random() * 45 * 86_400_000 / 6000) * 6000;
          // Some ends not 6-second aligned (a cursor - 1); every fourth window ends after the newest
          // sample, as a page that ends now does.
          const b = k % 4 === 3 ? newest + 3000 : a + Math.floor(random() * 20 * 86_400_000 / 6000) * 6000 - (k % 3);
          for (const unit of ['minute', 'hour', 'day', 'month'] as const) {
            const q = { appId: 'a', unit, start: a, end: b };
            expect(await store.query(q), `${unit} ${a}..${b}`).toEqual(await store.queryFromSamples(q));
          }
        }
      });
    });

    it("knows an app's oldest sample (GET /stats widens a page's window no further back): none before its first, the oldest of any partition or slot after", async () => {
      await withStore(async (store) => {
        expect(store.oldestInterval).toBeTypeOf('function');
        expect(await store.oldestInterval?.('a')).toBeUndefined();
        await store.write('messages', [row({ interval: T0 + 60_000 }), row({ interval: T0 + 6000, partition: 2 }), row({ appId: 'other', interval: T0 })], new Map());
        expect(await store.oldestInterval?.('a')).toBe(T0 + 6000);
        // A late row for an older interval (its own slot) moves it back.
        await store.write('usage', [row({ interval: T0 - 6000, slot: 9, version: 9 })], new Map());
        expect(await store.oldestInterval?.('a')).toBe(T0 - 6000);
        expect(await store.oldestInterval?.('other')).toBe(T0);
        expect(await store.oldestInterval?.('none')).toBeUndefined();
      });
    });

    it('lists the apps with any stats, each once (the start warns of those an apps file leaves out)', async () => {
      await withStore(async (store) => {
        expect(await store.appsWithData()).toEqual([]);
        await store.write('messages', [row({ interval: T0 }), row({ interval: T0 + 6000, partition: 1 }), row({ appId: 'other', interval: T0 }), row({ appId: 'b-app', interval: T0 + 3600_000 })], new Map());
        expect((await store.appsWithData()).sort()).toEqual(['a', 'b-app', 'other']);
      });
    });

    it('keeps a checkpoint per topic and partition; the latest wins', async () => {
      await withStore(async (store) => {
        expect(await store.loadCheckpoint('messages')).toEqual(new Map());
        await store.write('messages', [], new Map([[0, { from: 3, finalized: -Infinity }], [1, { from: 9, finalized: T0 }]]));
        await store.write('messages', [], new Map([[0, { from: 4, finalized: T0 + 6000 }]]));
        await store.write('usage', [], new Map([[0, { from: 1, finalized: -Infinity }]]));
        expect(await store.loadCheckpoint('messages')).toEqual(new Map([[0, { from: 4, finalized: T0 + 6000 }], [1, { from: 9, finalized: T0 }]]));
        expect(await store.loadCheckpoint('usage')).toEqual(new Map([[0, { from: 1, finalized: -Infinity }]]));
      });
    });

    it('the projection over this store gives identical numbers after crashes and replays', async () => {
      const log = await buildLog(1200);
      const f = await factory();
      try {
        const reference = await f.open();
        await runToEnd(log, reference, () => 500);
        const expected = await snapshot(reference);
        const random = rng(11);
        for (let run = 0; run < options.replayRuns; run++) {
          const store = await f.open();
          const stopAfter = Math.floor(random() * 1200);
          await crashAfter(log, store, stopAfter, random, 80, 0.2);
          await runToEnd(log, store, () => 1 + Math.floor(random() * 300));
          expect(await snapshot(store), `run ${run}, crash after ${stopAfter}`).toEqual(expected);
        }
        expect(Object.values(expected as Record<string, unknown[]>).flat().length).toBeGreaterThan(5);
        void T0;
      } finally {
        await f.cleanup();
        await log.close();
      }
    }, 120_000);
  });
}
