// Key management in production mode (issue 24 item 2): a key change is an event on the Kafka apps
// topic, so a key made through one instance works on another, a capability changed or a key
// revoked there holds everywhere (realtime connections on it included), and an instance started
// afterwards replays them all.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { expect, it } from 'vitest';
import type { Service } from '../../src/service.js';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown } from '../helpers/production.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';

const infra = await findProductionInfra();
const { opened, services, until } = productionTeardown();
const basic = (key: string): string => `Basic ${Buffer.from(key).toString('base64')}`;
const json = { 'content-type': 'application/json' };

describeWithInfra('production mode: key management is an event on the Kafka log', 'Kafka and ClickHouse', infra, (found) => {
  it('a key made on one instance works on another; its capability change and revocation hold on both; a later instance replays them', async () => {
    const isolation = { topicPrefix: `keys-${randomBytes(4).toString('hex')}-`, tablePrefix: `keys_${randomBytes(4).toString('hex')}_` };
    const root = 'keyapp.root:root-secret-root-secret';
    const start = async (instanceId: string): Promise<{ service: Service; port: number }> => {
      const { config } = productionConfig(found, [{ appId: 'keyapp', keys: [{ key: root, management: true }] }], { INSTANCE_ID: instanceId });
      const logger = pino({ level: 'silent' });
      const service = await startService(config, logger, await productionAdapters(config, logger, isolation));
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, port: (service.app.server.address() as AddressInfo).port };
    };
    const { service: a } = await start('keys-a');
    const { service: b, port: bPort } = await start('keys-b');
    const publish = (s: Service, key: string, channel: string) =>
      s.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: basic(key), ...json }, payload: { name: 'n' } });

    const created = await a.app.inject({ method: 'POST', url: '/apps/keyapp/keys', headers: { authorization: basic(root), ...json }, payload: { name: 'worker', capability: { 'jobs:*': ['publish', 'subscribe'] } } });
    expect(created.statusCode, created.body).toBe(201);
    const key = created.json() as { id: string; keyName: string; key: string };
    // The instance that answered holds it at once (it answers once its consumer applied the event).
    expect((await publish(a, key.key, 'jobs:1')).statusCode).toBe(201);
    await until('instance b to know the new key', async () => (await publish(b, key.key, 'jobs:1')).statusCode === 201);
    expect((await publish(b, key.key, 'other')).json().error.code).toBe(40160);

    // Changed on b: b holds it at once, a once it consumes the event.
    const changed = await b.app.inject({ method: 'PATCH', url: `/apps/keyapp/keys/${key.id}`, headers: { authorization: basic(root), ...json }, payload: { capability: { other: ['publish'] } } });
    expect(changed.statusCode, changed.body).toBe(200);
    expect((await publish(b, key.key, 'other')).statusCode).toBe(201);
    await until('instance a to apply the capability change', async () => (await publish(a, key.key, 'other')).statusCode === 201);
    expect((await publish(a, key.key, 'jobs:1')).json().error.code).toBe(40160);

    // A realtime connection on the key, on b; the key revoked through a.
    const client = await RawClient.connect(bPort, { key: key.key });
    opened.push(client);
    const revoked = await a.app.inject({ method: 'POST', url: `/apps/keyapp/keys/${key.id}/revoke`, headers: { authorization: basic(root) } });
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await publish(a, key.key, 'other')).json().error).toMatchObject({ code: 40131, statusCode: 401 });
    const error = await client.next((pm) => pm.action === Actions.ERROR, 30_000);
    expect(error.error).toMatchObject({ code: 40131 });
    expect((await publish(b, key.key, 'other')).json().error).toMatchObject({ code: 40131, statusCode: 401 });

    // A third instance, started now, replays the apps topic: the same keys, in the same state.
    const { service: c } = await start('keys-c');
    const list = async (s: Service) => (await s.app.inject({ url: '/apps/keyapp/keys', headers: { authorization: basic(root) } })).json();
    expect(await list(c)).toEqual(await list(a));
    expect((await publish(c, key.key, 'other')).json().error.code).toBe(40131);
    expect((await list(c)).find((k: { keyName: string }) => k.keyName === key.keyName)).toMatchObject({ status: 1, name: 'worker', capability: { other: ['publish'] } });
  }, 120_000);
});
