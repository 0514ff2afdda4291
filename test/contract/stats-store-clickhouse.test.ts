import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { CachedStatsStore } from '../../projections/stats/stats-cache.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';
import { statsStoreContract } from './stats-store.contract.js';
import { Base, BASE_COUNTERS, bucketEnd, intervalId as intervalIdOf, SAMPLE_MS } from '../../src/domain/stats-sample.js';
import { flatEntries } from '../../src/domain/stats-record.js';
import { NAMED_COLUMNS, specName } from '../../projections/stats/named-columns.js';
import { T0, buildLog, crashAfter, rng, runInstance, runToEnd, snapshot } from '../helpers/stats-log.js';
import type { StatsCheckpoint, StatsRow } from '../../projections/stats/stats-store.js';

const clickhouse = await findClickHouse();

describeWithInfra('ClickHouseStatsStore', 'ClickHouse', clickhouse, ({ url }) => {
  // Bare, and behind the cache the service reads stats through (projections/stats/stats-cache.ts).
  for (const [name, wrap] of [
    ['clickhouse', (store: StatsStore) => store],
    ['clickhouse, behind the stats cache', (store: StatsStore) => new CachedStatsStore(store, { maxRows: 100_000, maxAgeMs: 3600_000 })],
  ] as const) {
    statsStoreContract(
      name,
      async () => {
        // Tables of their own for every store (STYLE: unique names, no global resets).
        const prefixes: string[] = [];
        const opened: StatsStore[] = [];
        return {
          open: async () => {
            const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
            prefixes.push(tablePrefix);
            const store = wrap(new ClickHouseStatsStore({ url, tablePrefix }));
            opened.push(store);
            return store;
          },
          cleanup: async () => {
            for (const s of opened) await s.close();
            const client = createClickHouseClient({ url });
            for (const prefix of prefixes) {
              for (const table of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
                await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + table)}`.text });
              }
            }
            await client.close();
          },
        };
      },
      { replayRuns: 2 },
    );
  }

  /** A store of its own tables, and a way to drop them. */
  const tables = () => {
    const prefixes: string[] = [];
    const stores: ClickHouseStatsStore[] = [];
    return {
      prefix: () => {
        const p = `t_${randomBytes(4).toString('hex')}_`;
        prefixes.push(p);
        return p;
      },
      open: (tablePrefix: string) => {
        const store = new ClickHouseStatsStore({ url, tablePrefix });
        stores.push(store);
        return store;
      },
      drop: async () => {
        for (const s of stores) await s.close();
        const client = createClickHouseClient({ url });
        for (const prefix of prefixes) {
          for (const name of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
            await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + name)}`.text });
          }
        }
        await client.close();
      },
    };
  };

  it('a crash between writing samples and rolling them up (or halfway up) loses nothing: the replay rolls them up', async () => {
    const log = await buildLog(1200);
    const t = tables();
    try {
      const reference = t.open(t.prefix());
      await runToEnd(log, reference, () => 500);
      const expected = await snapshot(reference);
      const random = rng(23);
      for (let run = 0; run < 3; run++) {
        const prefix = t.prefix();
        const inner = t.open(prefix);
        let crashed = false;
        // The first life dies inside a write: after the samples, after some of the rollups, or before the checkpoint.
        const dying: StatsStore = Object.assign(Object.create(inner) as ClickHouseStatsStore, {
          write: async (topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint) => {
            if (crashed) throw new Error('dead');
            if (rows.length === 0 || random() < 0.6) return inner.write(topic, rows, checkpoint);
            crashed = true;
            await inner.writeSamples(rows);
            const step = random();
            if (step > 0.33) await inner.rollUp(rows.slice(0, Math.ceil(rows.length * random())));
            if (step > 0.66) await inner.rollUp(rows);
            throw new Error('crash');
          },
        });
        await crashAfter(log, dying, 1200, random, 80, 0.3).catch(() => undefined);
        expect(crashed, `run ${run} crashed inside a write`).toBe(true);
        await runToEnd(log, t.open(prefix), () => 1 + Math.floor(random() * 300));
        expect(await snapshot(inner), `run ${run}`).toEqual(expected);
      }
    } finally {
      await t.drop();
      await log.close();
    }
  }, 120_000);

  it('several instances writing the same tables at once, each its own partitions, give the numbers one instance gives', async () => {
    const log = await buildLog(1500);
    const t = tables();
    try {
      const reference = t.open(t.prefix());
      await runToEnd(log, reference, () => 500);
      const expected = await snapshot(reference);
      const prefix = t.prefix();
      const instances = [t.open(prefix), t.open(prefix), t.open(prefix)];
      const random = rng(31);
      // Partition p of every topic is instance p's (3 partitions): they write the same minutes at once.
      await Promise.all(instances.map((store, i) => runInstance(log, store, (_topic, p) => p === i, random)));
      expect(await snapshot(instances[0])).toEqual(expected);
      // A rebuild from offset 0 by one instance, beside the rows the three wrote: still the same.
      const rebuilt = t.open(prefix);
      const fromZero: StatsStore = Object.assign(Object.create(rebuilt) as ClickHouseStatsStore, { loadCheckpoint: async () => new Map() });
      await runInstance(log, fromZero, () => true, random);
      expect(await snapshot(rebuilt)).toEqual(expected);
    } finally {
      await t.drop();
      await log.close();
    }
  }, 120_000);

  it('a rollup an instance computed before another instance wrote its samples, landing last, does not win over the complete one', async () => {
    const t = tables();
    const client = createClickHouseClient({ url });
    try {
      const C = Base.inbound('rest', 'messages', 'count');
      const p0: StatsRow[] = [0, 1, 2].map((i) => ({ appId: 'a', interval: T0 + i * 6000, topic: 'messages', partition: 0, slot: 0, version: 10 + i, counters: { [C]: 1 }, channels: 1, connections: 0 }));
      const p1: StatsRow[] = [0, 1].map((i) => ({ appId: 'a', interval: T0 + i * 6000, topic: 'messages', partition: 1, slot: 0, version: 3 + i, counters: { [C]: 5 }, channels: 2, connections: 0 }));
      // Instance A's view: only its own partition's samples (what its read saw before B's insert).
      const slowPrefix = t.prefix();
      const slow = t.open(slowPrefix);
      await slow.init();
      await slow.write('messages', p0, new Map());
      // The shared tables: both partitions, rolled up by B after both inserts.
      const prefix = t.prefix();
      const shared = t.open(prefix);
      await shared.init();
      await shared.writeSamples(p0);
      await shared.write('messages', p1, new Map());
      // A's rollups (minute, hour, day, month) land after B's.
      await client.command({ query: sql`INSERT INTO ${sqlTable('default', `${prefix}stats_rollups`)} SELECT * FROM ${sqlTable('default', `${slowPrefix}stats_rollups`)}`.text });
      for (const unit of ['minute', 'hour', 'day', 'month'] as const) {
        const q = { appId: 'a', unit, start: 0, end: T0 + 86_400_000 };
        const [bucket] = await shared.query(q);
        expect(bucket.counters[C], unit).toBe(13);
        expect(await shared.query(q)).toEqual(await shared.queryFromSamples(q));
      }
    } finally {
      await client.close();
      await t.drop();
    }
  });

  it('the stats view: one column per figure under the spec name (inbound.rest.messages.count, apiRequests.succeeded, channels.peak...), as GET /stats computes them', async () => {
    const t = tables();
    const client = createClickHouseClient({ url });
    try {
      const prefix = t.prefix();
      const store = t.open(prefix);
      await store.init();
      const start = Date.UTC(2026, 0, 31, 23, 58);
      const random = rng(3);
      const rows: StatsRow[] = [];
      for (let i = 0; i < 60; i++) {
        const counters: Record<string, number> = {};
        for (const name of BASE_COUNTERS) if (random() < 0.5) counters[name] = 1 + Math.floor(random() * 100);
        rows.push({ appId: 'a', interval: start + i * 6000, topic: 'usage', partition: i % 2, slot: 0, version: i, counters, channels: Math.floor(random() * 5), connections: Math.floor(random() * 4) });
      }
      await store.write('usage', rows, new Map());
      for (const unit of ['minute', 'hour', 'day', 'month'] as const) {
        const buckets = await store.query({ appId: 'a', unit, start: 0, end: start + 3600_000 });
        const viewRows = (await (
          await client.query({ query: sql`SELECT * FROM ${sqlTable('default', `${prefix}stats`)} WHERE app_id = 'a' AND unit = ${unit} ORDER BY interval_start`.text, format: 'JSONEachRow' })
        ).json()) as Record<string, string | number>[];
        expect(viewRows.map((r) => r.intervalId), unit).toEqual(buckets.map((b) => intervalIdOf(b.start, unit)));
        buckets.forEach((b, i) => {
          const total = (bucketEnd(b.start, unit) - b.start) / SAMPLE_MS;
          const entries = flatEntries(b, total, total);
          const expected = Object.fromEntries(NAMED_COLUMNS.map((c) => [c.name, 0]));
          for (const [key, value] of Object.entries(entries)) expected[specName(key)] = value;
          const got = Object.fromEntries(NAMED_COLUMNS.map((c) => [c.name, Number(viewRows[i][c.name])]));
          expect(got, `${unit} ${viewRows[i].intervalId}`).toEqual(expected);
        });
      }
      // By name, as an analyst would.
      const months = (await (
        await client.query({
          query: sql`SELECT \`inbound.rest.messages.count\` AS n, \`apiRequests.succeeded\` AS ok, \`channels.peak\` AS peak FROM ${sqlTable('default', `${prefix}stats`)} WHERE app_id = 'a' AND unit = 'month'`.text,
          format: 'JSONEachRow',
        })
      ).json()) as { n: number; ok: number; peak: number }[];
      expect(months).toHaveLength(2); // January's last minutes and February's first
      expect(months.reduce((n, m) => n + Number(m.n), 0)).toBe(rows.reduce((n, r) => n + (r.counters[Base.inbound('rest', 'messages', 'count')] ?? 0), 0));
      expect(Number(months[0].peak)).toBeGreaterThan(0);
    } finally {
      await client.close();
      await t.drop();
    }
  });

  it('a table of its own named like the stats view is never dropped: the store refuses to start, saying why', async () => {
    const t = tables();
    const client = createClickHouseClient({ url });
    try {
      const prefix = t.prefix();
      await client.command({ query: sql`CREATE TABLE ${sqlTable('default', `${prefix}stats`)} (x UInt8) ENGINE = MergeTree() ORDER BY x`.text });
      await client.insert({ table: sqlTable('default', `${prefix}stats`).text, format: 'JSONEachRow', values: [{ x: 7 }] });
      await expect(t.open(prefix).init()).rejects.toThrow(/is not the stats view/);
      const rows = await (await client.query({ query: sql`SELECT x FROM ${sqlTable('default', `${prefix}stats`)}`.text, format: 'JSONEachRow' })).json();
      expect(rows).toEqual([{ x: 7 }]);
    } finally {
      await client.close();
      await t.drop();
    }
  });

  it('a checkpoints table an older release made gets applied_offset and keeps its rows; a new one is made with it, so no start alters it', async () => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const table = sqlTable('default', `${tablePrefix}stats_checkpoints`);
    const client = createClickHouseClient({ url });
    const columns = async (prefix: string): Promise<string[]> =>
      ((await (await client.query({ query: `SELECT name FROM system.columns WHERE database = currentDatabase() AND table = '${prefix}stats_checkpoints' ORDER BY name`, format: 'JSONEachRow' })).json()) as { name: string }[]).map((c) => c.name);
    const stores: ClickHouseStatsStore[] = [];
    const fresh = `t_${randomBytes(4).toString('hex')}_`;
    try {
      await client.command({ query: sql`CREATE TABLE ${table} (topic String, partition UInt32, from_offset UInt64, finalized Int64, version UInt64) ENGINE = ReplacingMergeTree(version) ORDER BY (topic, partition)`.text });
      await client.insert({ table: table.text, format: 'JSONEachRow', values: [{ topic: 'messages', partition: 2, from_offset: 40, finalized: -1, version: 1 }] });
      // Two instances starting together: both find the column missing, one adds it, neither fails.
      stores.push(new ClickHouseStatsStore({ url, tablePrefix }), new ClickHouseStatsStore({ url, tablePrefix }));
      await Promise.all(stores.map((s) => s.init()));
      expect(await columns(tablePrefix)).toContain('applied_offset');
      expect(await stores[0].loadCheckpoint('messages')).toEqual(new Map([[2, { from: 40, finalized: -Infinity }]]));
      // A new table has it from its CREATE.
      const made = new ClickHouseStatsStore({ url, tablePrefix: fresh });
      stores.push(made);
      await made.init();
      expect(await columns(fresh)).toContain('applied_offset');
    } finally {
      for (const s of stores) await s.close();
      for (const prefix of [tablePrefix, fresh]) {
        for (const name of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
          await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + name)}`.text });
        }
      }
      await client.close();
    }
  });

  it('a table an older release made gets the connections column, and keeps its rows', async () => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const table = sqlTable('default', `${tablePrefix}stats_samples`);
    const client = createClickHouseClient({ url });
    const store = new ClickHouseStatsStore({ url, tablePrefix });
    try {
      // The table as the release before realtime stats made it.
      await client.command({
        query: sql`CREATE TABLE ${table} (
          app_id String, sample_start UInt64, topic String, partition UInt32, slot UInt64, version UInt64,
          counter_ids Array(UInt16), counter_values Array(Float64), channels UInt32, day Date
        ) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMM(day) ORDER BY (app_id, sample_start, topic, partition, slot)`.text,
      });
      await client.insert({
        table: table.text,
        format: 'JSONEachRow',
        values: [{ app_id: 'a', sample_start: T0, topic: 'messages', partition: 0, slot: 0, version: 1, counter_ids: [1], counter_values: [5], channels: 2, day: '2030-01-01' }],
      });
      await store.init();
      // Another instance's start: the column is there now.
      const again = new ClickHouseStatsStore({ url, tablePrefix });
      await again.init();
      await again.close();
      await store.write('usage', [{ appId: 'a', interval: T0 + 6000, topic: 'usage', partition: 0, slot: 0, version: 1, counters: { [Base.connectionsOpened]: 3 }, channels: 0, connections: 4 }], new Map());
      const [minute] = await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 + 59_999 });
      expect(minute.counters).toEqual({ [Base.inbound('rest', 'messages', 'count')]: 5, [Base.connectionsOpened]: 3 });
      expect([minute.channelMax, minute.connectionSamples, minute.connectionMax]).toEqual([2, 1, 4]);
    } finally {
      await store.close();
      for (const name of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
        await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + name)}`.text });
      }
      await client.close();
    }
  });
});
