// The rebuild on Kafka and ClickHouse: from offset 0 of the topics a production instance wrote,
// beside that instance (its reads go on), into the instance's tables and into empty ones alike.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { expect, it } from 'vitest';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { rebuild, type RebuildProgress } from '../../src/cli/rebuild.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra } from '../helpers/infra.js';
import { clickhouse, findProductionInfra, productionConfig } from '../helpers/production.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'rbapp.k1:rebuild-secret-rebuild';

describeWithInfra('npm run rebuild on Kafka and ClickHouse', 'Kafka and ClickHouse', infra, (found) => {
  it('rebuilds stats from offset 0 of the Kafka topics beside a running instance, to the numbers it serves, into its tables or empty ones', async () => {
    const { config } = productionConfig(found, [{ appId: 'rbapp', keys: [{ key: KEY }] }]);
    const logger = pino({ level: 'silent' });
    const topicPrefix = `rb-${randomBytes(4).toString('hex')}-`;
    const tablePrefix = `rb_${randomBytes(4).toString('hex')}_`;
    const emptyPrefix = `rb_${randomBytes(4).toString('hex')}_`;
    const service = await startService(config, logger, await productionAdapters(config, logger, { topicPrefix, tablePrefix }));
    const auth = basic(KEY);
    const stats = async (): Promise<{ status: number; body: { intervalId: string; inbound?: { all?: { messages?: { count?: number } } } }[] }> => {
      const res = await service.app.inject({ url: '/stats?unit=hour', headers: { authorization: auth } });
      return { status: res.statusCode, body: res.json() };
    };
    try {
      for (let i = 0; i < 25; i++) {
        const res = await service.app.inject({
          method: 'POST',
          url: `/channels/rebuild-${i % 5}/messages`,
          headers: { authorization: auth, 'content-type': 'application/json' },
          payload: { name: 'order', data: `order ${i}` },
        });
        expect(res.statusCode).toBe(201);
      }
      const deadline = Date.now() + 30_000;
      while ((await stats()).body.reduce((n, r) => n + (r.inbound?.all?.messages?.count ?? 0), 0) < 25) {
        if (Date.now() > deadline) throw new Error('stats never counted the publishes');
        await service.stats.flush();
        await new Promise((r) => setTimeout(r, 200));
      }
      const before = (await stats()).body.map((r) => ({ intervalId: r.intervalId, inbound: r.inbound }));

      // Into the instance's own tables, while it serves reads.
      const beside = await productionAdapters(config, logger, { topicPrefix, tablePrefix, consumerPrefix: 'rebuild-' });
      const progress: RebuildProgress[] = [];
      let reading = true;
      const reads = (async () => {
        let n = 0;
        while (reading) {
          expect((await stats()).status).toBe(200);
          n++;
          await new Promise((r) => setTimeout(r, 20));
        }
        return n;
      })();
      const read = await rebuild('stats', { config, adapters: beside }, (p) => progress.push(p)).finally(() => (reading = false));
      expect(await reads).toBeGreaterThan(0);
      expect(read).toBeGreaterThanOrEqual(25);
      expect(progress[progress.length - 1]).toEqual({ done: read, total: read });
      // History too, into the instance's tables: its rows, and no checkpoint row of the rebuild's
      // left behind (each run used to leave one more under its consumer name).
      expect(await rebuild('history', { config, adapters: beside })).toBeGreaterThanOrEqual(25);
      expect(await rebuild('history', { config, adapters: beside })).toBeGreaterThanOrEqual(25);
      const stateRows = await clickhouse(found, `SELECT consumer FROM ${tablePrefix}projection_state WHERE startsWith(consumer, 'rebuild-') FORMAT JSONEachRow`);
      expect(stateRows).toBe('');
      const q = { appId: 'rbapp', unit: 'hour' as const, start: 0, end: Date.now() + 60_000 };
      const buckets = await beside.statsStore.query(q);
      expect(buckets.length).toBeGreaterThan(0);
      await beside.log.close();
      await beside.close?.();
      expect((await stats()).body.map((r) => ({ intervalId: r.intervalId, inbound: r.inbound }))).toEqual(before);

      // Into empty tables: the same buckets from the log alone.
      const fresh = await productionAdapters(config, logger, { topicPrefix, tablePrefix: emptyPrefix, consumerPrefix: 'rebuild-' });
      await rebuild('stats', { config, adapters: fresh });
      // (API requests keep coming in: the reads above are counted, so only the publishes' figures are compared.)
      const published = (b: (typeof buckets)[number]) => [b.start, b.counters['messages.inbound.rest.messages.count'], b.counters['messages.inbound.rest.messages.data'], b.channelMax];
      expect((await fresh.statsStore.query(q)).map(published)).toEqual(buckets.map(published));
      expect(buckets.reduce((n, b) => n + b.counters['messages.inbound.rest.messages.count'], 0)).toBe(25);
      await fresh.log.close();
      await fresh.close?.();
    } finally {
      await service.close();
      const client = createClickHouseClient({ url: found.clickhouseUrl });
      for (const prefix of [tablePrefix, emptyPrefix]) {
        for (const table of ['history_messages', 'projection_state', 'presence_history_messages', 'presence_projection_state', 'stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
          await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + table)}`.text });
        }
      }
      await client.close();
    }
  }, 120_000);

  it('the rebuild\'s log, read only, produces nothing: no KAFKA_IDEMPOTENT=auto warning about its producer (the service\'s log still warns on a broker that names no controller)', async () => {
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(JSON.parse(l) as { level: number; msg: string }) });
    const { config } = productionConfig(found, [{ appId: 'rbapp', keys: [{ key: KEY }] }], { KAFKA_IDEMPOTENT: 'auto' });
    const topicPrefix = `rb-${randomBytes(4).toString('hex')}-`;
    const readOnly = await productionAdapters(config, logger, { topicPrefix, tablePrefix: 'rb_ro_', consumerPrefix: 'rebuild-', readOnlyLog: true });
    await readOnly.log.close();
    await readOnly.close?.();
    expect(lines.filter((l) => l.msg.includes('KAFKA_IDEMPOTENT'))).toEqual([]);
    if (!found.mock) return;
    const service = await productionAdapters(config, logger, { topicPrefix, tablePrefix: 'rb_ro_' });
    await service.log.close();
    await service.close?.();
    expect(lines.filter((l) => l.msg.includes('KAFKA_IDEMPOTENT'))).toHaveLength(1);
  }, 60_000);
});
