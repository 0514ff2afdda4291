// A webhook rule's first start, when more than one service starts it: two production instances
// starting at once on Kafka with the same APPS_FILE rule (given without an id) deliver each message
// (at least once, not everything twice: one consumer group between them) and skip none of what was
// published around their starts; in either mode a restart resumes the same rule where it was.
// The two-instance test runs on the Kafka and ClickHouse test/helpers/infra.ts finds (REQUIRE_INFRA=1:
// it must find them); the restart test and the rule's name run on the embedded log.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { embeddedAdapters } from '../../src/adapters.js';
import { loadAppsFile } from '../../src/apps/apps-file.js';
import { findProductionInfra } from '../helpers/production.js';
import { describeWithInfra } from '../helpers/infra.js';
import { startReceiver, until, type Receiver } from '../helpers/webhook-receiver.js';
import { removeDir } from '../helpers/service.js';

const infra = await findProductionInfra();
const dirs: string[] = [];
const services: Service[] = [];
const receivers: Receiver[] = [];
afterAll(async () => {
  for (const s of services.splice(0)) await s.close().catch(() => undefined);
  for (const r of receivers.splice(0)) await r.stop().catch(() => undefined);
  for (const d of dirs) removeDir(d);
});

/** An APPS_FILE with one app, its key, and one batch rule to `url` given without an id. */
function appsFile(appId: string, key: string, url: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cm-webhooks-first-'));
  dirs.push(dir);
  const path = join(dir, 'apps.json');
  const rule = { ruleType: 'http', requestMode: 'batch', source: { type: 'channel.message', channelFilter: '^first-' }, target: { url, enveloped: true, format: 'json' } };
  writeFileSync(path, JSON.stringify({ apps: [{ appId, keys: [{ key }], rules: [rule] }] }));
  return path;
}

async function publish(service: Service, auth: string, channel: string, data: string[]): Promise<void> {
  const res = await service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: auth, 'content-type': 'application/json' }, payload: data.map((d) => ({ name: 'm', data: d })) });
  expect(res.statusCode, res.body).toBe(201);
}

/** A counter of the service's GET /metrics. */
async function metric(service: Service, name: string): Promise<number> {
  const body = (await service.app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(body)?.[1] ?? NaN);
}
const ruleRuns = (service: Service): boolean => service.readiness().some((c) => c.name === 'webhooks' && /1 webhook rule/.test(c.detail));

/** A receiver, and an APPS_FILE of a new app whose rule to it has no id; the app's root key as a Basic header. */
async function idlessRuleApp() {
  const r = await startReceiver();
  receivers.push(r);
  const tag = randomBytes(3).toString('hex');
  const appId = `first${tag}`;
  const key = `${appId}.k1:secret-${tag}-secret`;
  return { r, tag, auth: `Basic ${Buffer.from(key).toString('base64')}`, path: appsFile(appId, key, r.url) };
}

describe("a webhook rule's first start (embedded)", () => {
  it('names a rule given without an id in APPS_FILE alike on every read of the file (its consumer group and checkpoint)', () => {
    const path = appsFile('idless', 'idless.k1:secret-secret', 'https://example.com/hook');
    const [a, b] = [loadAppsFile(path, 1), loadAppsFile(path, 2)];
    expect(a[0].rules![0].id).toBe(b[0].rules![0].id);
    expect(a[0].rules![0].id).toMatch(/^[A-Za-z0-9_-]{1,32}$/);
  });

  it('resumes an APPS_FILE rule without an id where it was after a restart: what was published while it was down arrives', { timeout: 120_000 }, async () => {
    const { r, auth, path } = await idlessRuleApp();
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-webhooks-first-data-'));
    dirs.push(dataDir);
    const config = parseConfig({ DATA_DIR: dataDir, APPS_FILE: path, WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', LOG_LEVEL: 'silent', KAFKA_BROKERS: '', CLICKHOUSE_URL: '' });
    const logger = pino({ level: 'silent' });
    let service = await startService(config, logger, embeddedAdapters(config, { logger }));
    await until('the rule to run', () => ruleRuns(service), 20_000);
    await publish(service, auth, 'first-1', ['a']);
    await until('the first message', () => r.items.length === 1, 30_000);
    // `b` is on the log but not delivered (the receiver is down) when the service stops.
    await r.stop();
    await publish(service, auth, 'first-1', ['b']);
    const first = service;
    for (let failed = 0; !(failed > 0); failed = await metric(first, 'cm_webhook_requests_failed_total')) await new Promise((ok) => setTimeout(ok, 50));
    await service.close();
    await r.restart();
    service = await startService(config, logger, embeddedAdapters(config, { logger }));
    services.push(service);
    await until('the rule to run again', () => ruleRuns(service), 20_000);
    await until('the message published at the restart', () => r.messagesByChannel().get('first-1')?.length === 2, 30_000);
    expect(r.messagesByChannel().get('first-1')).toEqual(['a', 'b']);
  });

});

describeWithInfra("a webhook rule's first start (production)", 'Kafka and ClickHouse', infra, (found) => {
  it('two instances starting at once with the same rule share its delivery: every message once or more, not everything twice', { timeout: 240_000 }, async () => {
    const { r, tag, auth, path } = await idlessRuleApp();
    const isolation = { topicPrefix: `t${tag}-`, tablePrefix: `t${tag}_`, consumerPrefix: `t${tag}-` };
    const start = async (instanceId: string): Promise<Service> => {
      const dataDir = mkdtempSync(join(tmpdir(), `cm-webhooks-first-${instanceId}-`));
      dirs.push(dataDir);
      const config = parseConfig({
        DATA_DIR: dataDir, APPS_FILE: path, INSTANCE_ID: instanceId, WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_BATCH_SIZE: '10',
        KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: '0', KAFKA_SESSION_TIMEOUT_MS: '6000', LOG_LEVEL: 'silent',
      });
      const logger = pino({ level: 'silent' });
      const service = await startService(config, logger, await productionAdapters(config, logger, isolation));
      services.push(service);
      return service;
    };
    const [a, b] = await Promise.all([start(`a${tag}`), start(`b${tag}`)]);
    await until('the rule to run on both', () => ruleRuns(a) && ruleRuns(b), 60_000);
    // Published from both, from the moment both run the rule (their consumer group still forming).
    const sent = new Map<string, string[]>();
    for (let c = 0; c < 16; c++) sent.set(`first-${c}`, Array.from({ length: 50 }, (_, i) => `first-${c}#${i}`));
    let turn = 0;
    await Promise.all([...sent].map(async ([channel, list]) => {
      for (let i = 0; i < list.length; i += 10) await publish(turn++ % 2 === 0 ? a : b, auth, channel, list.slice(i, i + 10));
    }));
    const total = 800;
    await until('all 800 messages at the receiver', () => [...r.messagesByChannel().values()].reduce((n, l) => n + l.length, 0) >= total, 180_000);
    expect(r.messagesByChannel()).toEqual(sent);
    // One rule (one id, one consumer group): each item posted by one of them, a hand-over's repeats aside.
    expect(new Set(r.items.map((i) => i.webhookId)).size).toBe(1);
    // An item per publish (a record): 80 of them.
    const records = total / 10;
    expect(r.items.length).toBeLessThan(1.5 * records);
    const [byA, byB] = [await metric(a, 'cm_webhook_items_delivered_total'), await metric(b, 'cm_webhook_items_delivered_total')];
    expect(byA + byB).toBeGreaterThanOrEqual(records);
    expect(byA + byB).toBeLessThan(1.5 * records);
  });
});
