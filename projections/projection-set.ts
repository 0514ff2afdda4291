// The projections the service reads, built and started through the runner (projections/runner.ts):
// history, presence (members and presence history), stats and channels. The apps projection is
// the service's own (src/service.ts): it runs first, since the others ask it which channels persist.
import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { Limits } from '../src/limits.js';
import { isLogClosed, Topics, type Checkpoint, type LogPosition, type LogRecord, type Topic } from '../src/log/port.js';
import { HistoryProjection } from './history/history-projection.js';
import type { HistoryStore } from './history/history-store.js';
import { PresenceProjection } from './presence/presence-projection.js';
import { StatsProjection } from './stats/stats-projection.js';
import type { StatsStore } from './stats/stats-store.js';
import { StatsReader } from './stats/stats-reader.js';
import type { CachedStatsStore } from './stats/stats-cache.js';
import { ChannelsProjection, type ChannelsOptions } from './channels/channels-projection.js';
import type { Follower, ProjectionRunner } from './runner.js';
import type { SnapshotStore } from './snapshots.js';

export interface ProjectionStores {
  history: HistoryStore;
  presenceHistory: HistoryStore;
  stats: StatsStore;
}

export interface ProjectionSetOptions {
  /** What of the configuration the projections read (src/config.ts fills it). */
  config: { historyTailMs: number; limits: Pick<Limits, 'maxUnstoredRows' | 'maxUnstoredBytes' | 'maxStatusActivations'>; channels: Omit<ChannelsOptions, 'windowMs' | 'maxStatusActivations'> };
  logger: Logger;
  clock: Clock;
  runner: ProjectionRunner;
  stores: ProjectionStores;
  /** Retention in hours of a channel's persisted history, or undefined when it is not persisted. */
  retentionOf: (appId: string, channel: string) => number | undefined;
  /** How often projections write to their stores (default: 100 ms history, 250 ms stats). */
  flushIntervalMs?: number;
  /**
   * Several instances on one log (production mode): history rows are written by one instance each,
   * the instances sharing the messages topic's partitions (a writer per instance in one consumer
   * group), while each instance keeps every partition's recent history in memory (its reader).
   */
  shareWrites?: boolean;
  /**
   * The cache GET /stats reads through (stores.stats wraps the same store): with shareWrites, what
   * other instances write is dropped from it (projections/stats/stats-reader.ts).
   */
  statsCache?: Pick<CachedStatsStore, 'invalidate' | 'mayKeep'>;
  /** Where the in-memory projections (presence members, channels) start from (README: A bounded start); none: a full replay. */
  snapshots?: SnapshotStore;
}

/** The most records a stats read's stand-in applies (StatsReader.reflect); further behind, the read waits for the writers. */
const STATS_STAND_IN_MAX_RECORDS = 100_000;

/**
 * Writes the stats samples of a partition's records up to `upTo`, from the store's checkpoint, as
 * the partition's writer does (a projection of its own, the same rows): a read's stand-in for a
 * writer that has not written them (StatsReader.reflect).
 */
async function standInStats(o: {
  topic: Topic;
  partition: number;
  upTo: number;
  store: StatsStore;
  isPersisted: (appId: string, channel: string) => boolean;
  rollUp: boolean;
  read: (from: number, max: number) => Promise<LogRecord[]>;
}): Promise<void> {
  const projection = new StatsProjection({ store: o.store, isPersisted: o.isPersisted, rollUp: o.rollUp, flushIntervalMs: 3_600_000 });
  let next = (await projection.handOver(o.topic, [o.partition])).get(o.partition) ?? 0;
  if (o.upTo - next > STATS_STAND_IN_MAX_RECORDS) return;
  try {
    while (next < o.upTo) {
      // 2,000 records a read (publishes of up to MAX_PUBLISH_BYTES each): one partition's stand-in runs at a time (StatsReader).
      const records = await o.read(next, Math.min(2_000, o.upTo - next));
      if (records.length === 0) break;
      projection.apply(records);
      next = records[records.length - 1].offset + 1;
    }
  } finally {
    await projection.close();
  }
}

/** The topics stats counts: messages, presence, usage reports and realtime connections made. */
export const STATS_TOPICS: readonly Topic[] = [Topics.messages, Topics.presence, Topics.usage, Topics.connections];

export class ProjectionSet {
  private constructor(
    /** What reads of history use: every partition's tail, and the store. */
    readonly history: HistoryProjection,
    /** What writes history rows to the store: `history` itself, or (shareWrites) a writer of some partitions. */
    readonly historyWriter: HistoryProjection,
    readonly presence: PresenceProjection,
    /** What writes presence history rows: `presence` itself, or (shareWrites) a writer of some partitions. */
    readonly presenceWriter: PresenceProjection,
    /** What writes stats rows: of every partition, or (shareWrites) of the partitions its group gives it. */
    readonly stats: StatsProjection,
    readonly channels: ChannelsProjection,
    private readonly runner: ProjectionRunner,
    /** With shareWrites: what every instance follows of the stats topics (its cache, its own writes). */
    readonly statsReader: StatsReader | undefined,
  ) {}

  /** Builds the projections and resolves once each has caught up with the log. */
  static async start(options: ProjectionSetOptions): Promise<ProjectionSet> {
    const { config, logger, clock, runner, stores, retentionOf, flushIntervalMs, snapshots } = options;
    const maxUnstoredRows = config.limits.maxUnstoredRows;
    // While the store is too far behind (ClickHouse down), the history projection refuses batches
    // and the log holds them; a consumer of its own keeps every channel's recent history in memory
    // meanwhile.
    let tailFollower: Follower | undefined;
    const followTail = (behind: boolean): void => {
      if (behind && !tailFollower) {
        logger.warn({ maxUnstoredRows }, 'history store behind; the in-memory history follows the log on its own until it catches up');
        tailFollower = runner.follow('history-tail', Topics.messages, new Map(history.applied()), (records) => history.followTail(records), {
          lost: (partition, next) => history.progress.lost(Topics.messages, partition, next),
        });
      } else if (!behind && tailFollower) {
        const follower = tailFollower;
        tailFollower = undefined;
        void follower.stop().catch((err) => logger.warn({ err }, 'history tail follower did not stop cleanly'));
      }
    };
    const common = { clock, tailMs: config.historyTailMs, retentionOf, flushIntervalMs, maxUnstoredRows, maxUnstoredBytes: config.limits.maxUnstoredBytes };
    // A start reads a partition with no mark older than the window from its offset of that time, not from 0.
    const offsetAt = (partition: number, timestamp: number): Promise<number> => runner.offsetAt(Topics.messages, partition, timestamp);
    const shareWrites = options.shareWrites ?? false;
    // Shared writes: the reader writes nothing, so it is never behind its store; the writer's
    // batches wait in the log while the store is down.
    const history = shareWrites
      ? new HistoryProjection({ ...common, offsetAt, store: stores.history, writes: false })
      : new HistoryProjection({ ...common, offsetAt, store: stores.history, onFlushError: runner.storeWriteFailed('history'), onBehind: followTail });
    const writer = shareWrites ? new HistoryProjection({ ...common, offsetAt, store: stores.history, onFlushError: runner.storeWriteFailed('history') }) : history;
    // The member set is restored from its snapshot, or rebuilt from the whole presence topic; its history like messages'.
    // While presence history's store is too far behind, the member set goes on and its history
    // follows the log with a consumer of its own (one at a time, from where history stands).
    let presenceHistoryFollower: Promise<Follower | undefined> = Promise.resolve(undefined);
    const followPresenceHistory = (from: Checkpoint | undefined): void => {
      if (from) logger.warn({ maxUnstoredRows }, 'presence history store behind; the member set goes on, its history follows the log on its own');
      presenceHistoryFollower = presenceHistoryFollower
        .then(async (previous) => {
          await previous?.stop().catch((err) => logger.warn({ err }, 'presence history follower did not stop cleanly'));
          return from && runner.follow('presence-history', Topics.presence, from, (records) => presence.applyHistory(records), { lost: (partition, next) => presence.history.progress.lost(Topics.presence, partition, next) });
        })
        .catch((err: unknown) => {
          // A log closed meanwhile (a stop): nothing follows; the next start reads from the store's checkpoint.
          logger.warn({ err }, 'presence history follower did not start');
          return undefined;
        });
    };
    const presence = new PresenceProjection({
      ...common,
      store: stores.presenceHistory,
      onFlushError: runner.storeWriteFailed('presence'),
      onSubscriberError: (err, appId, channel) => logger.error({ err, appId, channel }, 'a subscriber of presence changes failed on one (realtime delivery); the projection goes on'),
      writes: !shareWrites,
      ...(shareWrites ? {} : { onHistoryBehind: followPresenceHistory }),
    });
    const presenceWriter = shareWrites ? new PresenceProjection({ ...common, store: stores.presenceHistory, onFlushError: runner.storeWriteFailed('presence') }) : presence;
    const isPersisted = (appId: string, channel: string): boolean => retentionOf(appId, channel) !== undefined;
    // Shared writes on a store whose rollups may be written apart (ClickHouse): the writers write
    // samples, and one instance, the holder of partition 0 of the messages writers' group, writes
    // every rollup once (projections/stats/stats-reader.ts).
    const rollupWriter = shareWrites ? stores.stats.rollupWriter : undefined;
    const stats = new StatsProjection({ store: stores.stats, isPersisted, flushIntervalMs, onFlushError: runner.storeWriteFailed('stats'), rollUp: rollupWriter === undefined });
    // The roller is chosen by the messages stats writers' group assignment (told at each hand-over,
    // whether or not the topic has traffic), not by its batches; the last word stands once its
    // consumer stopped (a graceful stop's last roll-up: ProjectionSet.close). The embedded log has
    // one process, which holds every partition (it tells no hand-over): always the roller.
    let roller = runner.logKind === 'embedded';
    const isRoller = (): boolean => roller;
    const rollerAssigned = (partitions: number[], held: boolean): void => {
      if (partitions.includes(0)) roller = held;
    };
    // Shared writes: stats rows are written by the instance holding the partition; every instance
    // follows every partition to keep its cache exact and to wait for its own writes in the store.
    const statsReader = shareWrites
      ? new StatsReader({
          store: stores.stats,
          invalidate: (touched) => options.statsCache?.invalidate(touched),
          flushOwn: () => stats.flush(),
          read: (topic, partition, from, max) => runner.read(topic, partition, from, max),
          standIn: (topic, partition, upTo) => standInStats({ topic, partition, upTo, store: stores.stats, isPersisted, rollUp: rollupWriter === undefined, read: (from, max) => runner.read(topic, partition, from, max) }),
          ...(rollupWriter ? { rollups: { writer: rollupWriter, isRoller, everyMs: flushIntervalMs, onError: runner.storeWriteFailed('stats-rollups') } } : {}),
        })
      : undefined;
    if (statsReader && options.statsCache) options.statsCache.mayKeep = (appId) => statsReader.mayKeep(appId);
    // A stand-in reads its partition: the readers are readied now, not at a stand-in's first read,
    // which on Kafka joined a group first (about 3 s: past the stand-in's half of a read's wait, so
    // the first stand-in on each topic never finished in time and the read answered without its rows).
    if (statsReader) {
      for (const topic of STATS_TOPICS) {
        runner.prepareReads(topic).catch((err: unknown) => {
          // A stop during the start closed the log: nothing to say.
          if (!isLogClosed(err)) logger.warn({ err, topic }, 'the log reader for stats stand-ins did not start; the first stand-in starts it');
        });
      }
    }
    // Channel activity, occupancy and lifecycle: in memory, restored from its snapshot or rebuilt
    // at start from the messages of the tail window (where the history projection starts), and the
    // whole presence and connections topics (members and attachments may be older than any window).
    const channels = new ChannelsProjection({ ...config.channels, windowMs: config.historyTailMs, maxStatusActivations: config.limits.maxStatusActivations });

    let historyFrom: Checkpoint = new Map();
    // Asked once, after history's start (the runner asks in the order given): the messages topic
    // resumes from the later of the snapshot and the history window's start.
    let channelsFrom: Map<Topic, Checkpoint> | undefined;
    // The store made ready; a writer holds no partition until the group hands it some.
    const holdingNone = async (start: () => Promise<Checkpoint>, revoke: (partitions: number[]) => void): Promise<Checkpoint> => {
      revoke([...(await start()).keys()]);
      return new Map();
    };
    const writing = shareWrites
      ? [
          {
            name: 'history-writer',
            topics: [Topics.messages],
            from: () => holdingNone(() => writer.start(), (partitions) => writer.revoke(partitions)),
            handle: (records: LogRecord[]) => writer.apply(records),
            lost: (topic: Topic, partition: number, next: number) => writer.lost(topic, partition, next),
            shared: { from: (partitions: number[]) => writer.handOver(partitions), revoked: (partitions: number[]) => writer.revoke(partitions) },
          },
          {
            name: 'presence-writer',
            topics: [Topics.presence],
            from: () => holdingNone(() => presenceWriter.history.start(), (partitions) => presenceWriter.revoke(partitions)),
            handle: (records: LogRecord[]) => presenceWriter.apply(records),
            lost: (topic: Topic, partition: number, next: number) => presenceWriter.history.lost(topic, partition, next),
            // A handed partition's member set from this instance's presence snapshot (bounded), else from 0.
            shared: {
              from: async (partitions: number[]) => presenceWriter.handOver(partitions, snapshots && { store: snapshots, partitionCount: await runner.partitions(Topics.presence) }),
              revoked: (partitions: number[]) => presenceWriter.revoke(partitions),
            },
          },
          // A group per topic: each instance writes the rows of the partitions it is given.
          ...STATS_TOPICS.map((topic) => ({
            name: `stats-writer-${topic}`,
            topics: [topic],
            from: () => holdingNone(() => stats.start(topic), (partitions) => stats.revoke(topic, partitions)),
            handle: (records: LogRecord[]) => stats.apply(records),
            lost: (lostTopic: Topic, partition: number, next: number) => stats.lost(lostTopic, partition, next),
            shared: {
              from: (partitions: number[]) => {
                if (topic === Topics.messages) rollerAssigned(partitions, true);
                return stats.handOver(topic, partitions);
              },
              revoked: (partitions: number[]) => {
                if (topic === Topics.messages) rollerAssigned(partitions, false);
                stats.revoke(topic, partitions);
              },
            },
          })),
        ]
      : [];
    const statsWiring = statsReader
      ? { name: 'stats', topics: STATS_TOPICS, from: (topic: Topic) => statsReader.start(topic), handle: (records: LogRecord[]) => statsReader.apply(records), lost: (topic: Topic, partition: number, next: number) => statsReader.progress.lost(topic, partition, next) }
      : { name: 'stats', topics: STATS_TOPICS, from: (topic: Topic) => stats.start(topic), handle: (records: LogRecord[]) => stats.apply(records), lost: (topic: Topic, partition: number, next: number) => stats.lost(topic, partition, next) };
    await runner.start(
      { name: 'history', topics: [Topics.messages], from: async () => (historyFrom = await history.start()), handle: (records) => history.apply(records), lost: (topic, partition, next) => history.lost(topic, partition, next) },
      ...writing,
      { name: 'presence', topics: [Topics.presence], from: () => presence.start(snapshots), handle: (records) => presence.apply(records), lost: (topic, partition, next) => presence.history.lost(topic, partition, next) },
      statsWiring,
      {
        name: 'channels',
        topics: [Topics.messages, Topics.presence, Topics.connections],
        from: async (topic) => (channelsFrom ??= await channels.start(snapshots, historyFrom)).get(topic) ?? new Map(),
        handle: (records) => channels.apply(records),
        lost: (topic, partition, next) => channels.lost(topic, partition, next),
      },
    );
    logger.info({ tail: history.tail.count, store: stores.history.kind }, 'history projection caught up');
    return new ProjectionSet(history, writer, presence, presenceWriter, stats, channels, runner, statsReader);
  }

  /**
   * Resolves once the stats store's rows include the records at these positions (this instance's
   * own appends: read-your-writes of GET /stats and of sandbox fixtures); throws after `timeoutMs`.
   * One instance: its projection applies and writes them (visible() flushes). Shared writes: the
   * store's checkpoints say when whichever instance holds the partitions has written them.
   */
  async statsReflect(targets: [Topic, LogPosition[]][], timeoutMs: number): Promise<void> {
    if (this.statsReader) await this.statsReader.reflect(targets, timeoutMs);
    else await Promise.all(targets.map(([topic, positions]) => this.stats.visible(topic, positions, timeoutMs)));
  }

  /** Whether history has applied everything its consumer has seen of the log (visibleUntil). */
  historyCaughtUp(): boolean {
    return reached(this.history.applied(), this.runner.consumer('history').highWatermarks());
  }

  /** Whether presence history has applied everything its consumer has seen of the log. */
  presenceCaughtUp(): boolean {
    return reached(this.presence.history.applied(), this.runner.consumer('presence').highWatermarks());
  }

  /**
   * Drops what fell out of the in-memory windows and what the store now holds (readers first
   * read again how far the writers have written).
   */
  async evict(): Promise<void> {
    // Without the store's word (down), what it may not hold stays, as far as the limit allows.
    const followed = this.historyWriter !== this.history ? Promise.all([this.history.followStore(), this.presence.history.followStore()]) : undefined;
    const failed = await followed?.then(() => undefined, (err: unknown) => ({ err }));
    this.history.evict();
    if (this.historyWriter !== this.history) this.historyWriter.evict();
    this.presence.history.evict();
    if (this.presenceWriter !== this.presence) this.presenceWriter.history.evict();
    if (failed) throw failed.err;
  }

  /**
   * Shared writes: the writers write what they hold, rows and checkpoints, for the last time; call
   * once they are drained and before their consumers leave their groups (ProjectionRunner.stop's
   * `lastWrites`). What they apply after is the partitions' next holders' to write. Written at
   * close(), after the next holder had written further, their checkpoints moved the partitions
   * back and the next hand-over wrote those records again. Each is tried; the first failure is thrown.
   */
  async sealWriters(): Promise<void> {
    if (this.historyWriter === this.history) return;
    const results = await Promise.allSettled([this.historyWriter.seal(), this.presenceWriter.history.seal(), this.stats.seal()]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Writes what each projection holds for its store (a sealed writer: nothing); call once their consumers stopped. Each is
   * tried even when an earlier one fails (a full disk); the first failure is thrown.
   */
  async close(): Promise<void> {
    const results = [];
    const writers = this.historyWriter !== this.history ? [this.historyWriter, this.presenceWriter] : [];
    results.push(await this.stats.close().then(() => undefined, (err: unknown) => ({ err })));
    // The roller rolls up what the stats writers' last writes wrote (sealWriters, or this close; the next start has no gap to roll by time range).
    if (this.statsReader) results.push(await this.statsReader.finish().then(() => undefined, (err: unknown) => ({ err })));
    this.statsReader?.close();
    for (const projection of [this.history, this.presence, ...writers]) results.push(await projection.close().then(() => undefined, (err: unknown) => ({ err })));
    const failed = results.find((r) => r !== undefined);
    if (failed) throw failed.err;
  }
}

function reached(applied: Checkpoint, ends: Map<number, number>): boolean {
  for (const [p, end] of ends) if ((applied.get(p) ?? 0) < end) return false;
  return true;
}
