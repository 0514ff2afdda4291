#!/usr/bin/env node
// Rebuild a projection from offset 0 of the log (ARCHITECTURE: "exact rebuild of every projection
// from the log after a bug fix, with the same results"), beside a running service, whose reads go
// on: the rebuild writes the same rows the projection wrote (rows are keyed and versioned by their
// log position, so rewriting one replaces it, and the service's own writes of the newest rows agree
// with it), never empties a table, and keeps checkpoints of its own. A composition root of its own:
// it reads the configuration the service reads.
//
//   npm run rebuild -- --projection stats|history|presence [--data-dir ./data]
//
// With KAFKA_BROKERS and CLICKHOUSE_URL set it reads Kafka and writes ClickHouse, otherwise the
// embedded log and store in DATA_DIR. A progress bar on stderr when it is a terminal.
import { parseArgs } from 'node:util';
import { commandAsTyped, isEntryPoint } from './command.js';
import pino from 'pino';
import { ConfigError, modeOf, parseConfig, type Config } from '../config.js';
import { adaptersFor, type Adapters } from '../adapters.js';
import { Topics, type Log, type LogRecord, type RecordVisitor, type ScanResult, type Topic } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import { eventOf } from '../log/event-shape.js';
import { loadAppsFile } from '../apps/apps-file.js';
import { loadDefaultApp } from '../apps/default-app.js';
import { AppRegistry } from '../../projections/apps/app-registry.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import type { StatsStore, StatsWriter } from '../../projections/stats/stats-store.js';
import { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryStore, PersistedEntry } from '../../projections/history/history-store.js';
import { PresenceProjection } from '../../projections/presence/presence-projection.js';
import { systemClock, type Clock } from '../clock.js';
import { StartupError } from '../startup.js';
import { existingEmbeddedLog } from '../log/embedded/existing-log.js';

export const PROJECTIONS = ['stats', 'history', 'presence'] as const;
export type RebuildTarget = (typeof PROJECTIONS)[number];

export interface RebuildProgress {
  /** records read so far, of `total` (the log's end offsets when the rebuild started) */
  done: number;
  total: number;
  /** records that are not the service's events (another producer's on Kafka: src/log/event-shape.ts), left out */
  foreign?: number;
}

/** The --help text, with the command as the user typed it (bin, npm script or node path). */
export const usage = (command = 'channel-messaging-rebuild'): string => `Usage: ${command} --projection stats|history|presence [--data-dir DIR]

Rebuilds a projection from offset 0 of the log, beside a running service (its reads go on).
  --projection NAME   stats, history (persisted message history) or presence (presence history)
  --help              this text
Other flags are the service's (--data-dir ...). With KAFKA_BROKERS and CLICKHOUSE_URL set it reads
Kafka and writes ClickHouse; otherwise the embedded log and store in DATA_DIR.`;

/** The apps the service knows: its apps file or default app, and the apps topic. */
async function loadRegistry(config: Config, log: Log, clock: Clock): Promise<AppRegistry> {
  const registry = new AppRegistry();
  if (config.appsFile) for (const app of loadAppsFile(config.appsFile, clock.now())) registry.put(app);
  else {
    // The service's default app as it stands: a rebuild makes none and rewrites no file of DATA_DIR's.
    const app = loadDefaultApp(config.dataDir, { upgrade: false });
    if (app) registry.put(app);
  }
  await readAll(log, [Topics.apps], 10_000, (records) => {
    for (const r of records) {
      const event = decodeEvent(r.value);
      if (registry.canHandle(event)) registry.evolve(event);
    }
  });
  return registry;
}

/**
 * Reads topics from offset 0 to their end offsets at the start. Partition by partition, or with
 * `byTime` across the partitions in record-time order, batch by batch (the next batch from the
 * partition read least far in time): the stats rollups a write touches are recomputed from every
 * partition's samples, so reading the partitions one after another recomputed each rollup once per
 * partition, and in time order about once (issue 14: the stats rebuild's rate).
 */
async function readAll(
  log: Log,
  topics: Topic[],
  batch: number,
  handle: (records: LogRecord[], topic: Topic) => void | Promise<void>,
  options: {
    onProgress?: (p: RebuildProgress) => void;
    beforeTopic?: (topic: Topic) => Promise<void>;
    afterTopic?: (topic: Topic) => Promise<void>;
    byTime?: boolean;
    /**
     * Where the log visits records in place (Log.scan), these serve instead of `handle`: `visit`
     * gives what applies the records of a partition from an offset on, `afterVisit` is told each
     * batch's count.
     */
    visit?: (topic: Topic, partition: number, from: number) => RecordVisitor;
    afterVisit?: (count: number) => void | Promise<void>;
    /**
     * `handle` is given every record, the service's events or not: the stats projection reads a
     * publish without decoding it and leaves out what is not an event itself (decoding each here
     * would cost its rebuild that). Absent: records that are not events are left out, and counted.
     */
    everyRecord?: boolean;
  } = {},
): Promise<number> {
  const onProgress = options.onProgress ?? (() => {});
  const ends = new Map<Topic, Map<number, number>>();
  for (const topic of topics) ends.set(topic, await log.endOffsets(topic));
  const total = [...ends.values()].reduce((n, e) => n + [...e.values()].reduce((a, b) => a + b, 0), 0);
  let done = 0;
  let foreign = 0;
  onProgress({ done, total });
  for (const topic of topics) {
    await options.beforeTopic?.(topic);
    const cursors = [...ends.get(topic)!].map(([partition, end]) => ({ partition, end, offset: 0, newest: -Infinity }));
    for (;;) {
      const open = cursors.filter((c) => c.offset < c.end);
      if (open.length === 0) break;
      // Partition by partition: the first unfinished one; by time: the one read least far.
      const cursor = options.byTime ? open.reduce((a, b) => (b.newest < a.newest ? b : a)) : open[0];
      const max = Math.min(batch, cursor.end - cursor.offset);
      let read: ScanResult;
      if (options.visit && log.scan) {
        read = await log.scan(topic, cursor.partition, cursor.offset, max, options.visit(topic, cursor.partition, cursor.offset));
        if (read.count > 0) await options.afterVisit?.(read.count);
      } else {
        const records = await log.read(topic, cursor.partition, cursor.offset, max);
        // A record that is not one of the service's events is applied by no projection (as the service's consumers leave it out).
        const events = options.everyRecord ? records : records.filter((r) => eventOf(r.value) !== undefined);
        foreign += records.length - events.length;
        if (events.length > 0) await handle(events, topic);
        const last = records[records.length - 1];
        read = { count: records.length, next: last ? last.offset + 1 : cursor.offset, lastTimestamp: last?.timestamp ?? -Infinity };
      }
      if (read.count === 0) {
        cursor.offset = cursor.end;
        continue;
      }
      done += read.count;
      cursor.offset = read.next;
      cursor.newest = read.lastTimestamp;
      onProgress({ done, total, ...(foreign > 0 ? { foreign } : {}) });
    }
    await options.afterTopic?.(topic);
  }
  return done;
}

/** The retention of a channel's persisted messages (hours), or undefined when they are not persisted. */
function retentionRule(config: Config, registry: AppRegistry): (appId: string, channel: string) => number | undefined {
  return (appId, channel) => {
    const rule = registry.rule(appId, channel);
    return rule?.persisted ? (rule.retentionHours ?? config.persistedRetentionHours) : undefined;
  };
}

/** Whether a channel's messages are persisted (the stats projection counts them twice). */
function persistedRule(config: Config, registry: AppRegistry): (appId: string, channel: string) => boolean {
  const retentionOf = retentionRule(config, registry);
  return (appId, channel) => retentionOf(appId, channel) !== undefined;
}

export interface ReplayStatsOptions {
  log: Log;
  store: StatsStore;
  isPersisted: (appId: string, channel: string) => boolean;
  topics?: Topic[];
  batch?: number;
  flushEvery?: number;
  onProgress?: (p: RebuildProgress) => void;
}

/**
 * The stats projection replayed from offset 0 of its topics into `store` (the rebuild's stats step,
 * which the bench measures). The store's checkpoints are left as they are (the service's), and
 * samples are written every `flushEvery` records rather than every batch: each write recomputes the
 * rollups it touches.
 */
export async function replayStats(options: ReplayStatsOptions): Promise<number> {
  const inner = options.store;
  const store: StatsWriter = {
    init: () => inner.init(),
    loadCheckpoint: async () => new Map(),
    write: (topic, rows) => inner.write(topic, rows, new Map()),
  };
  const projection = new StatsProjection({ store, isPersisted: options.isPersisted, flushIntervalMs: 1e9 });
  const flushEvery = options.flushEvery ?? 100_000;
  let unflushed = 0;
  const applied = async (count: number): Promise<void> => {
    unflushed += count;
    if (unflushed >= flushEvery) {
      unflushed = 0;
      await projection.flush();
    }
  };
  const read = await readAll(
    options.log,
    options.topics ?? STATS_TOPICS,
    options.batch ?? 10_000,
    async (records) => {
      projection.apply(records);
      await applied(records.length);
    },
    {
      everyRecord: true,
      // The embedded log's records read where they lie, no record object made (Log.scan).
      visit: (topic, partition, from) => projection.visitor(topic, partition, from),
      afterVisit: async (count) => {
        projection.applied();
        await applied(count);
      },
      onProgress: options.onProgress,
      beforeTopic: async (topic) => void (await projection.start(topic)),
      afterTopic: async () => {
        unflushed = 0;
        await projection.flush();
      },
      byTime: true,
    },
  );
  await projection.close();
  return read;
}

const STATS_TOPICS: Topic[] = [Topics.messages, Topics.presence, Topics.usage, Topics.connections];

/**
 * Rebuilds one projection from offset 0 into the adapters' stores (history and presence with a
 * checkpoint of their own: make the adapters with a consumerPrefix). Returns the records read.
 */
export async function rebuild(
  target: RebuildTarget,
  deps: {
    config: Config;
    adapters: Adapters;
    clock?: Clock;
    batch?: number;
  },
  onProgress: (p: RebuildProgress) => void = () => {},
): Promise<number> {
  const { config, adapters } = deps;
  const clock = deps.clock ?? systemClock;
  const batch = deps.batch ?? 10_000;
  const registry = await loadRegistry(config, adapters.log, clock);
  const retentionOf = retentionRule(config, registry);
  const common = { clock, tailMs: config.historyTailMs, retentionOf, flushIntervalMs: 1e9, maxUnstoredRows: Number.MAX_SAFE_INTEGER };
  switch (target) {
    case 'stats':
      return replayStats({
        log: adapters.log,
        store: adapters.statsStore,
        isPersisted: persistedRule(config, registry),
        batch,
        onProgress,
      });
    case 'history':
    case 'presence': {
      const projection =
        target === 'history'
          ? new HistoryProjection({ store: withoutCheckpoints(adapters.historyStore), ...common })
          : new PresenceProjection({ store: withoutCheckpoints(adapters.presenceHistoryStore), ...common });
      const history = projection instanceof PresenceProjection ? projection.history : projection;
      await projection.start();
      const read = await readAll(
        adapters.log,
        [target === 'history' ? Topics.messages : Topics.presence],
        batch,
        async (records) => {
          projection.apply(records);
          await history.flush();
        },
        { onProgress },
      );
      await history.close();
      return read;
    }
  }
}

/**
 * The store as a rebuild writes it: its rows, never a checkpoint or marks (a rebuild reads from
 * offset 0 each time and resumes from none, so a checkpoint row under its consumer name was left in
 * the store by every run, one more each time), as replayStats does for stats.
 */
function withoutCheckpoints(store: HistoryStore): HistoryStore {
  return {
    kind: store.kind,
    init: () => store.init(),
    loadCheckpoint: async () => new Map(),
    loadMarks: async () => [],
    write: (rows: PersistedEntry[]) => store.write(rows, new Map(), []),
    query: (q) => store.query(q),
    dropExpired: (now) => store.dropExpired(now),
    close: () => store.close(),
  };
}

function progressLine(p: RebuildProgress, started: number): string {
  const width = 30;
  const done = p.total === 0 ? 1 : p.done / p.total;
  const bar = '#'.repeat(Math.round(done * width)).padEnd(width, '.');
  const seconds = (Date.now() - started) / 1000;
  const rate = seconds > 0 ? Math.round(p.done / seconds) : 0;
  return `\r[${bar}] ${(done * 100).toFixed(1)}%  ${p.done}/${p.total} records  ${rate.toLocaleString('en-US')}/s`;
}

async function main(): Promise<void> {
  let target: RebuildTarget;
  let config: Config;

  try {
    const { values, tokens } = parseArgs({
      args: process.argv.slice(2),
      options: { projection: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: false,
      tokens: true,
    });
    if (values.help) {
      process.stdout.write(`${usage(commandAsTyped('channel-messaging-rebuild'))}\n`);
      return;
    }
    if (!PROJECTIONS.includes(values.projection as RebuildTarget)) {
      throw new ConfigError(`--projection must be one of ${PROJECTIONS.join(', ')}${values.projection === undefined ? '' : `, not "${String(values.projection)}"`}\n${usage(commandAsTyped('channel-messaging-rebuild'))}`);
    }
    target = values.projection as RebuildTarget;
    // The rest are the service's flags.
    const rest: string[] = [];
    for (const t of tokens ?? []) {
      if (t.kind === 'option' && t.name !== 'projection' && t.name !== 'help') rest.push(t.rawName, ...(t.value === undefined ? [] : [t.value]));
      if (t.kind === 'positional') rest.push(t.value);
    }
    config = parseConfig(process.env, rest);
  } catch (err) {
    if (err instanceof ConfigError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`${(err as Error).message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // The service's log, never a new one: opening a missing DATA_DIR made it, with an empty log and a
  // default app, and the rebuild of nothing succeeded.
  if (modeOf(config) === 'embedded') {
    try {
      existingEmbeddedLog(config.dataDir);
    } catch (err) {
      if (!(err instanceof StartupError)) throw err;
      process.stderr.write(`rebuild: ${err.message}\n`);
      process.exit(1);
    }
  }
  const logger = pino({ level: 'warn' }, pino.destination(2));
  // Beside a running service: no data-dir lock, the log read only (nothing written to it: no topic's
  // partition count stored), checkpoints of its own.
  const adapters = await adaptersFor(config, logger, { lock: false, readOnlyLog: true, consumerPrefix: `rebuild-${Date.now()}-` });
  const tty = process.stderr.isTTY === true;
  const started = Date.now();
  process.stderr.write(`rebuilding ${target} from offset 0 of the ${modeOf(config)} log\n`);
  let last = 0;
  let final: RebuildProgress = { done: 0, total: 0 };
  try {
    await rebuild(target, { config, adapters }, (p) => {
      final = p;
      if (tty && (Date.now() - last > 100 || p.done >= p.total)) {
        last = Date.now();
        process.stderr.write(progressLine(p, started));
      }
    });
    if (tty) process.stderr.write('\n');
    process.stderr.write(`rebuilt ${target}: ${final.done} records in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    if (final.foreign) process.stderr.write(`rebuild: warning: ${final.foreign} records are not the service's events (undecodable, or of another shape: another producer's), left out: replay --verify names them\n`);
  } finally {
    await adapters.statsStore.close();
    await adapters.log.close();
    await adapters.close?.();
  }
}

// Run only as a command, not when a test imports rebuild.
if (isEntryPoint(import.meta.url)) {
  main().catch((err) => {
    process.stderr.write(`rebuild failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
