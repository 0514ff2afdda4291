// The stats reader's roll-ups on ClickHouse (production mode: the writers write samples alone, one
// instance, the roller, recomputes the rollups and writes the rollups' checkpoint that every
// instance's reads wait on: projections/stats/stats-reader.ts). What the rollups' checkpoint says
// is rolled up must be in the rollups: a read of GET /stats that waited for it answers from them.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Base } from '../../src/domain/stats-sample.js';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { StatsReader } from '../../projections/stats/stats-reader.js';
import { CachedStatsStore } from '../../projections/stats/stats-cache.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';

const clickhouse = await findClickHouse();
const T0 = Date.UTC(2031, 4, 1, 12);
const COUNT = Base.inbound('rest', 'messages', 'count');
/** Publishes of one app on one channel, 10 ms apart: all in the 6-second interval at T0. */
const record = (offset: number): LogRecord => ({
  topic: 'messages',
  partition: 0,
  offset,
  key: 'app:c0',
  timestamp: T0 + offset * 10,
  value: encodeEvent({ type: 'messages.published', appId: 'app', channel: 'c0', transport: 'rest', messages: [{ id: `m${offset}`, timestamp: T0 + offset * 10, data: 'x' }] }),
});

describeWithInfra('the stats reader rolling up on ClickHouse', 'ClickHouse', clickhouse, ({ url }) => {
  it('a record the reader applied after the writers wrote the one before it, in the same interval: the rollups written for the first include it, so a read that waited for it counts it', async () => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const store = new ClickHouseStatsStore({ url, tablePrefix });
    const reader = new ClickHouseStatsStore({ url, tablePrefix });
    const writer = new StatsProjection({ store, isPersisted: () => false, rollUp: false, flushIntervalMs: 3_600_000 });
    try {
      await store.init();
      await reader.init();
      await writer.handOver('messages', [0]);
      // Read after the minute is over: the minute's rollup is the answer.
      const cache = new CachedStatsStore(reader, { maxRows: 10_000, maxAgeMs: 3_600_000, clock: { now: () => T0 + 3_600_000 } });
      const stats = new StatsReader({
        store: reader,
        invalidate: (touched) => cache.invalidate(touched),
        pollMs: 60_000,
        rollups: { writer: reader.rollupWriter, isRoller: () => true, everyMs: 3_600_000 },
      });
      cache.mayKeep = (appId) => stats.mayKeep(appId);
      await stats.start('messages');

      // The writer has record 0 written when the reader applies records 0 and 1 (record 1 is the
      // next publish, written at the writer's next flush): this instance appended record 0 and reads.
      writer.apply([record(0)]);
      await writer.flush();
      stats.apply([record(0), record(1)]);
      await stats.reflect([['messages', [{ partition: 0, offset: 0 }]]], 10_000);
      const minute = async (): Promise<number> =>
        (await cache.query({ appId: 'app', unit: 'minute', start: T0, end: T0 + 60_000 })).reduce((n, b) => n + (b.counters[COUNT] ?? 0), 0);
      expect(await minute()).toBe(1);

      writer.apply([record(1)]);
      await writer.flush();
      await stats.reflect([['messages', [{ partition: 0, offset: 1 }]]], 10_000);
      expect(await minute()).toBe(2);
      stats.close();
    } finally {
      await writer.close().catch(() => undefined);
      await store.close();
      await reader.close();
      const client = createClickHouseClient({ url });
      for (const name of ['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
        await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + name)}`.text });
      }
      await client.close();
    }
  }, 60_000);
});
