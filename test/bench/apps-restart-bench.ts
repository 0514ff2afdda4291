// A bounded start for the apps topic (issue 23 item 6): a restart after many key changes, sandbox
// apps and token revocations, replaying the apps topic whole (SNAPSHOT_INTERVAL_MS=0, as every start
// did before its snapshot) and from the snapshot, one after the other in the same run. Embedded
// always; production too when its infrastructure is there (fewer events: librdkafka's mock broker
// keeps ~5 MiB per partition, and the apps topic's events are keyed by app, so most land on one).
//
// `npx tsx test/bench/apps-restart-bench.ts [events]` (`BENCH_PRODUCTION_APPS_EVENTS` for production; 0 skips it).
// Figures: test/bench/README.md, Restart.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { parseConfig, type Config } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Log } from '../../src/log/port.js';
import { countingAdapters } from '../helpers/counting-log.js';
import { dropTables, productionEnv } from './production-env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EVENTS = Number(process.argv[2] ?? 200_000);
const APPS = 200;
const KEYS_PER_APP = 5;
const logger = pino({ level: 'warn' }, pino.destination(2));

/** Key changes (70%), token revocations (25%), sandbox apps made and deleted (5%), over APPS apps. */
async function fill(log: Log, n: number): Promise<void> {
  let s = 23;
  const random = (): number => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const now = Date.now();
  const batch = 2000;
  for (let i = 0; i < n; i += batch) {
    const records = [];
    for (let j = i; j < Math.min(n, i + batch); j++) {
      const appId = `app-${Math.floor(random() * APPS)}`;
      const keyName = `${appId}.k${Math.floor(random() * KEYS_PER_APP)}`;
      const r = random();
      let event: LogEvent;
      if (j < APPS * KEYS_PER_APP) {
        const a = `app-${Math.floor(j / KEYS_PER_APP)}`;
        event = j % KEYS_PER_APP === 0
          ? { type: 'app.created', app: { appId: a, accountId: 'acct', keys: Array.from({ length: KEYS_PER_APP }, (_, k) => ({ keyName: `${a}.k${k}`, keySecret: `secret-${k}`, capability: '{"*":["*"]}' })), namespaces: [], source: 'sandbox', createdAt: now } }
          : { type: 'key.updated', appId: a, keyName: `${a}.k${j % KEYS_PER_APP}`, modified: now, name: 'first' };
      } else if (r < 0.7) event = { type: 'key.updated', appId, keyName, modified: now + j, ...(j % 2 ? { name: `n${j}` } : { capability: `{"ch-${j % 1000}":["publish"]}` }) };
      else if (r < 0.95) event = { type: 'tokens.revoked', appId, keyName, targets: [`clientId:c${j % 5000}`], issuedBefore: now - (j % 600) * 1000, appliesAt: now };
      else if (r < 0.975) event = { type: 'app.created', app: { appId: `sandbox-${j}`, accountId: 'acct', keys: [{ keyName: `sandbox-${j}.k`, keySecret: 's', capability: '{"*":["*"]}' }], namespaces: [], source: 'sandbox', createdAt: now } };
      else event = { type: 'app.deleted', appId: `sandbox-${j - 1}` };
      const key = event.type === 'app.created' ? event.app.appId : event.appId;
      records.push({ key, value: encodeEvent(event), timestamp: now });
    }
    await log.append(Topics.apps, records);
    if ((i / batch) % 10 === 0) process.stderr.write(`\r[apps-restart-bench] apps: ${i + records.length} of ${n}   `);
  }
  process.stderr.write('\n');
}

async function timedStart(config: Config, adapters: () => Promise<Adapters>): Promise<{ ms: number; read: number; apps: number; revocations: number }> {
  const counted = countingAdapters(await adapters(), config.instanceId);
  const started = performance.now();
  const service = await startService(config, logger, counted.adapters);
  const ms = performance.now() - started;
  const result = { ms, read: counted.handed.get('apps')?.length ?? 0, apps: service.registry.all().length, revocations: service.revocations.held() };
  await service.close();
  return result;
}

async function measure(label: string, events: number, env: Record<string, string>, adapters: (config: Config) => Promise<Adapters>): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cm-apps-restart-bench-'));
  try {
    const config = (more: Record<string, string>): Config =>
      parseConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', INSTANCE_ID: `apps-bench-${randomBytes(3).toString('hex')}`, SNAPSHOT_INTERVAL_MS: '60000', ...env, ...more });
    const writer = await adapters(config({}));
    await fill(writer.log, events);
    await writer.log.close();
    await writer.close?.();
    const whole = await timedStart(config({ SNAPSHOT_INTERVAL_MS: '0' }), () => adapters(config({})));
    await timedStart(config({}), () => adapters(config({}))); // writes the snapshot at its close
    const dir = join(dataDir, 'snapshots', 'apps');
    const file = readdirSync(dir).filter((f) => f.endsWith('.snap')).sort().reverse()[0];
    const bytes = file ? statSync(join(dir, file)).size : 0;
    const restored = await timedStart(config({}), () => adapters(config({})));
    if (restored.apps !== whole.apps || restored.revocations !== whole.revocations) throw new Error(`state differs: ${JSON.stringify(restored)} restored, ${JSON.stringify(whole)} replayed`);
    if (whole.read < events) console.log(`[apps-restart-bench] ${label}: the log kept only ${whole.read} of ${events} apps events (the mock broker keeps ~5 MiB per partition): use fewer`);
    const s = (ms: number): string => (ms / 1000).toFixed(2);
    return `| ${label} | ${events.toLocaleString('en')} | ${s(whole.ms)} (${whole.read.toLocaleString('en')} read) | ${s(restored.ms)} (${restored.read.toLocaleString('en')} read) | ${whole.apps.toLocaleString('en')} / ${whole.revocations.toLocaleString('en')} | ${(bytes / 1024).toFixed(0)} KiB |`;
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const HEADER = '| restart after apps-topic churn | apps events | full replay s (records read) | from snapshot s (records read) | apps / revocations held | snapshot size |\n|---|---:|---:|---:|---:|---:|';
const rows: string[] = [];
const printed = (row: string): string => {
  console.log(`${HEADER}\n${row}`);
  return row;
};
if (EVENTS > 0) rows.push(printed(await measure('embedded (SQLite)', EVENTS, {}, async (config) => embeddedAdapters(config, { lock: false }))));
const productionEvents = Number(process.env.BENCH_PRODUCTION_APPS_EVENTS ?? 20_000);
const found = productionEvents > 0 ? await productionEnv(process.env, ROOT) : { skipped: 'BENCH_PRODUCTION_APPS_EVENTS=0' };
if ('skipped' in found) console.log(`[apps-restart-bench] production: skipped: ${found.skipped}`);
else {
  const tag = randomBytes(4).toString('hex');
  const isolation = { topicPrefix: `appsrestart-${tag}-`, tablePrefix: `appsrestart_${tag}_` };
  const { productionAdapters } = await import('../../src/production-adapters.js');
  try {
    rows.push(printed(await measure(`production (Kafka${found.kafkaMock ? ' mock' : ''} + ClickHouse)`, productionEvents, found.env, (config) => productionAdapters(config, logger, isolation))));
  } finally {
    await dropTables(found.env.CLICKHOUSE_URL, isolation.tablePrefix);
  }
}
console.log(`\n${HEADER}`);
for (const row of rows) console.log(row);
