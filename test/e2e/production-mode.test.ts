import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import pino from 'pino';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig } from '../helpers/production.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();

const KEY = 'e2eapp.k1:e2e-secret-e2e-secret';

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describeWithInfra('production mode: HTTP -> Kafka -> projections -> ClickHouse -> HTTP', 'Kafka and ClickHouse', infra, (found) => {
  it('publishes through Kafka, serves persisted history from ClickHouse after the in-memory window, survives a restart, and counts stats', async () => {
    const { config } = productionConfig(found, [{ appId: 'e2eapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }], { HISTORY_TAIL_MS: '1000' });
    const isolation = { topicPrefix: `e2e-${randomBytes(4).toString('hex')}-`, tablePrefix: `e2e_${randomBytes(4).toString('hex')}_` };
    const start = async (): Promise<Service> => {
      const logger = pino({ level: 'silent' });
      return startService(config, logger, await productionAdapters(config, logger, isolation));
    };
    let service = await start();
    const auth = basic(KEY);
    const channel = 'persisted:e2e';
    try {
      for (let i = 0; i < 5; i++) {
        const res = await service.app.inject({
          method: 'POST',
          url: `/channels/${encodeURIComponent(channel)}/messages`,
          headers: { authorization: auth, 'content-type': 'application/json' },
          payload: { name: `m${i}`, data: `payload-${i}` },
        });
        expect(res.statusCode).toBe(201);
      }
      const history = async () =>
        (await service.app.inject({ url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards`, headers: { authorization: auth } })).json() as { name: string }[];
      await until('history in memory', async () => ((await history()).length === 5 ? true : undefined));

      // Past the in-memory window, once the instance's writer has stored them (the reader keeps
      // what the store does not hold yet), history can only come from ClickHouse.
      const client = createClickHouseClient({ url: found.clickhouseUrl });
      const storedRows = async (): Promise<number> =>
        Number((await (await client.query({ query: sql`SELECT count() AS n FROM ${sqlTable('default', `${isolation.tablePrefix}history_messages`)}`.text, format: 'JSONEachRow' })).json<{ n: string }>())[0].n);
      await until('the rows in ClickHouse', async () => ((await storedRows()) === 5 ? true : undefined));
      await new Promise((r) => setTimeout(r, 1100));
      await service.history.followStore();
      service.history.evict();
      expect(service.history.tail.count).toBe(0);
      expect((await history()).map((m) => m.name)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
      expect(await storedRows()).toBe(5);

      // Stats rolled up in ClickHouse.
      await service.usage.flush();
      const stats = await until('stats', async () => {
        await service.stats.flush();
        const res = await service.app.inject({ url: '/stats?unit=hour', headers: { authorization: auth, 'x-ably-version': '6' } });
        const entries = (res.json() as { entries: Record<string, number> }[])[0]?.entries;
        return entries?.['messages.inbound.rest.messages.count'] === 5 ? entries : undefined;
      });
      // The two history reads above (5 messages each) count too: outbound, and retrieved from a
      // persisted channel (persisted = 5 stored + 10 retrieved; all = 5 in + 10 out + 5 stored).
      // GET /stats includes this instance's own usage reports (README: Consistency of reads).
      expect(stats['messages.outbound.rest.messages.count']).toBe(10);
      expect(stats['messages.persisted.messages.count']).toBe(15);
      expect(stats['messages.all.messages.count']).toBe(20);

      // A restart: a new instance rebuilds from Kafka and ClickHouse.
      await service.close();
      service = await start();
      expect((await history()).map((m) => m.name)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
      await client.close();
    } finally {
      await service.close();
      const client = createClickHouseClient({ url: found.clickhouseUrl });
      for (const table of ['history_messages', 'projection_state', 'presence_history_messages', 'presence_projection_state', 'stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
        await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', isolation.tablePrefix + table)}`.text });
      }
      await client.close();
    }
  }, 180_000);
});
