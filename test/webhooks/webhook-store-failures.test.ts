// A webhook rule's checkpoint store (SQLite in DATA_DIR, ClickHouse in production) failing for a
// moment: a rule whose start it failed starts once it answers, and is not reported delivering
// meanwhile; a rule change it failed does not keep the next ones from applying. Embedded: the
// store is the real one, made to fail by the test.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import { SqliteWebhookCheckpoints } from '../../projections/webhooks/webhook-checkpoints.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { startReceiver, until, type Receiver } from '../helpers/webhook-receiver.js';

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

/** The service, with its webhook checkpoint store failing the next `fail.starts` starts and `fail.saves` saves. */
async function service(fail: { starts: number; saves: number }): Promise<TestService & { appId: string }> {
  const ts = await startTestService({ WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_RETRY_MS: '20', WEBHOOK_RETRY_MAX_MS: '200' }, {
    adapters: (dataDir) => {
      const store = new SqliteWebhookCheckpoints(join(dataDir, 'webhooks.db'));
      const [start, save] = [store.start.bind(store), store.save.bind(store)];
      store.start = async (...args) => {
        if (fail.starts > 0 && fail.starts--) throw new Error('checkpoint store unavailable (the test)');
        return start(...args);
      };
      store.save = async (...args) => {
        if (fail.saves > 0 && fail.saves--) throw new Error('checkpoint store unavailable (the test)');
        return save(...args);
      };
      return { ...embeddedAdapters(parseConfig({ DATA_DIR: dataDir, SANDBOX: '1' })), webhookCheckpoints: store };
    },
  });
  open.push(ts);
  return Object.assign(ts, { appId: ts.key.slice(0, ts.key.indexOf('.')) });
}

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  open.push({ close: () => r.stop().catch(() => undefined) });
  return r;
}

const inject = (ts: TestService, method: 'POST' | 'DELETE', url: string, payload?: object) =>
  ts.service.app.inject({ method, url, headers: { authorization: ts.auth, ...(payload ? { 'content-type': 'application/json' } : {}) }, payload });
const rule = (id: string, url: string) => ({ id, ruleType: 'http', requestMode: 'single', source: { type: 'channel.message', channelFilter: '' }, target: { url } });
const webhooks = (ts: TestService) => ts.service.readiness().find((c) => c.name === 'webhooks')!.detail;
const deliveredBy = (r: Receiver) => new Set(r.items.map((i) => i.webhookId));

describe('webhook rules while their checkpoint store fails (embedded)', () => {
  it('a rule whose start the store failed is not reported delivering, and starts and delivers once the store answers', { timeout: 60_000 }, async () => {
    const fail = { starts: 0, saves: 0 };
    const ts = await service(fail);
    const r = await receiver();
    fail.starts = 2; // the start the change itself asks for, and the one its answer waits for
    expect((await inject(ts, 'POST', `/apps/${ts.appId}/rules`, rule('first', r.url))).statusCode).toBe(201);
    expect(webhooks(ts)).toBe('0 webhook rules delivering');
    await until('the rule to run', () => webhooks(ts) === '1 webhook rule delivering', 30_000);
    expect((await inject(ts, 'POST', '/channels/orders/messages', { name: 'm', data: 'x' })).statusCode).toBe(201);
    await until('the rule to deliver', () => deliveredBy(r).has('first'), 30_000);
  });

  it('a rule removed while the store fails to save its checkpoint is removed, and the next changes are answered and applied', { timeout: 60_000 }, async () => {
    const fail = { starts: 0, saves: 0 };
    const ts = await service(fail);
    const r = await receiver();
    expect((await inject(ts, 'POST', `/apps/${ts.appId}/rules`, rule('first', r.url))).statusCode).toBe(201);
    fail.saves = 1_000_000; // what the rule delivers stays unsaved
    expect((await inject(ts, 'POST', '/channels/orders/messages', { name: 'm', data: 'x' })).statusCode).toBe(201);
    await until('the first rule to deliver', () => deliveredBy(r).has('first'), 30_000);
    expect((await inject(ts, 'DELETE', `/apps/${ts.appId}/rules/first`)).statusCode).toBe(204);
    fail.saves = 0;
    const added = await inject(ts, 'POST', `/apps/${ts.appId}/rules`, rule('second', r.url));
    expect(added.statusCode, added.body).toBe(201);
    await until('the second rule to run', () => webhooks(ts) === '1 webhook rule delivering', 30_000).catch((err) => {
      throw new Error(`${(err as Error).message}: ${webhooks(ts)}`);
    });
    expect((await inject(ts, 'POST', '/channels/orders/messages', { name: 'm', data: 'y' })).statusCode).toBe(201);
    await until('the second rule to deliver', () => deliveredBy(r).has('second'), 30_000);
  });
});
