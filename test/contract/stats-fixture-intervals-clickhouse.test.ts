// Sandbox stats fixtures of intervals no store holds (review finding): ClickHouse refused a sample
// of 1950 (a negative sample_start into UInt64), and the stats projection retried that write for
// ever, so no app's usage was written again, and a restart read the same record. The route refuses
// such fixtures now (test/http/stats.test.ts); one already in a log is skipped by the projection.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Base } from '../../src/domain/stats-sample.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import type { LogEvent } from '../../src/domain/events.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';

const clickhouse = await findClickHouse();
const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);

describeWithInfra('stats fixtures of intervals no store holds', 'ClickHouse', clickhouse, ({ url }) => {
  it.each([
    ['1950-01-01', Date.UTC(1950, 0, 1)],
    ['2162-12-20', Date.UTC(2162, 11, 20)],
  ])('a fixture of %s in the log is skipped: the usage after it is written to ClickHouse', async (_, intervalStart) => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const store = new ClickHouseStatsStore({ url, tablePrefix });
    const errors: unknown[] = [];
    const projection = new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9, onFlushError: (err) => errors.push(err) });
    try {
      await projection.start(Topics.usage);
      const events: LogEvent[] = [
        { type: 'stats.fixture', appId: 'app', intervalStart, counters: { [Base.inbound('rest', 'messages', 'count')]: 5 } },
        { type: 'stats.fixture', appId: 'app', intervalStart: T0, counters: { [Base.inbound('rest', 'messages', 'count')]: 7 } },
      ];
      projection.apply(events.map((event, offset): LogRecord => ({ topic: Topics.usage, partition: 0, offset, key: 'app', value: encodeEvent(event), timestamp: T0 })));
      await projection.flush();
      expect(errors).toEqual([]);
      const [bucket] = await store.query({ appId: 'app', unit: 'month', start: 0, end: Date.UTC(2200, 0, 1) });
      expect(bucket.counters[Base.inbound('rest', 'messages', 'count')]).toBe(7);
      expect(bucket.start).toBe(Date.UTC(2030, 0, 1));
    } finally {
      await projection.close().catch(() => undefined);
      await store.close();
      const client = createClickHouseClient({ url });
      for (const table of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
        await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + table)}`.text });
      }
      await client.close();
    }
  });
});
