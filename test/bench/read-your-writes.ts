// Read your own writes in production mode (README: Consistency of reads): one instance on the
// local infrastructure; N rounds of one publish then one history request to the same instance
// (limit=1, newest first), counting the rounds whose request did not return that publish. Each
// round then asks again at once: nothing new to wait for, that second request is the baseline
// the first one's added latency is read against, measured in the same run.
//
//   npx tsx test/bench/read-your-writes.ts [rounds=200]
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { dropTables, productionEnv } from './production-env.js';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const rounds = Number(process.argv[2] ?? 200);
const found = await productionEnv(process.env, ROOT);
if ('skipped' in found) {
  console.log(`read-your-writes: skipped: ${found.skipped}`);
  process.exit(0);
}

const KEY = 'rywapp.k1:ryw-secret-ryw-secret';
const dataDir = mkdtempSync(join(tmpdir(), 'cm-ryw-bench-'));
const appsFile = join(dataDir, 'apps.json');
writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'rywapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }] }));
const config = parseConfig({ ...found.env, DATA_DIR: dataDir, APPS_FILE: appsFile, INSTANCE_ID: 'ryw-bench', LOG_LEVEL: 'silent' });
const isolation = { topicPrefix: `ryw-${randomBytes(4).toString('hex')}-`, tablePrefix: `ryw_${randomBytes(4).toString('hex')}_` };
const logger = pino({ level: 'silent' });
const service = await startService(config, logger, await productionAdapters(config, logger, isolation));
await service.app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(service.app.server.address() as AddressInfo).port}`;
const auth = `Basic ${Buffer.from(KEY).toString('base64')}`;

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

/** Returns whether the newest message is `name`, and the request's duration in ms. */
async function newestIs(channel: string, name: string): Promise<{ seen: boolean; ms: number; status: number }> {
  const started = performance.now();
  const res = await fetch(`${base}/channels/${encodeURIComponent(channel)}/messages?limit=1`, { headers: { authorization: auth } });
  const body = (await res.json()) as { name?: string }[];
  return { seen: res.ok && body[0]?.name === name, ms: performance.now() - started, status: res.status };
}

try {
  for (const channel of [`ryw-${randomBytes(3).toString('hex')}`, `persisted:ryw-${randomBytes(3).toString('hex')}`]) {
    let missed = 0;
    let missedAgain = 0;
    const afterWrite: number[] = [];
    const baseline: number[] = [];
    const statuses = new Map<number, number>();
    for (let i = 0; i < rounds; i++) {
      const name = `m${i}`;
      const res = await fetch(`${base}/channels/${encodeURIComponent(channel)}/messages`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name, data: 'x' }),
      });
      if (res.status !== 201) throw new Error(`publish answered ${res.status}: ${await res.text()}`);
      const first = await newestIs(channel, name);
      const second = await newestIs(channel, name);
      if (!first.seen) missed++;
      if (!second.seen) missedAgain++;
      statuses.set(first.status, (statuses.get(first.status) ?? 0) + 1);
      afterWrite.push(first.ms);
      baseline.push(second.ms);
    }
    const fmt = (v: number): string => v.toFixed(2);
    console.log(
      `${channel.startsWith('persisted:') ? 'persisted' : 'in-memory'} channel, ${rounds} rounds: ` +
        `missed by the read right after the publish ${missed}, by the one after it ${missedAgain}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; ` +
        `read after the publish p50 ${fmt(percentile(afterWrite, 50))} ms p99 ${fmt(percentile(afterWrite, 99))} ms, ` +
        `baseline read p50 ${fmt(percentile(baseline, 50))} ms p99 ${fmt(percentile(baseline, 99))} ms`,
    );
  }
} finally {
  await service.close();
  await dropTables(found.env.CLICKHOUSE_URL, isolation.tablePrefix).catch((err) => console.error(`tables not dropped: ${(err as Error).message}`));
}
