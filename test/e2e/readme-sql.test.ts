// The README's SQL ("Querying ClickHouse directly") runs as written, on the ClickHouse the tests
// have (18.16 in CI), against the tables and view the stores make, in a database of its own.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { ClickHouseHistoryStore } from '../../projections/history/clickhouse-history-store.js';
import { Base, SAMPLE_MS } from '../../src/domain/stats-sample.js';
import type { StatsRow } from '../../projections/stats/stats-store.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlIdentifier } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';

const clickhouse = await findClickHouse();

/** The statements of the README's SQL blocks in the section "Querying ClickHouse directly". */
function readmeQueries(): string[] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('### Querying ClickHouse directly');
  const section = readme.slice(start, readme.indexOf('\n## ', start));
  const blocks = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks
    .flatMap((b) => b.split(/;\s*$/m))
    .map((q) => q.split('\n').filter((line) => !line.trim().startsWith('--')).join('\n').trim())
    .filter((q) => q.length > 0);
}

describeWithInfra('README SQL', 'ClickHouse', clickhouse, ({ url }) => {
  it('every query of "Querying ClickHouse directly" runs on this ClickHouse and finds the data the stores wrote', async () => {
    const queries = readmeQueries();
    expect(queries.length).toBeGreaterThanOrEqual(5);
    const database = `readme_${randomBytes(4).toString('hex')}`;
    const stats = new ClickHouseStatsStore({ url, database });
    const history = new ClickHouseHistoryStore({ url, database });
    const admin = createClickHouseClient({ url });
    try {
      await stats.init();
      await history.init();
      // The README's app and channel, a few minutes ago (its windows are relative to now).
      const now = Date.now();
      const rows: StatsRow[] = [];
      for (let i = 1; i <= 20; i++) {
        const interval = Math.floor((now - i * SAMPLE_MS) / SAMPLE_MS) * SAMPLE_MS;
        rows.push({
          appId: 'myapp', interval, topic: 'usage', partition: 0, slot: 0, version: i,
          counters: { [Base.inbound('rest', 'messages', 'count')]: 2, [Base.inbound('rest', 'messages', 'data')]: 40, [Base.api('all', 'succeeded')]: 1, [Base.api('tokenRequests', 'succeeded')]: 1 },
          channels: 3, connections: 2,
        });
      }
      await stats.write('usage', rows, new Map());
      await history.write(
        [1, 2, 3].map((serial) => ({
          appId: 'myapp', channel: 'orders', serial, partition: 0, retentionHours: 24,
          message: { id: `m${serial}`, timestamp: now - 60_000 + serial, name: 'order', clientId: 'alice', data: `order ${serial}` },
        })),
        new Map([[0, 4]]),
        [],
      );
      const client = createClickHouseClient({ url: `${url.replace(/\/$/, '')}/${database}` });
      try {
        for (const query of queries) {
          const result = (await (await client.query({ query, format: 'JSONEachRow' })).json()) as Record<string, unknown>[];
          expect(result.length, query).toBeGreaterThan(0);
        }
      } finally {
        await client.close();
      }
    } finally {
      await stats.close();
      await history.close();
      await admin.command({ query: sql`DROP DATABASE IF EXISTS ${sqlIdentifier(database)}`.text });
      await admin.close();
    }
  });
});
