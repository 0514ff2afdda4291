// Production mode end to end for the realtime interface (issue: Realtime): two service instances
// on one Kafka, each with its own gateway. Delivery is a consumer of the log, so a publish on one
// reaches a subscriber on the other; presence entered on one is visible on the other; and
// when an instance dies, the
// other removes the members it held.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import pino from 'pino';
import * as Ably from 'ably';
import { parseConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { describeWithInfra, findClickHouse, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const clickhouse = await findClickHouse();
const infra =
  kafka && clickhouse
    ? {
        ...kafka,
        clickhouseUrl: clickhouse.url,
        stop: async () => {
          await kafka.stop();
          await clickhouse.stop();
        },
      }
    : undefined;

const KEY = 'rtapp.k1:rt-secret-rt-secret';
const opened: { close(): void }[] = [];
const services: Service[] = [];

afterAll(async () => {
  for (const c of opened.splice(0)) c.close();
  for (const s of services.splice(0)) await s.close().catch(() => undefined);
});

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describeWithInfra('production mode: the realtime gateway on two instances of one Kafka', 'Kafka and ClickHouse', infra, (found) => {
  it('delivers across instances, shares presence, and removes the members of a dead one', async () => {
    const isolation = { topicPrefix: `rt-${randomBytes(4).toString('hex')}-`, tablePrefix: `rt_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const dataDir = mkdtempSync(join(tmpdir(), 'cm-prod-rt-'));
      const appsFile = join(dataDir, 'apps.json');
      writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'rtapp', keys: [{ key: KEY }] }] }));
      const config = parseConfig({
        DATA_DIR: dataDir,
        APPS_FILE: appsFile,
        KAFKA_BROKERS: found.brokers.join(','),
        CLICKHOUSE_URL: found.clickhouseUrl,
        KAFKA_IDEMPOTENT: found.mock || found.source !== 'testcontainers' ? '0' : '1',
        INSTANCE_ID: instanceId,
        REALTIME_INSTANCE_ALIVE_MS: '500',
        REALTIME_PRESENCE_DROP_MS: '5000',
        LOG_LEVEL: 'silent',
      });
      const logger = pino({ level: 'silent' });
      const service = await startService(config, logger, await productionAdapters(config, logger, isolation));
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, port: (service.app.server.address() as AddressInfo).port };
    };
    const one = await start('instance-a');
    const two = await start('instance-b');
    const client = (port: number, clientId: string, more: Ably.ClientOptions = {}): Ably.Realtime => {
      const c = new Ably.Realtime({ key: KEY, clientId, endpoint: '127.0.0.1', port, tls: false, logLevel: 0, ...more });
      opened.push(c);
      return c;
    };

    // A publish on one instance reaches a subscriber on the other.
    const subscriber = client(one.port, 'sub');
    const publisher = client(two.port, 'pub');
    const received: unknown[] = [];
    await subscriber.channels.get('room').subscribe((m) => void received.push(m.data));
    await publisher.channels.get('room').publish('hello', 'from-b');
    await until('the message from the other instance', () => received.length === 1);
    expect(received).toEqual(['from-b']);

    // Presence entered on one is visible on the other.
    await publisher.channels.get('room').presence.enter('b-member');
    await until('the member on the other instance', async () => (await subscriber.channels.get('room').presence.get()).length === 1);
    expect((await subscriber.channels.get('room').presence.get()).map((m) => m.clientId)).toEqual(['pub']);

    // A connection resumed on the other instance (behind a balancer) is not here yet: in this
    // suite it was seen to replay an earlier message and to lose continuity (issue 11's note).

    // Instance b dies without a word (no DISCONNECTED reaches anyone, no leave is written): its
    // members are removed by instance a once b has been silent for three alive intervals.
    publisher.close();
    await new Promise((r) => setTimeout(r, 100));
    const other = client(two.port, 'b-only');
    await other.channels.get('lobby').presence.enter('stays-unless-removed');
    // Stop instance b's gateway from appending anything more, as a crash would.
    services.splice(services.indexOf(two.service), 1);
    await two.service.close();
    const restOnA = async (): Promise<number> =>
      ((await one.service.app.inject({ url: '/channels/lobby/presence', headers: { authorization: `Basic ${Buffer.from(KEY).toString('base64')}` } })).json() as unknown[]).length;
    await until('the dead instance member to leave', async () => (await restOnA()) === 0, 20_000);
  });
});
