import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';
import { statsStoreContract } from './stats-store.contract.js';
import { Base } from '../../projections/stats/stats-sample.js';
import { T0 } from '../helpers/stats-log.js';

const clickhouse = await findClickHouse();

describeWithInfra('ClickHouseStatsStore', 'ClickHouse', clickhouse, ({ url }) => {
  statsStoreContract(
    'clickhouse',
    async () => {
      // Tables of their own for every store (STYLE: unique names, no global resets).
      const prefixes: string[] = [];
      const opened: StatsStore[] = [];
      return {
        open: async () => {
          const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
          prefixes.push(tablePrefix);
          const store = new ClickHouseStatsStore({ url, tablePrefix });
          opened.push(store);
          return store;
        },
        cleanup: async () => {
          for (const s of opened) await s.close();
          const client = createClickHouseClient({ url });
          for (const prefix of prefixes) {
            for (const table of ['stats_samples', 'stats_checkpoints']) {
              await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + table)}`.text });
            }
          }
          await client.close();
        },
      };
    },
    { replayRuns: 2 },
  );

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
      await store.init(); // again: the column is there now
      await store.write('usage', [{ appId: 'a', interval: T0 + 6000, topic: 'usage', partition: 0, slot: 0, version: 1, counters: { [Base.connectionsOpened]: 3 }, channels: 0, connections: 4 }], new Map());
      const [minute] = await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 + 59_999 });
      expect(minute.counters).toEqual({ [Base.inbound('rest', 'messages', 'count')]: 5, [Base.connectionsOpened]: 3 });
      expect([minute.channelMax, minute.connectionSamples, minute.connectionMax]).toEqual([2, 1, 4]);
    } finally {
      await store.close();
      for (const name of ['stats_samples', 'stats_checkpoints']) {
        await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + name)}`.text });
      }
      await client.close();
    }
  });
});
