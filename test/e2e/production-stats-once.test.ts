// Each stats row written once (issue 23, item 5): two production instances share the stats topics'
// partitions for writing stats samples and rollups to ClickHouse (a consumer group per topic,
// projections/projection-set.ts), while every read an instance answers reflects that instance's
// own writes (the store's checkpoints say when the instance holding a partition wrote them:
// projections/stats/stats-reader.ts) and what the other instance writes reaches its stats cache.
// Sample and rollup rows received are counted before any merge, by materialized views (Log tables:
// they never merge) that see every insert into the samples and rollups tables. The minute, hour, day
// and month rollups of an app whose traffic spans partitions written by both instances are written
// by one instance alone, the roller (projections/stats/stats-reader.ts).
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import pino from 'pino';
import type { AddressInfo } from 'node:net';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown, type ProductionInfra, clickhouse } from '../helpers/production.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import type { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEYS = { one: 'statsone.k1:stats-once-secret-one', two: 'statstwo.k1:stats-once-secret-two' };
const ROUNDS = 20;
const PER_ROUND = 25;
const CHANNELS = 16;
const { services, until } = productionTeardown();

describeWithInfra('production mode: each stats row written by one instance', 'Kafka and ClickHouse', infra, (found) => {
  it('two instances: messages published through each are in the stats each answers at once, in the other\'s soon after, and each sample row version reaches ClickHouse once, and one instance alone writes the rollups', async () => {
    const tag = randomBytes(3).toString('hex');
    const isolation = { topicPrefix: `sonce-${tag}-`, tablePrefix: `sonce_${tag}_` };
    const apps = [
      { appId: 'statsone', keys: [{ key: KEYS.one }] },
      { appId: 'statstwo', keys: [{ key: KEYS.two }] },
    ];
    const start = async (instanceId: string): Promise<{ service: Service; port: number; store: ClickHouseStatsStore }> => {
      const { config } = productionConfig(found, apps, {
        INSTANCE_ID: instanceId,
        KAFKA_SESSION_TIMEOUT_MS: '6000',
        // Held rows are never read again for their age within this test: what another instance
        // writes reaches a cache only by the stats reader dropping it.
        STATS_CACHE_MAX_AGE_MS: '3600000',
      });
      const logger = pino({ level: 'silent' });
      const adapters = await productionAdapters(config, logger, isolation);
      const service = await startService(config, logger, adapters);
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, port: (service.app.server.address() as AddressInfo).port, store: adapters.statsStore as ClickHouseStatsStore };
    };
    const first = await start('sonce-a');
    const samples = `${isolation.tablePrefix}stats_samples`;
    await clickhouse(found, `CREATE MATERIALIZED VIEW ${isolation.tablePrefix}samples_received ENGINE = Log AS SELECT app_id, sample_start, topic, partition, slot, version FROM ${samples}`);
    const rollups = `${isolation.tablePrefix}stats_rollups`;
    await clickhouse(found, `CREATE MATERIALIZED VIEW ${isolation.tablePrefix}rollups_received ENGINE = Log AS SELECT app_id, unit, bucket_start, version FROM ${rollups}`);
    const [a, b] = [first, await start('sonce-b')];

    // Each stats topic's writers' group has handed each instance some of its 4 partitions, all of them once.
    const topics = ['messages', 'presence', 'usage', 'connections'];
    const held = (topic: string): number[][] => [a, b].map(({ service }) => service.runner.partitionsOf(`stats-writer-${topic}`));
    await until('the stats writers sharing the partitions of every topic', () =>
      topics.every((topic) => held(topic).every((p) => p.length > 0) && held(topic).flat().sort().join() === '0,1,2,3'), 60_000);

    const publish = async (port: number, key: string, channel: string, count: number): Promise<void> => {
      const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
        method: 'POST',
        headers: { authorization: basic(key), 'content-type': 'application/json' },
        body: JSON.stringify(Array.from({ length: count }, (_, m) => ({ name: `m${m}`, data: 'x' }))),
      });
      expect(res.status, await res.clone().text()).toBe(201);
    };
    const since = Date.now() - 60_000;
    const counted = async (port: number, key: string): Promise<number> => {
      const res = await fetch(`http://127.0.0.1:${port}/stats?unit=minute&direction=forwards&limit=100&start=${since}`, { headers: { authorization: basic(key), 'x-ably-version': '6' } });
      expect(res.status, await res.clone().text()).toBe(200);
      const records = (await res.json()) as { entries?: Record<string, number> }[];
      return records.reduce((n, r) => n + (r.entries?.['messages.inbound.rest.messages.count'] ?? 0), 0);
    };
    // Each instance reads the other's app first: those pages are held in its cache when the other writes.
    expect(await counted(a.port, KEYS.two)).toBe(0);
    expect(await counted(b.port, KEYS.one)).toBe(0);

    // App one published through a, app two through b, over channels of every partition; after each
    // publish, the publishing instance's stats include it.
    let sent = 0;
    const lagging: number[] = [];
    const rolledBefore = [a.store.rollupStatements, b.store.rollupStatements];
    const standInsBefore = [a, b].map(({ service }) => service.statsReader!.standIns);
    for (let round = 0; round < ROUNDS; round++) {
      const channel = `ch-${tag}-${round % CHANNELS}`;
      await Promise.all([publish(a.port, KEYS.one, channel, PER_ROUND), publish(b.port, KEYS.two, channel, PER_ROUND)]);
      sent += PER_ROUND;
      const [one, two] = await Promise.all([counted(a.port, KEYS.one), counted(b.port, KEYS.two)]);
      expect(one, `round ${round}: app one's stats on the instance that published`).toBe(sent);
      expect(two, `round ${round}: app two's stats on the instance that published`).toBe(sent);
      lagging.push(sent - (await counted(b.port, KEYS.one)));
    }
    // The other instance's reads come to the same counts (its held pages were dropped as the rows changed).
    await until('each instance counting the other app\'s messages', async () => (await counted(a.port, KEYS.two)) === sent && (await counted(b.port, KEYS.one)) === sent);

    await Promise.all([a.service.stats.flush(), b.service.stats.flush()]);
    const received = Number(await clickhouse(found, `SELECT count() FROM ${isolation.tablePrefix}samples_received`));
    const repeated = Number(
      await clickhouse(found, `SELECT count() FROM (SELECT count() AS n FROM ${isolation.tablePrefix}samples_received GROUP BY app_id, sample_start, topic, partition, slot, version HAVING n > 1)`),
    );
    const distinct = Number(await clickhouse(found, `SELECT uniqExact(app_id, sample_start, topic, partition, slot) FROM ${samples}`));
    const rollupsReceived = Number(await clickhouse(found, `SELECT count() FROM ${isolation.tablePrefix}rollups_received`));
    const rollupsDistinct = Number(await clickhouse(found, `SELECT uniqExact(app_id, unit, bucket_start) FROM ${rollups}`));
    // Rollup statements each instance ran while both published (the writers' groups settled before).
    const rolled = [a.store.rollupStatements - rolledBefore[0], b.store.rollupStatements - rolledBefore[1]];
    console.log(
      `two instances, ${2 * sent} messages: ClickHouse received ${received} sample rows for ${distinct} samples, ${repeated} row versions more than once; ` +
        `${rollupsReceived} rollup rows for ${rollupsDistinct} rollups, rollup statements by each instance ${rolled.join(' and ')} (reads that stood in ${[a, b].map(({ service }, i) => service.statsReader!.standIns - standInsBefore[i]).join(' and ')}); ` +
        `writers hold ${JSON.stringify(Object.fromEntries(topics.map((t) => [t, held(t)])))}; the other instance's count behind after each round: ${lagging.join(',')}`,
    );
    // Every instance writing every row would send each row version twice.
    expect(repeated).toBe(0);
    expect(distinct).toBeGreaterThan(0);
    // Each rollup is written by one instance: every writer rolling up the apps of its partitions
    // would have both instances write app one's and app two's minutes, hours, days and months.
    // A read that waited past half its wait for its rows stands in (projections/stats/stats-reader.ts:
    // reflect) and rolls up what it wrote itself, roller or not: on a loaded machine a
    // non-roller's read may; every other rollup statement is the roller's.
    const standIns = [a, b].map(({ service }, i) => service.statsReader!.standIns - standInsBefore[i]);
    const why = `rollup statements by each instance: ${rolled.join(', ')}; reads that stood in: ${standIns.join(', ')}`;
    expect(rolled.filter((n, i) => n > 0 && standIns[i] === 0).length, why).toBeLessThanOrEqual(1);
    expect(Math.max(...rolled), why).toBeGreaterThan(0);
    expect(rollupsDistinct).toBeGreaterThan(0);
    for (const s of services.splice(0)) await s.close();
  }, 240_000);
});
