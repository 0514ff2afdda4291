// Token revocation in production mode (issue 12): a revocation is an event on the Kafka log
// (the apps topic), consumed by every instance, so a token revoked through one instance is refused
// with 40141 by the others, and by an instance started afterwards (it replays the topic at start).
// And sandbox stats fixtures, read right after they are posted, through Kafka and ClickHouse.
import { randomBytes } from 'node:crypto';
import { afterAll, expect, it } from 'vitest';
import type { Service } from '../../src/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { until as untilShared } from '../faults/publish-load.js';
import { findProductionInfra, startProductionInstance, statsWritersFormed } from '../helpers/production.js';

const infra = await findProductionInfra();
const services: Service[] = [];

afterAll(async () => {
  for (const s of services.splice(0)) await s.close().catch(() => undefined);
});

const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> => untilShared(what, check, timeoutMs, 100);
const basic = (key: string): string => `Basic ${Buffer.from(key).toString('base64')}`;
const bearer = (token: string): string => `Bearer ${Buffer.from(token).toString('base64')}`;

describeWithInfra('production mode: token revocation is an event on the Kafka log', 'Kafka and ClickHouse', infra, (found) => {
  it('a token revoked through one instance is refused with 40141 by another, and by an instance started afterwards; stats fixtures read right after POST /stats', { timeout: 120_000 }, async () => {
    const isolation = { topicPrefix: `rev-${randomBytes(4).toString('hex')}-`, tablePrefix: `rev_${randomBytes(4).toString('hex')}_` };
    const start = async (instanceId: string): Promise<Service> => {
      const { service } = await startProductionInstance(found, { appId: 'revapp', key: 'revapp.k1:rev-secret-rev-secret', instanceId, isolation, env: { SANDBOX: '1', KAFKA_SESSION_TIMEOUT_MS: '6000' } });
      services.push(service);
      return service;
    };
    const a = await start('rev-a');
    const b = await start('rev-b');

    // A sandbox app with a revocableTokens key, made on a; b learns it from the apps topic.
    const created = await a.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }] } });
    expect(created.statusCode).toBe(201);
    const key = created.json().keys[0] as { keyName: string; keyStr: string };
    const read = (service: Service, authorization: string) => service.app.inject({ url: '/channels/revoked-room/messages', headers: { authorization } });
    await until('instance b to know the new app', async () => (await read(b, basic(key.keyStr))).statusCode === 200);

    const tokenFor = async (clientId: string): Promise<string> => {
      const res = await a.app.inject({
        method: 'POST',
        url: `/keys/${key.keyName}/requestToken`,
        headers: { authorization: basic(key.keyStr), 'content-type': 'application/json' },
        payload: { keyName: key.keyName, timestamp: Date.now(), clientId },
      });
      expect(res.statusCode).toBe(200);
      return res.json().token;
    };
    const revoked = await tokenFor('mallory');
    const kept = await tokenFor('alice');
    expect((await read(b, bearer(revoked))).statusCode).toBe(200); // b has it in its verified-credentials cache now
    await new Promise((r) => setTimeout(r, 5)); // a later millisecond than the tokens' issue time

    const res = await a.app.inject({
      method: 'POST',
      url: `/keys/${key.keyName}/revokeTokens`,
      headers: { authorization: basic(key.keyStr), 'content-type': 'application/json', 'x-ably-version': '6' },
      payload: { targets: ['clientId:mallory'] },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ successCount: 1, failureCount: 0 });

    // The instance that answered holds it at once; the other as soon as it consumes the event.
    expect((await read(a, bearer(revoked))).json().error.code).toBe(40141);
    await until('instance b to refuse the revoked token', async () => (await read(b, bearer(revoked))).statusCode === 401);
    expect((await read(b, bearer(revoked))).json().error).toMatchObject({ code: 40141, statusCode: 401 });
    expect((await read(b, bearer(kept))).statusCode).toBe(200);

    // Sandbox stats fixtures are readable when POST /stats returns (read-your-writes through Kafka and
    // ClickHouse), once the stats writers' groups hold the partitions (a rebalance writes nothing).
    await statsWritersFormed([a, b]);
    const posted = await a.app.inject({
      method: 'POST',
      url: '/stats',
      headers: { authorization: basic(key.keyStr), 'content-type': 'application/json' },
      payload: [{ intervalId: '2033-03-03:10:00', inbound: { rest: { messages: { count: 7, data: 70 } } } }],
    });
    expect(posted.statusCode).toBe(201);
    const stats = await a.app.inject({ url: '/stats?unit=minute&start=2033-03-03:10:00&end=2033-03-03:10:00', headers: { authorization: basic(key.keyStr) } });
    expect(stats.json()).toMatchObject([{ intervalId: '2033-03-03:10:00', inbound: { rest: { messages: { count: 7 } } } }]);

    // A restart: b goes, c starts on the same log and refuses the token as soon as it answers.
    services.splice(services.indexOf(b), 1);
    await b.close();
    const c = await start('rev-c');
    expect((await read(c, bearer(revoked))).json().error.code).toBe(40141);
    expect((await read(c, bearer(kept))).statusCode).toBe(200);
  });
});
