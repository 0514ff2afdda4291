// Stats benchmarks (issue 4): GET /stats over 30 days of 6-second rollups for each unit, and the
// stats projection's replay rate beside the raw log read rate, measured in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { join } from 'node:path';
import { Agent, request } from 'node:http';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { startServiceChild } from './service-child.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type Log } from '../../src/log/port.js';
import { channelKey } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { replayStats } from '../../src/cli/rebuild.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { Base, SAMPLE_MS, type Unit } from '../../src/domain/stats-sample.js';
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
 * of the unit across 30 days) on the embedded store and, when given, ClickHouse. The service runs
 * in a child process (as `npm start` runs it) and is asked over HTTP with keep-alive, as a client
 * asks: in one process with fastify's inject, the client's garbage and the server's were collected
 * together, and each collection's pause fell in whichever request was running.
 */
export async function statsQueryBench(options: {
  samples: number;
  /** Production infrastructure (the environment of production-env.ts), to measure ClickHouse too. */
  production?: Record<string, string>;
  progress: (s: string) => void;
}): Promise<string> {
  const lines = [
    '| GET /stats over 30 days of 6-second samples (432,000), with minute/hour/day/month rollups, over HTTP | unit | p50 ms | p99 ms | records | p99 / GET /time p99 |',
    '|---|---|---:|---:|---:|---:|',
  ];
  const end = Math.floor(Date.now() / SAMPLE_MS) * SAMPLE_MS;
  const targets: { name: string; env: Record<string, string>; store: (dataDir: string, tablePrefix: string) => StatsStore }[] = [
    { name: 'embedded (SQLite)', env: {}, store: (dataDir) => new SqliteStatsStore(join(dataDir, 'projections.db')) },
  ];
  const production = options.production;
  if (production) {
    const url = production.CLICKHOUSE_URL;
    targets.push({ name: 'production (ClickHouse)', env: production, store: (_dataDir, tablePrefix) => new ClickHouseStatsStore({ url, tablePrefix }) });
  }
  for (const target of targets) {
    // Twice: with the stats cache, and without it (STATS_CACHE_ROWS=0: every page a first read).
    for (const cached of [true, false]) {
      const child = await startServiceChild(`stats-${cached ? 'cached' : 'uncached'}`, { ...target.env, ...(cached ? {} : { STATS_CACHE_ROWS: '0' }) }, [], {
        apps: ['young'],
        beforeStart: async (dataDir, tablePrefix) => {
          const store = target.store(dataDir, tablePrefix);
          // An app of its own with 3 minutes of samples (a new app, a fresh service): a page of
          // minutes is short of data, and its window is widened only as far as the oldest sample.
          await seed(store, 'young', end, options.progress, end - 3 * 60_000);
          const t0 = performance.now();
          const rows = await seed(store, 'bench', end, options.progress);
          options.progress(`  ${target.name}: ${rows} samples seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
          await store.close();
        },
      });
      const http = new HttpClient(child.server.url);
      try {
        const label = cached ? 'rows held' : 'first read (nothing held)';
        const get = (path: string, auth?: string) => () => http.send('GET', path, auth);
        const young = await timed(options.samples, get('/stats?unit=minute', child.authOf('young')));
        // The baseline, in the same run, from the same client: GET /time (no store at all).
        const time = await timed(options.samples, get('/time'));
        const timeP99 = percentile(time.times, 99);
        const row = (what: string, r: { times: number[]; records: number }): void => {
          lines.push(`| ${target.name} | ${what} | ${ms(percentile(r.times, 50))} | ${ms(percentile(r.times, 99))} | ${r.records || ''} | ${(percentile(r.times, 99) / timeP99).toFixed(1)} |`);
        };
        row(`GET /time (the ${cached ? 'cached' : 'uncached'} service)`, { times: time.times, records: 0 });
        row(`minute, an app with 3 minutes of samples, ${label}`, young);
        for (const unit of UNITS) {
          const r = await timed(options.samples, get(`/stats?unit=${unit}&start=${end - 30 * DAY}&end=${end}`, child.auth));
          row(`${unit}, ${label}`, r);
          options.progress(`  ${target.name} ${unit}, ${label}: p50 ${ms(percentile(r.times, 50))} ms`);
        }
        if (!cached) continue;
        // The newest page of an app publishing 50 messages/s, a request every 10 ms: each write of
        // the stats projection (every 250 ms) drops the newest rows, and the next page reads them.
        let publishing = true;
        const publisher = (async () => {
          while (publishing) {
            const res = await http.send('POST', '/channels/bench-live/messages', child.auth, '{"data":"x"}');
            if (res.statusCode !== 201) throw new Error(`POST answered ${res.statusCode}: ${res.body}`);
            await new Promise((r) => setTimeout(r, 20));
          }
        })();
        try {
          const live = await timed(options.samples, get('/stats?unit=minute', child.auth), () => new Promise((r) => setTimeout(r, 10)));
          row('minute, newest page while the app publishes (50/s), a request every 10 ms, rows held', live);
        } finally {
          publishing = false;
          await publisher;
        }
      } finally {
        http.close();
        await child.stop();
      }
    }
  }
  return lines.join('\n');
}

/** Requests over keep-alive connections, each answer read whole. */
class HttpClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 2 });
  constructor(private readonly base: string) {}

  send(method: string, path: string, auth?: string, body?: string): Promise<{ statusCode: number; body: string }> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = auth ? { authorization: auth } : {};
      if (body !== undefined) headers['content-type'] = 'application/json';
      const req = request(`${this.base}${path}`, { method, agent: this.agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** `n` requests one after another (`before` each, untimed): their times (sorted) and the last page's records. */
async function timed(n: number, request: () => Promise<{ statusCode: number; body: string }>, before?: () => unknown): Promise<{ times: number[]; records: number }> {
  const times: number[] = [];
  let records = 0;
  for (let i = 0; i < n; i++) {
    await before?.();
    const started = performance.now();
    const res = await request();
    times.push(performance.now() - started);
    if (res.statusCode !== 200) throw new Error(`GET answered ${res.statusCode}: ${res.body}`);
    // The last page only: parsing every page (100 records, some 40 KB) made the client's garbage.
    if (i === n - 1) {
      const parsed = JSON.parse(res.body) as unknown;
      records = Array.isArray(parsed) ? parsed.length : 0;
    }
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
