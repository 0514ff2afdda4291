// A graceful stop writes its shared writers' rows and checkpoints before they leave their consumer
// groups (projections/runner.ts stop, `lastWrites`; ProjectionSet.sealWriters), never after: once
// the next holder of a partition has written further, a later checkpoint write of the stopping
// instance moved the partition back, and the next hand-over wrote its records again. Two instances
// share the messages writers' group; the stopping one writes only at its stop (a long flush
// interval), and any history write it makes after its messages writers' consumer stopped is held
// until the other instance, handed its partitions, has written further (a slow store, made certain).
// History and the stats of messages alike. Asserted on the stores' checkpoints and on the positions, never on time. Kafka + ClickHouse only
// (the embedded mode has one process, no shared writers); required under REQUIRE_INFRA=1.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown } from '../helpers/production.js';
import { basic } from '../helpers/service.js';
import { startService, type Adapters, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { Topics, type Checkpoint } from '../../src/log/port.js';

const infra = await findProductionInfra();
const KEY = 'stopapp.k1:stop-secret-stop-secret';
const CHANNELS = 20;
const { services, until } = productionTeardown();

describeWithInfra('production mode: a graceful stop and the shared writers', 'Kafka and ClickHouse', infra, (found) => {
  it("writes the stopping instance's history rows and checkpoints before its writers leave their group: the next holder's later checkpoints stay", async () => {
    const tag = randomBytes(3).toString('hex');
    const isolation = { topicPrefix: `stopw-${tag}-`, tablePrefix: `stopw_${tag}_` };
    const start = async (instanceId: string, tune: (adapters: Adapters) => void = () => undefined): Promise<{ service: Service; port: number; adapters: Adapters }> => {
      const { config } = productionConfig(found, [{ appId: 'stopapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }], {
        INSTANCE_ID: instanceId,
        // The mock broker ends a rebalance when the session timeout has passed: the smallest it takes.
        KAFKA_SESSION_TIMEOUT_MS: '6000',
        SHUTDOWN_TIMEOUT_MS: '60000',
      });
      const logger = pino({ level: 'silent' });
      const adapters = await productionAdapters(config, logger, isolation);
      tune(adapters);
      const service = await startService(config, logger, adapters);
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, port: (service.app.server.address() as AddressInfo).port, adapters };
    };

    // The stopping instance: writes history only when it must (its stop), and its history writes
    // once its messages writers' consumer stopped wait for `release` (at most 30 s).
    let writersLeft = false;
    const lateWrites: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const stopping = await start('stopw-a', (adapters) => {
      adapters.projectionFlushMs = 60_000;
      const consume = adapters.log.consume.bind(adapters.log);
      adapters.log.consume = (options) => {
        const subscription = consume(options);
        if (options.shared && options.topic === Topics.messages) {
          const stop = subscription.stop.bind(subscription);
          subscription.stop = async () => {
            await stop();
            writersLeft = true;
          };
        }
        return subscription;
      };
      const held = async (store: string, checkpoint: Map<number, unknown>): Promise<void> => {
        if (!writersLeft || checkpoint.size === 0) return;
        lateWrites.push(`${store}: partitions ${[...checkpoint.keys()].join(',')}`);
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([released, new Promise((resolve) => (timer = setTimeout(resolve, 30_000)))]).finally(() => clearTimeout(timer));
      };
      const write = adapters.historyStore.write.bind(adapters.historyStore);
      adapters.historyStore.write = async (rows, checkpoint, marks) => {
        await held('history', checkpoint);
        return write(rows, checkpoint, marks);
      };
      const writeStats = adapters.statsStore.write.bind(adapters.statsStore);
      adapters.statsStore.write = async (topic, rows, checkpoint, options) => {
        if (topic === Topics.messages) await held('stats', checkpoint);
        return writeStats(topic, rows, checkpoint, options);
      };
    });
    const next = await start('stopw-b');
    const partitions = await next.service.log.partitions(Topics.messages);
    const held = (s: Service): number[] => s.runner.partitionsOf('history-writer');
    await until('the history writers sharing the partitions', () => held(stopping.service).length > 0 && held(next.service).length > 0 && held(stopping.service).length + held(next.service).length === partitions, 60_000);

    const channels = Array.from({ length: CHANNELS }, (_, c) => `persisted:stopw-${tag}-${c}`);
    const publish = async (port: number, round: string): Promise<Map<number, number>> => {
      for (const channel of channels) {
        const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
          method: 'POST',
          headers: { authorization: basic(KEY), 'content-type': 'application/json' },
          body: JSON.stringify([{ name: `${round}-1` }, { name: `${round}-2` }]),
        });
        expect(res.status, await res.clone().text()).toBe(201);
      }
      return next.service.log.endOffsets(Topics.messages);
    };
    const stored = (): Promise<Checkpoint> => next.adapters.historyStore.loadCheckpoint();
    const statsApplied = async (): Promise<Checkpoint> => new Map([...(await next.adapters.statsStore.loadCheckpoint(Topics.messages))].map(([p, c]) => [p, c.applied ?? c.from]));
    const covers = (checkpoint: Checkpoint, ends: Map<number, number>): boolean => [...ends].every(([p, end]) => (checkpoint.get(p) ?? 0) >= end);

    // Records on every partition; the stopping instance's writer holds its partitions' rows unwritten.
    const first = await publish(stopping.port, 'first');
    const hisPartitions = held(stopping.service);
    await until("the stopping instance's writer applying its partitions", () => {
      const at = stopping.service.runner.consumer('history-writer').positions();
      return hisPartitions.every((p) => (at.get(p) ?? 0) >= (first.get(p) ?? 0));
    });
    expect(hisPartitions.some((p) => (first.get(p) ?? 0) > 0)).toBe(true);

    // The stop; the other instance is handed every partition, and writes further.
    services.splice(services.indexOf(stopping.service), 1);
    const closing = stopping.service.close();
    await until('the other instance holding every partition', () => held(next.service).length === partitions, 60_000);
    const second = await publish(next.port, 'second');
    await until('the next holder writing the second round', async () => covers(await stored(), second) && covers(await statsApplied(), second), 30_000);
    release();
    await closing;

    // Every partition's checkpoint is still where the next holder wrote it: the stopping instance
    // wrote none after leaving (before: its close wrote the first round's ends over the second's).
    const after = await stored();
    expect(covers(after, second), `stored ${JSON.stringify([...after])}, written by the next holder up to ${JSON.stringify([...second])}`).toBe(true);
    const statsAfter = await statsApplied();
    expect(covers(statsAfter, second), `stats applied ${JSON.stringify([...statsAfter])}, written by the next holder up to ${JSON.stringify([...second])}`).toBe(true);
    expect(lateWrites).toEqual([]);
  }, 180_000);
});
