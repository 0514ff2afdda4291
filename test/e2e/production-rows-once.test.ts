// Each history row written once (issue 23): three production instances share the messages topic's
// partitions for writing history to ClickHouse (one consumer group, projections/projection-set.ts),
// so ClickHouse receives each persisted message once, not once per instance; and every instance
// still answers every read, from its own in-memory tail of every partition and from rows the
// others wrote. Rows received are counted before any merge, by a materialized view (a Log table:
// it never merges) that sees every insert into the history table. The stats rows of those messages
// are counted the same way: samples written by the instance holding their partition, rollups by
// one instance, the roller (projections/stats/stats-reader.ts).
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import pino from 'pino';
import type { AddressInfo } from 'node:net';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown, type ProductionInfra, clickhouse } from '../helpers/production.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { basic } from '../helpers/service.js';
import type { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { rolledTopic } from '../../projections/stats/stats-store.js';
import { Topics } from '../../src/log/port.js';

const infra = await findProductionInfra();
const KEY = 'onceapp.k1:once-secret-once-secret';
const MESSAGES = 10_000;
const CHANNELS = 20;
const PER_REQUEST = 100;
const { services, until } = productionTeardown();

describeWithInfra('production mode: each history row written by one instance', 'Kafka and ClickHouse', infra, (found) => {
  it(`three instances, ${MESSAGES.toLocaleString('en')} persisted messages: ClickHouse receives each row once, and every instance reads every channel's history`, async () => {
    const tag = randomBytes(3).toString('hex');
    const isolation = { topicPrefix: `once-${tag}-`, tablePrefix: `once_${tag}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number; store: ClickHouseStatsStore }> => {
      // A one-second memory tail: reads of older messages come from the rows the writers stored.
      const { config } = productionConfig(found, [{ appId: 'onceapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }], {
        INSTANCE_ID: instanceId,
        HISTORY_TAIL_MS: '1000',
        // The mock broker ends a rebalance when the session timeout has passed (real Kafka as soon
        // as the members rejoined): the smallest real brokers accept lets the group form sooner.
        KAFKA_SESSION_TIMEOUT_MS: '6000',
      });
      const logger = pino({ level: 'silent' });
      const adapters = await productionAdapters(config, logger, isolation);
      const service = await startService(config, logger, adapters);
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, port: (service.app.server.address() as AddressInfo).port, store: adapters.statsStore as ClickHouseStatsStore };
    };
    const first = await start('once-a');
    // Every insert into the history table, counted as it arrives (before ReplacingMergeTree merges).
    const table = `${isolation.tablePrefix}history_messages`;
    await clickhouse(found, `CREATE MATERIALIZED VIEW ${isolation.tablePrefix}rows_received ENGINE = Log AS SELECT app_id, channel, serial FROM ${table}`);
    const samples = `${isolation.tablePrefix}stats_samples`;
    const rollups = `${isolation.tablePrefix}stats_rollups`;
    await clickhouse(found, `CREATE MATERIALIZED VIEW ${isolation.tablePrefix}samples_received ENGINE = Log AS SELECT app_id, sample_start, topic, partition, slot, version FROM ${samples}`);
    await clickhouse(found, `CREATE MATERIALIZED VIEW ${isolation.tablePrefix}rollups_received ENGINE = Log AS SELECT app_id, unit, bucket_start, version FROM ${rollups}`);
    const instances = [first, await start('once-b'), await start('once-c')];

    // The writers' group has handed each instance some of the 4 partitions, and all of them once.
    const held = (): number[][] => instances.map(({ service }) => service.runner.partitionsOf('history-writer'));
    await until('the history writers sharing the partitions', () => {
      const all = held().flat().sort();
      return held().every((p) => p.length > 0) && all.join() === '0,1,2,3';
    }, 60_000);

    const rolledBefore = instances.map((i) => i.store.rollupStatements);
    const channels = Array.from({ length: CHANNELS }, (_, c) => `persisted:once-${tag}-${c}`);
    const post = async (port: number, channel: string, body: unknown): Promise<void> => {
      const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
        method: 'POST',
        headers: { authorization: basic(KEY), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status, await res.clone().text()).toBe(201);
    };
    // Round robin over instances and channels, a few requests at a time.
    const requests = Array.from({ length: MESSAGES / PER_REQUEST }, (_, r) => r);
    for (let i = 0; i < requests.length; i += 6) {
      await Promise.all(
        requests.slice(i, i + 6).map((r) =>
          post(instances[r % 3].port, channels[r % CHANNELS], Array.from({ length: PER_REQUEST }, (_, m) => ({ name: `r${r}-m${m}` }))),
        ),
      );
    }

    const distinct = async (): Promise<number> => Number(await clickhouse(found, `SELECT uniqExact(app_id, channel, serial) FROM ${table}`));
    await until(`${MESSAGES} distinct rows in ClickHouse`, async () => (await distinct()) >= MESSAGES, 60_000);
    const received = Number(await clickhouse(found, `SELECT count() FROM ${isolation.tablePrefix}rows_received`));
    // Stats: the rollups' checkpoint (the roller's) at the end of messages: every sample written and rolled up.
    const ends = await first.service.log.endOffsets(Topics.messages);
    await until('the stats of every message rolled up', async () => {
      const rolled = await first.store.loadCheckpoint(rolledTopic(Topics.messages));
      return [...ends].every(([p, end]) => (rolled.get(p)?.applied ?? rolled.get(p)?.from ?? 0) >= end);
    }, 60_000);
    const count = async (query: string): Promise<number> => Number(await clickhouse(found, query));
    const sampleRows = await count(`SELECT count() FROM ${isolation.tablePrefix}samples_received`);
    const sampleRepeats = await count(`SELECT count() FROM (SELECT count() AS n FROM ${isolation.tablePrefix}samples_received GROUP BY app_id, sample_start, topic, partition, slot, version HAVING n > 1)`);
    const samplesDistinct = await count(`SELECT uniqExact(app_id, sample_start, topic, partition, slot) FROM ${samples}`);
    const rollupRows = await count(`SELECT count() FROM ${isolation.tablePrefix}rollups_received`);
    const rollupsDistinct = await count(`SELECT uniqExact(app_id, unit, bucket_start) FROM ${rollups}`);
    const rolled = instances.map((i, n) => i.store.rollupStatements - rolledBefore[n]);
    console.log(
      `three instances, ${MESSAGES} persisted messages: ClickHouse received ${received} history rows (${(received / MESSAGES).toFixed(3)} per message; each instance writing every row: ${3 * MESSAGES}); writers hold partitions ${JSON.stringify(held())}; ` +
        `stats: ${sampleRows} sample rows for ${samplesDistinct} samples (${sampleRepeats} row versions more than once), ${rollupRows} rollup rows for ${rollupsDistinct} rollups, rollup statements by each instance ${rolled.join(', ')}`,
    );
    // Sample row versions once each (a writer writes its own partitions), rollups by one instance.
    expect(sampleRepeats).toBe(0);
    expect(rolled.filter((n) => n > 0), `rollup statements by each instance: ${rolled.join(', ')}`).toHaveLength(1);
    expect(await distinct()).toBe(MESSAGES);
    // Once each; a hand-over can repeat a few rows (the next holder starts at the stored checkpoint).
    expect(received).toBeLessThan(MESSAGES * 1.05);

    // Every instance answers every channel's whole history (older than its 1 s tail: from the
    // rows the three writers stored), with nothing missing and nothing twice.
    const perChannel = MESSAGES / CHANNELS;
    for (const { port } of instances) {
      for (const channel of [channels[0], channels[CHANNELS - 1]]) {
        const names: string[] = [];
        let url: string | undefined = `/channels/${encodeURIComponent(channel)}/messages?limit=1000&direction=forwards`;
        while (url) {
          const res: Response = await fetch(`http://127.0.0.1:${port}${url.replace(/^\.\//, `/channels/${encodeURIComponent(channel)}/`)}`, { headers: { authorization: basic(KEY) } });
          expect(res.status).toBe(200);
          names.push(...((await res.json()) as { name: string }[]).map((m) => m.name));
          url = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
        }
        expect(names.length, `${channel} on port ${port}`).toBe(perChannel);
        expect(new Set(names).size).toBe(perChannel);
      }
    }
    for (const s of services.splice(0)) await s.close();
  }, 240_000);
});
