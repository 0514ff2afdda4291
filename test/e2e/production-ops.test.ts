// Production mode, issue 13: against the local mock broker the service runs without any switch
// (KAFKA_IDEMPOTENT=auto, the default, turns the idempotent producer off where the cluster cannot
// serve it, on where it can), and /ready and /metrics see the Kafka log. Issue 23 item 4: every
// consumer's lag is in /ready and /metrics, the connection events' (a reader of the runner's
// `connections` feed) included.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { expect, it } from 'vitest';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type Log } from '../../src/log/port.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, startProductionInstance } from '../helpers/production.js';
import { until } from '../faults/publish-load.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'opsapp.k1:ops-secret-ops-secret';

describeWithInfra('production mode without switches (KAFKA_IDEMPOTENT=auto)', 'Kafka and ClickHouse', infra, (found) => {
  it('publishes (201), answers /ready 200 and counts Kafka appends in /metrics', async () => {
    const isolation = { topicPrefix: `ops-${randomBytes(4).toString('hex')}-`, tablePrefix: `ops_${randomBytes(4).toString('hex')}_` };
    const { service } = await startProductionInstance(found, { appId: 'opsapp', key: KEY, instanceId: 'ops-1', isolation, env: { KAFKA_IDEMPOTENT: '' } });
    try {
      expect(service.config.kafkaIdempotent).toBe('auto');
      const res = await service.app.inject({
        method: 'POST',
        url: '/channels/ops/messages',
        headers: { authorization: basic(KEY), 'content-type': 'application/json' },
        payload: { name: 'no-switch' },
      });
      expect(res.statusCode).toBe(201);
      // Ready once its consumers read the log (their groups joined: some 3 s after the start).
      await until('GET /ready answers 200', async () => (await service.app.inject({ method: 'GET', url: '/ready' })).statusCode === 200, 30_000, 100);
      const ready = await service.app.inject({ method: 'GET', url: '/ready' });
      expect(ready.statusCode, ready.body).toBe(200);
      expect(ready.json().checks.find((c: { name: string }) => c.name === 'log').detail).toBe('kafka log writable');
      const metrics = (await service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toMatch(/^cm_log_append_records_count\{topic="messages"\} [1-9]/m);
      expect(metrics).toMatch(/^cm_log_writable 1$/m);
    } finally {
      await service.close();
    }
  });
});

/** One sample of a metric line (`name{labels} value`), or undefined. */
const sample = (text: string, name: string, labels: Record<string, string>): number | undefined => {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
};

describeWithInfra('production mode: the connection events consumer in /ready and /metrics', 'Kafka and ClickHouse', infra, (found) => {
  it('the connection events read the connections feed (no consumer of their own); /ready fails naming connection-events while the feed is held, /metrics gives its lag, and both recover once it is released', { timeout: 60_000 }, async () => {
    const tag = randomBytes(4).toString('hex');
    const isolation = { topicPrefix: `lag-${tag}-`, tablePrefix: `lag_${tag}_` };
    const { config } = productionConfig(found, [{ appId: 'lagapp', keys: [{ key: 'lagapp.k1:lag-secret-lag-secret' }] }], { INSTANCE_ID: `lag-${tag}`, READY_MAX_LAG: '2' });
    const logger = pino({ level: 'silent' });
    const adapters = await productionAdapters(config, logger, isolation);
    // The projections' consumer of the connections topic (the feed the connection events read
    // through: projections/runner.ts) waits at a gate while it is closed, as behind a slow projection.
    let gate: Promise<void> | undefined;
    let release: () => void = () => {};
    const real = adapters.log;
    const consumed: string[] = [];
    const log = new Proxy(real, {
      get: (target, property) =>
        property === 'consume'
          ? (options: Parameters<Log['consume']>[0]) => {
              consumed.push(`${options.topic}: ${options.consumer}`);
              return target.consume({
                ...options,
                handle: async (records) => {
                  if (options.consumer.startsWith('connections-feed') && gate) await gate;
                  return options.handle(records);
                },
              });
            }
          : Reflect.get(target, property, target),
    });
    const service = await startService(config, logger, { ...adapters, log });
    const inject = (url: string) => service.app.inject({ method: 'GET', url });
    try {
      // The connection events read the projections' feed (runner.join), not a consumer of their own:
      // the topic's consumers are the feed and its stats writer (a consumer group shared among the instances).
      const ofConnections = consumed.filter((c) => c.startsWith(`${Topics.connections}: `));
      expect(ofConnections, ofConnections.join(', ')).toHaveLength(2);
      expect(ofConnections).toContain(`${Topics.connections}: stats-writer-connections`);
      expect(ofConnections.some((c) => c.startsWith(`${Topics.connections}: connections-feed-lag-${tag}-`)), ofConnections.join(', ')).toBe(true);
      await until('GET /ready answers 200 after the start', async () => (await inject('/ready')).statusCode === 200, 30_000, 50);
      gate = new Promise((r) => (release = r));
      const detaches = [...Array(5).keys()].map((i) => ({ key: `lagapp:gone-${i}`, build: () => encodeEvent({ type: 'channel.detached', appId: 'lagapp', channel: `gone-${i}`, connectionId: 'nobody' }) }));
      const positions = await service.batcher.append(Topics.connections, detaches);
      expect([...positions.values()].length).toBeGreaterThan(0);
      // Its lag is counted once the held batch's end is seen.
      let ready = await inject('/ready');
      await until('GET /ready names connection-events behind', async () => {
        ready = await inject('/ready');
        return ready.statusCode === 503 && /connection-events \d+ records behind/.test(ready.body);
      }, 30_000, 50);
      const consumers = (ready.json() as { checks: { name: string; ok: boolean; detail: string }[] }).checks.find((c) => c.name === 'consumers')!;
      expect(consumers.ok).toBe(false);
      expect(consumers.detail).toMatch(/connection-events [3-9] records behind/);
      const metrics = (await inject('/metrics')).body;
      expect(sample(metrics, 'cm_consumer_lag_records', { consumer: 'connection-events' })).toBeGreaterThan(2);
      gate = undefined;
      release();
      await until('GET /ready answers 200 once the feed is released', async () => (await inject('/ready')).statusCode === 200, 30_000, 50);
      await until('connection-events caught up in /metrics', async () => sample((await inject('/metrics')).body, 'cm_consumer_lag_records', { consumer: 'connection-events' }) === 0, 30_000, 50);
    } finally {
      release();
      await service.close();
    }
  });
});
