// Issue 22, item 6 (ARCHITECTURE, Retention: two minutes of every channel's history in memory):
// after a graceful restart in production mode, a channel without persistence serves every message
// published within the window, rebuilt from Kafka; the persisted channel keeps its history too.
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
const KEY = 'restartapp.k1:restart-secret-restart-secret';

describeWithInfra('production mode: the in-memory history after a graceful restart', 'Kafka and ClickHouse', infra, (found) => {
  it('GET /channels/pf/messages after a restart has every message published within the window', async () => {
    const { config } = productionConfig(found, [{ appId: 'restartapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }], { INSTANCE_ID: 'restart-1' });
    const isolation = { topicPrefix: `e2e-${randomBytes(4).toString('hex')}-`, tablePrefix: `e2e_${randomBytes(4).toString('hex')}_` };
    const start = async (): Promise<Service> => {
      const logger = pino({ level: 'silent' });
      return startService(config, logger, await productionAdapters(config, logger, isolation));
    };
    const auth = basic(KEY);
    let service = await start();
    const history = async (channel: string): Promise<string[]> => {
      const res = await service.app.inject({ url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards&limit=1000`, headers: { authorization: auth } });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { name: string }[]).map((m) => m.name);
    };
    const published = new Map<string, string[]>([['pf', []], ['persisted:pf', []]]);
    try {
      // A few seconds of publishes, some with ids of their own (the SDK's idempotent publishing).
      for (let i = 0; i < 150; i++) {
        for (const [channel, names] of published) {
          const name = `m${i}`;
          const res = await service.app.inject({
            method: 'POST',
            url: `/channels/${encodeURIComponent(channel)}/messages`,
            headers: { authorization: auth, 'content-type': 'application/json' },
            payload: i % 2 === 0 ? { name } : { name, id: `${channel}-${i}:0` },
          });
          expect(res.statusCode, res.body).toBe(201);
          names.push(name);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      // Visible once the projection has applied them (a bounded delay, not read-your-writes here).
      for (const [channel, names] of published) {
        const deadline = Date.now() + 10_000;
        while ((await history(channel)).length < names.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        expect(await history(channel), channel).toEqual(names);
      }

      await service.close();
      const startedAt = Date.now();
      service = await start();
      console.log(`production restart: start took ${Date.now() - startedAt} ms`);
      for (const [channel, names] of published) expect(await history(channel), channel).toEqual(names);
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
