// Each webhook rule is a consumer named after its app and its id (its checkpoints, its Kafka
// group). App ids may hold "-" (APPS_FILE), and so may rule ids: app "shop"'s rule "eu-orders" and
// app "shop-eu"'s rule "orders" must still be two consumers, each delivering its own app's items.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import Database from '../../src/stores/sqlite/driver.mjs';
import { basic, removeDir, startTestService, testServiceMode, type TestService } from '../helpers/service.js';
import { startReceiver, until, type Receiver } from '../helpers/webhook-receiver.js';

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

const SHOP = 'shop.k:shop-secret';
const SHOP_EU = 'shop-eu.k:eu-secret';
const ENV = { WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_RETRY_MS: '20', WEBHOOK_RETRY_MAX_MS: '200' };

function appsFile(): { file: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cm-rule-names-'));
  const file = join(dir, 'apps.json');
  writeFileSync(file, JSON.stringify({ apps: [
    { appId: 'shop', keys: [{ key: SHOP, management: true }] },
    { appId: 'shop-eu', keys: [{ key: SHOP_EU, management: true }] },
  ] }));
  open.push({ close: async () => removeDir(dir) });
  return { file, dir };
}

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  open.push({ close: () => r.stop().catch(() => undefined) });
  return r;
}

async function addRule(ts: TestService, key: string, id: string, url: string): Promise<void> {
  const appId = key.slice(0, key.indexOf('.'));
  const rule = { id, ruleType: 'http', requestMode: 'single', source: { type: 'channel.message', channelFilter: '^orders$' }, target: { url } };
  const res = await ts.service.app.inject({ method: 'POST', url: `/apps/${appId}/rules`, headers: { authorization: basic(key), 'content-type': 'application/json' }, payload: rule });
  expect(res.statusCode, res.body).toBe(201);
}

async function publish(ts: TestService, key: string, data: string): Promise<void> {
  const res = await ts.service.app.inject({ method: 'POST', url: '/channels/orders/messages', headers: { authorization: basic(key), 'content-type': 'application/json' }, payload: { name: 'm', data } });
  expect(res.statusCode, res.body).toBe(201);
}

const received = (r: Receiver, ruleId: string): string[] => r.items.filter((i) => i.webhookId === ruleId).map((i) => String(i.data.messages?.[0].data));

describe(`webhook rule consumers (${testServiceMode})`, () => {
  it('app "shop" rule "eu-orders" and app "shop-eu" rule "orders" each deliver their own app\'s messages, and the service starts again with both', { timeout: 120_000 }, async () => {
    const { file } = appsFile();
    let ts = await startTestService({ ...ENV, APPS_FILE: file });
    open.push({ close: () => ts.close() });
    const r = await receiver();
    await addRule(ts, SHOP_EU, 'orders', r.url);
    await addRule(ts, SHOP, 'eu-orders', r.url);
    await publish(ts, SHOP, 'from shop');
    await publish(ts, SHOP_EU, 'from shop-eu');
    await until('both rules to deliver', () => received(r, 'eu-orders').length > 0 && received(r, 'orders').length > 0, 30_000);
    expect(received(r, 'eu-orders')).toEqual(['from shop']);
    expect(received(r, 'orders')).toEqual(['from shop-eu']);

    ts = await ts.restart();
    await publish(ts, SHOP, 'shop again');
    await publish(ts, SHOP_EU, 'shop-eu again');
    await until('both rules to deliver after the restart', () => received(r, 'eu-orders').includes('shop again') && received(r, 'orders').includes('shop-eu again'), 30_000);
    // At least once: a restart may repeat an item, never bring another app's.
    expect(new Set(received(r, 'eu-orders'))).toEqual(new Set(['from shop', 'shop again']));
    expect(new Set(received(r, 'orders'))).toEqual(new Set(['from shop-eu', 'shop-eu again']));
  });

  it.runIf(testServiceMode === 'embedded')('a rule of an app with "-" in its id resumes from the checkpoint saved under its former name, webhook-<appId>-<ruleId>', { timeout: 120_000 }, async () => {
    const { file } = appsFile();
    let ts = await startTestService({ ...ENV, APPS_FILE: file });
    open.push({ close: () => ts.close() });
    const r = await receiver();
    await addRule(ts, SHOP_EU, 'orders', r.url);
    await publish(ts, SHOP_EU, 'first');
    await until('the first message', () => received(r, 'orders').length === 1, 30_000);
    await ts.close();
    // As an earlier version left it: the checkpoints under the former name, the first message not yet saved as delivered.
    const db = new Database(join(ts.dataDir, 'webhooks.db'));
    const renamed = db.prepare("UPDATE webhook_checkpoints SET consumer = 'webhook-shop-eu-orders', next_offset = 0 WHERE consumer = 'webhook-shop-eu.orders'").run();
    db.prepare("UPDATE webhook_starts SET consumer = 'webhook-shop-eu-orders' WHERE consumer = 'webhook-shop-eu.orders'").run();
    db.close();
    expect(renamed.changes).toBeGreaterThan(0);
    ts = await ts.restart();
    await until('the first message again (at least once), from the former checkpoint', () => received(r, 'orders').length === 2, 30_000);
    expect(received(r, 'orders')).toEqual(['first', 'first']);
  });
});
