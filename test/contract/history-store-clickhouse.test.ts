import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ClickHouseHistoryStore } from '../../projections/history/clickhouse-history-store.js';
import type { HistoryStore } from '../../projections/history/history-store.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlString, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';
import { historyStoreContract } from './history-store.contract.js';

const clickhouse = await findClickHouse();

describeWithInfra('ClickHouseHistoryStore', 'ClickHouse', clickhouse, ({ url }) => {
  historyStoreContract('clickhouse', async () => {
    // Tables of its own for every test (STYLE: unique names, no global resets).
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const opened: HistoryStore[] = [];
    return {
      open: async (consumer) => {
        const store = new ClickHouseHistoryStore({ url, tablePrefix, consumer });
        opened.push(store);
        return store;
      },
      cleanup: async () => {
        for (const store of opened) await store.close();
        const client = createClickHouseClient({ url });
        for (const table of ['history_messages', 'projection_state']) {
          await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + table)}`.text });
        }
        await client.close();
      },
    };
  });

  describe('SQL literals', () => {
    it('come back from the server exactly as escaped', async () => {
      const client = createClickHouseClient({ url });
      try {
        const samples = ["it's", 'back\\slash\\', 'nul\0byte', 'new\nline\r\ttab', '\x01\x1f\x7f', '日本語 😀 é', "x' OR '1'='1", "\\'; DROP TABLE t; --", ''];
        for (const s of samples) {
          const result = await client.query({ query: sql`SELECT ${sqlString(s)} AS s, hex(s) AS h`.text, format: 'JSONEachRow' });
          const [row] = await result.json<{ s: string; h: string }>();
          expect(row.h).toBe(Buffer.from(s, 'utf8').toString('hex').toUpperCase());
          expect(row.s).toBe(s);
        }
      } finally {
        await client.close();
      }
    });
  });
});
