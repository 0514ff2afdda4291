// What a client may add to the apps topic, which is kept for good and read at every start: token
// revocations that change something, key and webhook rule changes, and the sandbox's apps, each
// app within a budget (APP_EVENTS_BURST at once, APP_EVENTS_PER_MINUTE after): past it 42910
// (429) and nothing appended; other apps keep theirs. In both modes: embedded, and on Kafka.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { basic, removeDir, startTestService } from '../helpers/service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig } from '../helpers/production.js';

let now = Date.now();
const clock = { now: () => now };
const BUDGET = { APP_EVENTS_BURST: '3', APP_EVENTS_PER_MINUTE: '6' };


/** The records on the apps topic, all partitions. */
const appsRecords = async (service: Service): Promise<number> => [...(await service.log.endOffsets('apps')).values()].reduce((a, b) => a + b, 0);

const revoke = (service: Service, key: { keyName: string; keyStr: string }, target: string, issuedBefore?: number) =>
  service.app.inject({
    method: 'POST',
    url: `/keys/${key.keyName}/revokeTokens`,
    headers: { authorization: basic(key.keyStr), 'content-type': 'application/json', 'x-ably-version': '6' },
    payload: { targets: [target], ...(issuedBefore === undefined ? {} : { issuedBefore }) },
  });

/**
 * The budget's rule on `service`, for `appId` (its root key, with the management right: `root`),
 * the service's clock moved by `advance`. APP_EVENTS_BURST 3, APP_EVENTS_PER_MINUTE 6.
 */
async function budgetHolds(service: Service, appId: string, root: string, advance: (ms: number) => Promise<void>): Promise<void> {
  const before = await appsRecords(service);
  // A key change takes one event: a key whose tokens can be revoked.
  const made = await service.app.inject({ method: 'POST', url: `/apps/${appId}/keys`, headers: { authorization: basic(root) }, payload: { revocableTokens: true } });
  expect(made.statusCode, made.body).toBe(201);
  const key = { keyName: made.json().keyName ?? `${appId}.${made.json().id}`, keyStr: made.json().key };
  await advance(5);
  // Two revocations that change what is revoked: the burst is spent.
  expect((await revoke(service, key, 'clientId:alice')).statusCode).toBe(201);
  expect((await revoke(service, key, 'clientId:bob')).statusCode).toBe(201);
  await waitForRecords(service, before + 3);
  const refused = await revoke(service, key, 'clientId:carol');
  expect(refused.statusCode).toBe(429);
  expect(refused.headers['x-ably-errorcode']).toBe('42910');
  expect(refused.json().error).toMatchObject({ code: 42910, statusCode: 429, message: expect.stringMatching(/APP_EVENTS_PER_MINUTE.*the revocation was not made; retry in \d+ s/) });
  // The same budget covers key changes.
  const keyChange = await service.app.inject({ method: 'POST', url: `/apps/${appId}/keys`, headers: { authorization: basic(root) }, payload: {} });
  expect(keyChange.statusCode).toBe(429);
  expect(keyChange.json().error.message).toContain('the key change was not made');
  // Another app has a budget of its own (a sandbox app: the sandbox's budget made it).
  const other = (await service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }] } })).json();
  expect((await revoke(service, other.keys[0], 'clientId:carol')).statusCode).toBe(201);
  const afterOther = before + 5; // the other app's creation and its revocation
  await waitForRecords(service, afterOther);
  // The budget refills: 6 a minute, one every 10 s.
  await advance(10_000);
  const carol = await revoke(service, key, 'clientId:carol');
  expect(carol.statusCode).toBe(201);
  expect((await revoke(service, key, 'clientId:dave')).statusCode).toBe(429);
  // A repeat of a revocation in force appends nothing, and is answered whatever the budget.
  expect((await revoke(service, key, 'clientId:carol', carol.json().results[0].issuedBefore)).statusCode).toBe(201);
  await waitForRecords(service, afterOther + 1);
  expect(await appsRecords(service)).toBe(afterOther + 1);
}

/** Until the apps topic holds `n` records (a Kafka topic's end moves once the append is acknowledged: at once, but polled all the same). */
async function waitForRecords(service: Service, n: number): Promise<void> {
  for (let i = 0; i < 100 && (await appsRecords(service)) < n; i++) await new Promise((r) => setTimeout(r, 50));
  expect(await appsRecords(service)).toBe(n);
}

describe('the apps topic: what one app may add to it', () => {
  it('token revocations and key changes share an app\'s budget: APP_EVENTS_BURST at once, APP_EVENTS_PER_MINUTE after; past it 42910 (429), nothing appended; another app unaffected', async () => {
    const t = await startTestService(BUDGET, { clock });
    try {
      await budgetHolds(t.service, t.key.split('.')[0], t.key, async (ms) => void (now += ms));
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('the sandbox\'s app creations (POST /apps needs no credentials) share one budget', async () => {
    const t = await startTestService({ ...BUDGET, APP_EVENTS_BURST: '2' }, { clock });
    try {
      for (let i = 0; i < 2; i++) expect((await t.service.app.inject({ method: 'POST', url: '/apps', payload: {} })).statusCode).toBe(201);
      const refused = await t.service.app.inject({ method: 'POST', url: '/apps', payload: {} });
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error).toMatchObject({ code: 42910, message: expect.stringContaining('the sandbox') });
      now += 10_000;
      expect((await t.service.app.inject({ method: 'POST', url: '/apps', payload: {} })).statusCode).toBe(201);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});

const infra = await findProductionInfra();
const services: Service[] = [];
afterAll(async () => {
  for (const s of services.splice(0)) await s.close().catch(() => undefined);
});

describeWithInfra('the apps topic on Kafka: what one app may add to it', 'Kafka and ClickHouse', infra, (found) => {
  it('the same budget, the records counted on the Kafka topic', { timeout: 60_000 }, async () => {
    const isolation = { topicPrefix: `aeb-${randomBytes(4).toString('hex')}-`, tablePrefix: `aeb_${randomBytes(4).toString('hex')}_` };
    const root = 'aebapp.root:aeb-secret-aeb-secret';
    const { config } = productionConfig(found, [{ appId: 'aebapp', keys: [{ key: root, management: true }] }], { INSTANCE_ID: 'aeb-a', SANDBOX: '1', ...BUDGET });
    const logger = pino({ level: 'silent' });
    const service = await startService(config, logger, await productionAdapters(config, logger, isolation));
    services.push(service);
    // Real time here (the instance's own clock): the refill waits 10 s.
    await budgetHolds(service, 'aebapp', root, (ms) => new Promise((r) => setTimeout(r, ms)));
  });
});
