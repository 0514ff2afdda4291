import { randomBytes } from 'node:crypto';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';
import { statsStoreContract } from './stats-store.contract.js';

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
});
