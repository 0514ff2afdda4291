// Stats benchmarks (issue 4): GET /stats over 30 days of 6-second rollups for each unit, and the
// stats projection's replay rate beside the raw log read rate, measured in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { join } from 'node:path';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type Log } from '../../src/log/port.js';
import { channelKey, encodeEvent } from '../../src/log/events.js';
import { replayStats } from '../../src/cli/rebuild.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { Base, SAMPLE_MS, type Unit } from '../../projections/stats/stats-sample.js';
import type { StatsRow, StatsStore } from '../../projections/stats/stats-store.js';

const DAY = 86_400_000;
const UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const ms = (n: number): string => (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0));
const rate = (n: number): string => Math.round(n).toLocaleString('en-US');

/** 30 days of samples for one app, every 6 seconds, written in large batches. */
async function seed(store: StatsStore, appId: string, end: number, progress: (s: string) => void, start = end - 30 * DAY): Promise<number> {
  await store.init();
  const total = (end - start) / SAMPLE_MS;
  let rows: StatsRow[] = [];
  let written = 0;
  for (let t = start, i = 0; t < end; t += SAMPLE_MS, i++) {
    rows.push({
      appId,
      interval: t,
      topic: 'messages',
      partition: 0,
      slot: 0,
      version: i,
      counters: { [Base.inbound('rest', 'messages', 'count')]: 10 + (i % 7), [Base.inbound('rest', 'messages', 'data')]: 1000 + i, [Base.api('all', 'succeeded')]: 3 },
      channels: 1 + (i % 13),
      connections: 5 + (i % 11),
    });
    if (rows.length === 20_000) {
      await store.write('messages', rows, new Map());
      written += rows.length;
      rows = [];
      progress(`  seeding ${store.kind}: ${Math.round((written / total) * 100)}%`);
    }
  }
  await store.write('messages', rows, new Map());
  return written + rows.length;
}

export interface StatsBenchResult {
  markdown: string;
}

/**
 * GET /stats latency per unit (p50, p99 over `samples` requests, each for the newest 100 records
 * of the unit across 30 days) on the embedded store and, when given, ClickHouse.
 */
export async function statsQueryBench(options: {
  samples: number;
  /** Production infrastructure (the environment of production-env.ts), to measure ClickHouse too. */
  production?: Record<string, string>;
  progress: (s: string) => void;
}): Promise<string> {
  const lines = [
    '| GET /stats over 30 days of 6-second samples (432,000), with minute/hour/day/month rollups | unit | p50 ms | p99 ms | records | p99 / GET /time p99 |',
    '|---|---|---:|---:|---:|---:|',
  ];
  const end = Math.floor(Date.now() / SAMPLE_MS) * SAMPLE_MS;
  const prefix = `bench_stats_${Date.now()}_`;
  const targets: { name: string; env: Record<string, string>; adapters: (dataDir: string) => Promise<Adapters> }[] = [
    { name: 'embedded (SQLite)', env: {}, adapters: async (dataDir) => embeddedAdapters(parseConfig({ DATA_DIR: dataDir })) },
  ];
  const production = options.production;
  if (production) {
    targets.push({
      name: 'production (ClickHouse)',
      env: production,
      adapters: (dataDir) =>
        productionAdapters(parseConfig({ ...production, DATA_DIR: dataDir }), pino({ level: 'silent' }), { topicPrefix: `${prefix}-`, tablePrefix: prefix }),
    });
  }
  for (const target of targets) {
    const dataDir = mkdtempSync(join(tmpdir(), 'bench-stats-'));
    const adapters = await target.adapters(dataDir);
    const config = parseConfig({ ...target.env, DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent' });
    const service = await startService(config, pino({ level: 'silent' }), adapters);
    try {
      const app = service.registry.all()[0];
      const auth = `Basic ${Buffer.from(`${app.keys[0].keyName}:${app.keys[0].keySecret}`).toString('base64')}`;
      // An app of its own with 3 minutes of samples (a new app, a fresh service): a page of minutes
      // is short of data, and its window is widened only as far as the oldest sample.
      const created = await service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } });
      if (created.statusCode !== 201) throw new Error(`POST /apps answered ${created.statusCode}: ${created.body}`);
      const youngApp = created.json() as { appId: string; keys: { keyStr: string }[] };
      await seed(adapters.statsStore, youngApp.appId, end, options.progress, end - 3 * 60_000);
      const youngAuth = `Basic ${Buffer.from(youngApp.keys[0].keyStr).toString('base64')}`;
      const young = await timed(options.samples, () => service.app.inject({ url: '/stats?unit=minute', headers: { authorization: youngAuth } }));
      const t0 = performance.now();
      const rows = await seed(adapters.statsStore, app.appId, end, options.progress);
      options.progress(`  ${target.name}: ${rows} samples seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      // The seeding's garbage collected first, so that neither the baseline nor the pages pay for it.
      collectGarbage();
      // The baseline, in the same run and the same process: GET /time (no store at all).
      const timeTimes: number[] = [];
      for (let i = 0; i < options.samples + 5; i++) {
        const started = performance.now();
        const res = await service.app.inject({ url: '/time' });
        if (i >= 5) timeTimes.push(performance.now() - started); // the first few warm up
        if (res.statusCode !== 200) throw new Error(`GET /time answered ${res.statusCode}`);
      }
      timeTimes.sort((a, b) => a - b);
      const timeP99 = percentile(timeTimes, 99);
      lines.push(`| ${target.name} | GET /time | ${ms(percentile(timeTimes, 50))} | ${ms(timeP99)} | | 1 |`);
      const row = (label: string, r: { times: number[]; records: number }): void => {
        lines.push(`| ${target.name} | ${label} | ${ms(percentile(r.times, 50))} | ${ms(percentile(r.times, 99))} | ${r.records} | ${(percentile(r.times, 99) / timeP99).toFixed(1)} |`);
      };
      row('minute, an app with 3 minutes of samples', young);
      for (const unit of UNITS) {
        const url = `/stats?unit=${unit}&start=${end - 30 * DAY}&end=${end}`;
        const get = () => service.app.inject({ url, headers: { authorization: auth } });
        // The page read again (a dashboard's refresh, another range's page sharing rows): from memory.
        const held = await timed(options.samples, get);
        row(`${unit}, rows held`, held);
        // The first read of a page: nothing held, every row read from the store.
        const first = await timed(options.samples, get, () => service.statsCache.clear());
        row(`${unit}, first read (nothing held)`, first);
        options.progress(`  ${target.name} ${unit}: p50 ${ms(percentile(held.times, 50))} ms held, ${ms(percentile(first.times, 50))} ms first read`);
      }
      // The newest page of an app publishing 50 messages/s, a request every 10 ms: each write of
      // the stats projection (every 250 ms) drops the newest rows, and the next page reads them.
      let publishing = true;
      const publisher = (async () => {
        while (publishing) {
          const res = await service.app.inject({ method: 'POST', url: '/channels/bench-live/messages', headers: { authorization: auth }, payload: { data: 'x' } });
          if (res.statusCode !== 201) throw new Error(`POST answered ${res.statusCode}: ${res.body}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      try {
        const live = await timed(options.samples, () => service.app.inject({ url: '/stats?unit=minute', headers: { authorization: auth } }), () => new Promise((r) => setTimeout(r, 10)));
        row('minute, newest page while the app publishes (50/s), a request every 10 ms', live);
      } finally {
        publishing = false;
        await publisher;
      }
    } finally {
      await service.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  if (production) {
    const client = createClickHouseClient({ url: production.CLICKHOUSE_URL });
    for (const table of ['history_messages', 'projection_state', 'presence_history_messages', 'presence_projection_state', 'stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats']) {
      await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', prefix + table)}`.text });
    }
    await client.close();
  }
  return lines.join('\n');
}

/** `n` requests one after another (`before` each, untimed): their times (sorted) and the last page's records. */
async function timed(
  n: number,
  request: () => Promise<{ statusCode: number; body: string; json: () => unknown }>,
  before?: () => unknown,
): Promise<{ times: number[]; records: number }> {
  const times: number[] = [];
  let records = 0;
  for (let i = 0; i < n; i++) {
    await before?.();
    const started = performance.now();
    const res = await request();
    times.push(performance.now() - started);
    if (res.statusCode !== 200) throw new Error(`GET /stats answered ${res.statusCode}: ${res.body}`);
    // The last page only: parsing every page (100 records, some 100 KB) in the service's process
    // made garbage whose collection then fell in the next requests' times.
    if (i === n - 1) records = (res.json() as unknown[]).length;
  }
  return { times: times.sort((a, b) => a - b), records };
}

/** A full garbage collection (the flag can be set at run time; the function comes from a new context). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

/** A day of publish events (5 apps, 200 channels, 100 bytes of data each), written to the messages topic. */
async function writeEvents(log: Log, events: number, progress: (s: string) => void): Promise<void> {
  const start = Date.now() - DAY;
  const batch = [];
  for (let i = 0; i < events; i++) {
    const appId = `app${i % 5}`;
    const channel = `ch${i % 200}`;
    const timestamp = start + i * 10;
    batch.push({
      key: channelKey(appId, channel),
      timestamp,
      value: encodeEvent({ type: 'messages.published', appId, channel, transport: 'rest', messages: [{ id: `m${i}:0`, timestamp, data: 'x'.repeat(100) }] }),
    });
    if (batch.length === 10_000) {
      await log.append(Topics.messages, batch.splice(0));
      progress(`  writing the log: ${Math.round((i / events) * 100)}%`);
    }
  }
  await log.append(Topics.messages, batch.splice(0));
}

/**
 * Raw read and rebuild of the messages topic, alternating: a round to warm up (the first read of
 * the file and the JIT made the first round's raw read half as fast as the later ones), then
 * `rounds`. The raw read starts after a full collection (the rebuild's garbage, collected in the
 * middle of the raw read, made its rate vary by a factor of two); the rebuild does not, and pays
 * for the raw read's garbage: a full collection right before it left the heap's limit so tight
 * that every other rebuild ran two mark-compacts and lost a third of its rate, which a rebuild in
 * a process of its own (npm run rebuild) does not. A fresh store for each rebuild.
 */
async function rebuildRounds(options: {
  name: string;
  log: Log;
  store: (round: number) => Promise<StatsStore>;
  rounds: number;
  progress: (s: string) => void;
}): Promise<{ raw: number[]; rebuild: number[] }> {
  const raw: number[] = [];
  const rebuild: number[] = [];
  const ends = await options.log.endOffsets(Topics.messages);
  for (let round = 0; round <= options.rounds; round++) {
    const warmUp = round === 0 ? 'warm-up: ' : '';
    collectGarbage();
    let t0 = performance.now();
    let read = 0;
    for (const [p, end] of ends) {
      for (let from = 0; from < end; ) {
        const records = await options.log.read(Topics.messages, p, from, Math.min(10_000, end - from));
        if (records.length === 0) break;
        read += records.length;
        from = records[records.length - 1].offset + 1;
      }
    }
    const rawRate = read / ((performance.now() - t0) / 1000);
    options.progress(`  ${options.name}: ${warmUp}raw log read: ${rate(rawRate)} events/s`);
    const store = await options.store(round);
    t0 = performance.now();
    // The rebuild's own stats step (npm run rebuild -- --projection stats).
    const applied = await replayStats({ log: options.log, store, isPersisted: () => false, topics: [Topics.messages] });
    const rebuildRate = applied / ((performance.now() - t0) / 1000);
    await store.close();
    options.progress(`  ${options.name}: ${warmUp}stats rebuild: ${rate(rebuildRate)} events/s`);
    if (round === 0) continue;
    raw.push(rawRate);
    rebuild.push(rebuildRate);
  }
  return { raw, rebuild };
}

/**
 * Rate of the stats rebuild beside the raw read rate of the same log: the embedded log into
 * SQLite, and, given production infrastructure, Kafka into ClickHouse.
 */
export async function replayBench(options: { events: number; production?: Record<string, string>; progress: (s: string) => void }): Promise<string> {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const rows = (setup: string, raw: string, { raw: raws, rebuild }: { raw: number[]; rebuild: number[] }): string[] => [
    `| ${setup}: raw log read (${raw}, 10,000 a batch) | ${rate(median(raws))} | 1.00 | |`,
    `| ${setup}: stats rebuild (\`replayStats\` of \`npm run rebuild\`: read + count + roll up + write samples and rollups) | ${rate(median(rebuild))} | ${(median(rebuild) / median(raws)).toFixed(2)} | ${rebuild.map((r, i) => (r / raws[i]).toFixed(2)).join(', ')} |`,
  ];
  const rounds = Number(process.env.BENCH_REPLAY_ROUNDS ?? 9);
  const lines = [
    `| Stats rebuild of ${rate(options.events)} publish events (medians of ${rounds} rounds after one to warm up) | events/s | vs raw read | each round's ratio |`,
    '|---|---:|---:|---|',
  ];
  const dir = mkdtempSync(join(tmpdir(), 'bench-replay-'));
  try {
    const log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 4 });
    await writeEvents(log, options.events, options.progress);
    await log.close();
    // A fresh handle, so both reads start from SQLite rather than from the log's memory window.
    const reader = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 4 });
    try {
      const result = await rebuildRounds({ name: 'embedded', log: reader, store: async (round) => new SqliteStatsStore(join(dir, `stats-${round}.db`)), rounds, progress: options.progress });
      lines.push(...rows('embedded (4 partitions)', 'SQLite', result));
    } finally {
      await reader.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const production = options.production;
  if (production) {
    // Fewer events and rounds: the mock broker here serves some tens of thousands of records a second.
    const events = Math.min(options.events, Number(process.env.BENCH_REPLAY_PRODUCTION_EVENTS ?? 50_000));
    const prefix = `bench_rebuild_${Date.now()}_`;
    const dataDir = mkdtempSync(join(tmpdir(), 'bench-replay-'));
    const adapters = await productionAdapters(parseConfig({ ...production, DATA_DIR: dataDir }), pino({ level: 'silent' }), { topicPrefix: `${prefix}-`, tablePrefix: prefix });
    const client = createClickHouseClient({ url: production.CLICKHOUSE_URL });
    const tables: string[] = [];
    try {
      await writeEvents(adapters.log, events, options.progress);
      const result = await rebuildRounds({
        name: 'production',
        log: adapters.log,
        store: async (round) => {
          const tablePrefix = `${prefix}r${round}_`;
          tables.push(...['stats_samples', 'stats_checkpoints', 'stats_rollups', 'stats'].map((t) => tablePrefix + t));
          return new ClickHouseStatsStore({ url: production.CLICKHOUSE_URL, tablePrefix });
        },
        rounds: Math.min(rounds, 3),
        progress: options.progress,
      });
      lines.push(...rows(`production, ${rate(events)} events (Kafka, ClickHouse 18.16)`, 'kafkajs', result));
    } finally {
      for (const table of tables) await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', table)}`.text });
      await client.close();
      await adapters.statsStore.close();
      await adapters.log.close();
      await adapters.close?.();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  return lines.join('\n');
}
