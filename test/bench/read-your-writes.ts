// Read your own writes in production mode (README: Consistency of reads): one instance on the
// local infrastructure; N rounds of one publish then one history request to the same instance
// (limit=1, newest first), counting the rounds whose request did not return that publish. Each
// round then asks again at once: nothing new to wait for, that second request is the baseline
// the first one's added latency is read against, measured in the same run. Then the same
// publishes to a second instance of the same topics, each read once at once from the first (what
// holds across instances), and then polled there until seen (how long "eventually" is).
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
const isolation = { topicPrefix: `ryw-${randomBytes(4).toString('hex')}-`, tablePrefix: `ryw_${randomBytes(4).toString('hex')}_` };
const logger = pino({ level: 'silent' });
const start = async (instanceId: string): Promise<{ service: Awaited<ReturnType<typeof startService>>; base: string }> => {
  const own = parseConfig({ ...found.env, DATA_DIR: mkdtempSync(join(tmpdir(), 'cm-ryw-bench-')), APPS_FILE: appsFile, INSTANCE_ID: instanceId, LOG_LEVEL: 'silent' });
  const service = await startService(own, logger, await productionAdapters(own, logger, isolation));
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  return { service, base: `http://127.0.0.1:${(service.app.server.address() as AddressInfo).port}` };
};
const { service, base } = await start('ryw-bench');
const other = await start('ryw-bench-other');
const auth = `Basic ${Buffer.from(KEY).toString('base64')}`;

const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

/** Returns whether the newest message is `name`, and the request's duration in ms. */
async function newestIs(channel: string, name: string, at = base): Promise<{ seen: boolean; ms: number; status: number }> {
  const started = performance.now();
  const res = await fetch(`${at}/channels/${encodeURIComponent(channel)}/messages?limit=1`, { headers: { authorization: auth } });
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
  // Across instances: published to the other, read from this one.
  const channel = `ryw-across-${randomBytes(3).toString('hex')}`;
  let missed = 0;
  const visibleAfter: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const name = `m${i}`;
    const res = await fetch(`${other.base}/channels/${encodeURIComponent(channel)}/messages`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name, data: 'x' }),
    });
    if (res.status !== 201) throw new Error(`publish answered ${res.status}: ${await res.text()}`);
    const acked = performance.now();
    if (!(await newestIs(channel, name)).seen) {
      missed++;
      while (!(await newestIs(channel, name)).seen) await new Promise((r) => setTimeout(r, 1));
    }
    visibleAfter.push(performance.now() - acked);
  }
  console.log(
    `across instances, ${rounds} rounds: missed by the read right after the publish ${missed}; ` +
      `seen on the other instance after the publish's 201: p50 ${percentile(visibleAfter, 50).toFixed(2)} ms p99 ${percentile(visibleAfter, 99).toFixed(2)} ms max ${Math.max(...visibleAfter).toFixed(2)} ms`,
  );
} finally {
  await other.service.close();
  await service.close();
  await dropTables(found.env.CLICKHOUSE_URL, isolation.tablePrefix).catch((err) => console.error(`tables not dropped: ${(err as Error).message}`));
}
