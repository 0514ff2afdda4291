// Production mode end to end for realtime usage statistics (issue 11, Stats): two service
// instances on one Kafka and one ClickHouse. Each instance reads its own open connections and
// counts what it sends; the stats (written into the same tables by the instance holding each partition)
// add the instances up: connections open on both show in one peak, each connection made counts
// once, and a message sent by each instance to its own subscriber counts once per subscriber; a
// channel attached on both instances, published to or not, is one channel opened.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import * as Ably from 'ably';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionTeardown, startProductionInstance } from '../helpers/production.js';

const infra = await findProductionInfra();

const KEY = 'rtstats.k1:rt-stats-secret-secret';
const { opened, services, until } = productionTeardown();

describeWithInfra('production mode: realtime usage statistics of two instances', 'Kafka and ClickHouse', infra, (found) => {
  it('open connections of both instances add up in one sample; connections made and messages sent count once each', async () => {
    const isolation = { topicPrefix: `rts-${randomBytes(4).toString('hex')}-`, tablePrefix: `rts_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      // The mock broker ends a rebalance when the session timeout has passed (real Kafka as soon as
      // the members rejoined): the smallest real brokers accept lets the stats writers' groups form sooner.
      const started = await startProductionInstance(found, { appId: 'rtstats', key: KEY, instanceId, isolation, env: { KAFKA_SESSION_TIMEOUT_MS: '6000' } });
      services.push(started.service);
      return started;
    };
    const since = Date.now();
    const [one, two] = [await start('stats-a'), await start('stats-b')];
    // Stats rows are written by the instance holding their partition (each topic's writers share
    // the partitions in a consumer group): once both hold some, the group is formed.
    const held = (topic: string): number[][] => [one, two].map(({ service }) => service.runner.partitionsOf(`stats-writer-${topic}`));
    await until('the stats writers sharing the partitions of every topic', () =>
      ['messages', 'usage', 'connections'].every((topic) => held(topic).every((p) => p.length > 0) && held(topic).flat().sort().join() === '0,1,2,3'), 60_000);
    const client = (port: number): Ably.Realtime => {
      const c = new Ably.Realtime({ key: KEY, endpoint: '127.0.0.1', port, tls: false, logLevel: 0 });
      opened.push(c);
      return c;
    };

    // Two connections on instance a, one on b, each subscribed to the same channel.
    const clients = [client(one.port), client(one.port), client(two.port)];
    const got = clients.map(() => [] as unknown[]);
    for (const [i, c] of clients.entries()) await c.channels.get('room').subscribe((m) => void got[i].push(m.data));
    // A channel with subscribers on both instances and nothing published (issue 28): active, opened once.
    for (const c of [clients[0], clients[2]]) await c.channels.get('quiet').subscribe(() => undefined);
    // Published on b: a sends it to its two subscribers, b to its one.
    await clients[2].channels.get('room').publish('m', 'hello');
    await until('the message at every subscriber', () => got.every((g) => g.length === 1));

    // Both instances read in the same moment (and so the same interval), then report.
    one.service.usage.readConnections();
    two.service.usage.readConnections();
    await Promise.all([one.service.usage.flush(), two.service.usage.flush()]);

    const rest = new Ably.Rest({ key: KEY, endpoint: '127.0.0.1', port: one.port, tls: false, logLevel: 0 });
    let entries: Record<string, number> = {};
    const summed = async (): Promise<Record<string, number>> => {
      const page = await rest.stats({ start: since - 60_000, unit: 'minute', direction: 'forwards' });
      const out: Record<string, number> = {};
      for (const record of page.items) {
        for (const [k, v] of Object.entries(record.entries) as [string, number][]) {
          out[k] = k.endsWith('.peak') ? Math.max(out[k] ?? 0, v) : (out[k] ?? 0) + v;
        }
      }
      return out;
    };
    const expected = {
      'connections.all.peak': 3,
      'connections.all.opened': 3,
      'messages.inbound.realtime.messages.count': 1,
      'messages.outbound.realtime.messages.count': 3,
      // 'room' (attached on both and published to, counted once) and 'quiet' (attached only).
      'channels.opened': 2,
    };
    await until(
      'the stats of both instances',
      async () => {
        await Promise.all([one.service.stats.flush(), two.service.stats.flush()]);
        entries = await summed();
        return Object.entries(expected).every(([k, v]) => entries[k] === v);
      },
      20_000,
    ).catch(() => undefined);
    expect(entries).toMatchObject(expected);
  });
});
