// Webhook delivery survives a crash: the service killed with SIGKILL while it delivers, then
// started again on the same DATA_DIR (and, in production mode, the same Kafka and ClickHouse),
// delivers everything, from its rule's checkpoint (at least once: repeats carry the same item id).
// TEST_SERVICE_MODE=production runs it on the Kafka and ClickHouse test/helpers/infra.ts finds.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../helpers/server-process.js';
import { findProductionInfra } from '../helpers/production.js';
import { requireInfra } from '../helpers/infra.js';
import { startReceiver, until } from '../helpers/webhook-receiver.js';
import { removeDir } from '../helpers/service.js';

const production = process.env.TEST_SERVICE_MODE === 'production';

describe(`webhook delivery across a kill -9 (${production ? 'production' : 'embedded'})`, () => {
  const dirs: string[] = [];
  const running: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of running) if (s.running()) s.child.kill('SIGKILL');
    for (const d of dirs) removeDir(d);
  });

  it('delivers every message published after the service is killed mid-delivery and started again', { timeout: 240_000 }, async () => {
    let infraEnv: Record<string, string> = {};
    if (production) {
      const infra = await findProductionInfra();
      if (!infra) {
        if (requireInfra) throw new Error('REQUIRE_INFRA=1 but no Kafka and ClickHouse were found');
        return;
      }
      infraEnv = { KAFKA_BROKERS: infra.brokers.join(','), CLICKHOUSE_URL: infra.clickhouseUrl, KAFKA_IDEMPOTENT: '0', KAFKA_SESSION_TIMEOUT_MS: '6000' };
    }
    const receiver = await startReceiver();
    receiver.delayMs = 25; // slow enough to be killed in the middle (2,000 messages: 400 requests of 5)
    const tag = randomBytes(3).toString('hex');
    const appId = `hook${tag}`;
    const key = `${appId}.k1:secret-${tag}-secret`;
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-webhooks-kill9-'));
    dirs.push(dataDir);
    const appsFile = join(dataDir, 'apps.json');
    const rule = { id: `r${tag}`, ruleType: 'http', requestMode: 'batch', source: { type: 'channel.message', channelFilter: '' }, target: { url: receiver.url, enveloped: true, format: 'json' } };
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId, keys: [{ key }], rules: [rule] }] }));
    const env = { ...infraEnv, DATA_DIR: dataDir, APPS_FILE: appsFile, WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_BATCH_SIZE: '5', WEBHOOK_RETRY_MS: '20', WEBHOOK_RETRY_MAX_MS: '500' };
    let service = await startServer(env, 90_000);
    running.push(service);
    // The rule runs once its checkpoint is saved: /ready says so.
    for (;;) {
      const ready = (await (await fetch(`http://127.0.0.1:${service.port}/ready`)).json().catch(() => ({}))) as { checks?: { name: string; detail: string }[] };
      if (JSON.stringify(ready).includes('1 webhook rule')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const auth = `Basic ${Buffer.from(key).toString('base64')}`;
    const sent = new Map<string, string[]>();
    for (let c = 0; c < 4; c++) sent.set(`k9-${c}`, Array.from({ length: 500 }, (_, i) => `k9-${c}#${i}`));
    await Promise.all(
      [...sent].map(async ([channel, list]) => {
        for (let i = 0; i < list.length; i += 50) {
          const res = await fetch(`http://127.0.0.1:${service.port}/channels/${channel}/messages`, {
            method: 'POST',
            headers: { authorization: auth, 'content-type': 'application/json' },
            body: JSON.stringify(list.slice(i, i + 50).map((d) => ({ name: 'm', data: d }))),
          });
          expect(res.status).toBe(201);
        }
      }),
    );
    const total = 2000;
    const count = (): number => [...receiver.messagesByChannel().values()].reduce((n, l) => n + l.length, 0);
    await until('some messages delivered', () => count() >= 100, 60_000);
    expect(count()).toBeLessThan(total); // killed mid-delivery
    service.child.kill('SIGKILL');
    await service.exited;
    const before = count();
    service = await startServer(env, 90_000);
    running.push(service);
    await until('all 2,000 messages after the restart', () => count() >= total, 180_000);
    const got = receiver.messagesByChannel();
    for (const [channel, list] of sent) expect(got.get(channel)).toEqual(list);
    expect(before).toBeLessThan(total);
    await service.stop();
    await receiver.stop();
  });
});
