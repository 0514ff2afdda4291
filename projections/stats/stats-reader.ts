// What an instance needs of the stats log when the instances share the writing of stats rows
// (production mode: each partition's rows are written by the instance whose writer the consumer
// group gave it, projections/projection-set.ts). Every instance answers GET /stats from the store
// through its cache (stats-cache.ts), so two things that "every instance writes every row" gave for
// free are kept here:
// - the cache drops what another instance's writer changes: this reader applies every partition
//   (writing nothing), and each record's (app, interval) is dropped from the cache as it is
//   applied; until the store's checkpoint says the record's rows are written, the app's reads keep
//   nothing they read (they would keep rows without it);
// - read your own writes: a read waits, boundedly, until the store's checkpoint of every partition
//   this instance appended to includes its appends (`reflect`), whichever instance writes them
//   (the wait, and its stand-in for stalled writers: stats-read-wait.ts).
// With `rollups` (ClickHouse), the writers write samples alone, and the rollups (minute, hour, day,
// month) are written once, by one instance, the roller (the holder of partition 0 of the messages
// writers' group): its reader has every record's touch, so it recomputes the rollups of the touches
// whose samples the writers' checkpoints say are written, then writes the rollups' checkpoint
// (`rolledTopic`). The checkpoint this reader waits on and releases its touches by is then the
// rollups' one: a GET /stats answer reads rollups.
// A start reads each topic from the samples' checkpoint, never from the rollups' when that one is
// behind or missing (no roller wrote it: a bounded start must not read presence and connections from
// 0). The records in between (samples written, rollups maybe not) are a gap: the cache keeps
// nothing until the rollups' checkpoint passes it, and the roller rolls it up by time range (the
// range of its records' sample intervals, read from the log: see `gapRange`).
import type { Checkpoint, LogPosition, LogRecord, Topic } from '../../src/log/port.js';
import type { PublishedSummary } from '../../src/log/published-summary.js';
import { AppliedPositions } from '../../src/log/applied-positions.js';
import { StatsReadWait } from './stats-read-wait.js';
import { rolledTopic, type StatsCheckpoint, type StatsRollups, type StatsWriter } from './stats-store.js';
import { SAMPLE_MS } from '../../src/domain/stats-sample.js';
import { gapIntervals, touchOf } from './stats-touches.js';

export interface StatsReaderOptions {
  /** The store's checkpoints (what the writers have written). */
  store: Pick<StatsWriter, 'init' | 'loadCheckpoint'>;
  /** Drops the held rows that samples of these (app, interval) fall in (CachedStatsStore.invalidate). */
  invalidate: (touched: { appId: string; interval: number }[]) => void;
  /** Flushes this instance's own writer (its partitions' rows are written now rather than at its next tick). */
  flushOwn?: () => Promise<void>;
  /** Touches waiting for their rows, all partitions together; past it the cache keeps nothing until the writers catch up. */
  maxPending?: number;
  /** How often the store's checkpoints are read while touches wait for their rows (default 1000 ms). */
  pollMs?: number;
  /**
   * Writes the samples of a partition's records up to `upTo` (exclusive) from the store's
   * checkpoint, as its writer would (the same rows: a sample is a function of its partition's
   * records): what a read does for its own writes when their writer has not written them by half
   * its wait (a writers' group rebalancing, a writer gone until the session timeout). See `reflect`.
   */
  standIn?: (topic: Topic, partition: number, upTo: number) => Promise<void>;
  /** Reads records of a partition (the roller finds a start's gap's time range: see `gapRange`). */
  read?: (topic: Topic, partition: number, from: number, max: number) => Promise<LogRecord[]>;
  /** The rollups are written by one instance for all (see the top of this file). */
  rollups?: {
    writer: StatsRollups;
    /** Whether this instance is the roller now. */
    isRoller: () => boolean;
    /** How often the roller looks for written samples to roll up while records wait (default 250 ms). */
    everyMs?: number;
    /** Told of a roll-up that failed (tried again at the next tick). */
    onError?: (err: unknown) => void;
  };
}

/**
 * Records of one (app, interval) in a row of a partition: `first` to `offset` (a record of the
 * same app and interval as the touch before it widens that touch). A roll-up whose samples include
 * `first` recomputes it; it is let go once the store includes `offset`.
 */
interface Touch {
  first: number;
  offset: number;
  appId: string;
  interval: number;
}

interface PartitionTouches {
  /** oldest first */
  touches: Touch[];
  /** a touch was not kept (maxPending): nothing is kept by the cache until the store passes this offset */
  overflowUntil?: number;
  /** the intervals of the touches not kept, oldest and newest (the roller recomputes every app's rollups over them) */
  overflowFrom?: number;
  overflowTo?: number;
  /**
   * A start's gap (offsets [from, to): samples written, rollups maybe not), with overflowUntil
   * set to its last offset: its range of intervals (overflowFrom, overflowTo) is found by the
   * roller when it rolls it up (`gapRange`).
   */
  gap?: { from: number; to: number; ranged?: boolean };
}

export class StatsReader {
  /** What this reader has applied of each topic (reads wait on it before they wait on the store). */
  readonly progress = new AppliedPositions();
  /** Per topic and partition: the next offset whose record the store's rows do not include yet, as last read. */
  private readonly stored = new Map<Topic, Map<number, number>>();
  private readonly pending = new Map<Topic, Map<number, PartitionTouches>>();
  /** Touches waiting, by app. */
  private readonly perApp = new Map<string, number>();
  private pendingCount = 0;
  private overflowed = 0;
  private readonly maxPending: number;
  private readonly published: PublishedSummary = { appId: '', channel: '', transport: '', count: 0, data: 0 };
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private closed = false;
  private initialized: Promise<void> | undefined;
  private rollTimer: NodeJS.Timeout | undefined;
  private rolling: Promise<void> | undefined;

  private readonly wait: StatsReadWait;

  constructor(private readonly options: StatsReaderOptions) {
    this.maxPending = options.maxPending ?? 100_000;
    const rollups = options.rollups;
    this.wait = new StatsReadWait({
      progress: this.progress,
      partitionBehind: (topic, p, next) => this.partitionBehind(topic, p, next),
      movedAt: (topic, p) => this.movedAt.get(`${topic}\u0000${p}`) ?? 0,
      readStore: (topics) => this.readStore(topics),
      samplesWritten: async (topic) => positionsOf(await options.store.loadCheckpoint(topic)),
      flushOwn: options.flushOwn,
      standIn: options.standIn,
      roller: rollups && { isRoller: () => rollups.isRoller(), rollNow: () => this.rollNow() },
      onError: (err) => rollups?.onError?.(err),
    });
  }

  /**
   * Starts where the store's samples end: records before that are in the store, which the cache
   * reads. With a roller, the rollups' checkpoint may be behind (or missing): the records in
   * between are a gap the roller rolls up by time range (see the top of this file), and until it
   * has, the cache keeps nothing.
   */
  async start(topic: Topic): Promise<Checkpoint> {
    // Once for the four topics (on ClickHouse, init is a few statements).
    await (this.initialized ??= this.options.store.init());
    const samples = positionsOf(await this.options.store.loadCheckpoint(topic));
    if (!this.options.rollups) {
      this.stored.set(topic, new Map(samples));
      this.progress.include(topic, samples);
      return samples;
    }
    const rolled = positionsOf(await this.options.store.loadCheckpoint(rolledTopic(topic)));
    const from = new Map(rolled);
    for (const [p, next] of samples) {
      const at = rolled.get(p) ?? 0;
      if (next <= at) continue;
      from.set(p, next);
      const partition = this.partitionTouches(topic, p);
      this.overflowed++;
      partition.overflowUntil = next - 1;
      partition.gap = { from: at, to: next };
    }
    this.stored.set(topic, rolled);
    this.progress.include(topic, from);
    if (this.overflowed > 0) {
      this.schedulePoll();
      this.scheduleRoll();
    }
    return from;
  }

  /**
   * The roller's last roll-up at a graceful stop (after the writers wrote what they applied):
   * what this reader applied is rolled up, so the next start has no gap to roll by time range.
   */
  async finish(): Promise<void> {
    if (!this.options.rollups?.isRoller()) return;
    await this.rollNow();
  }

  /** Whether the cache may keep what it read of `appId` (no record of it waits for its rows). */
  mayKeep(appId: string): boolean {
    return this.overflowed === 0 && !this.perApp.has(appId);
  }

  /** When each partition's checkpoint (as this reader waits on it) last moved, by `topic\0partition`. */
  private readonly movedAt = new Map<string, number>();

  /** Touches waiting for their rows (GET /metrics, tests). */
  get waiting(): number {
    return this.pendingCount;
  }

  apply(records: LogRecord[]): void {
    const last = records[records.length - 1];
    if (!last) return;
    const topic = last.topic as Topic;
    const storedUpTo = this.stored.get(topic)?.get(last.partition) ?? 0;
    const touched: { appId: string; interval: number }[] = [];
    const partition = this.partitionTouches(topic, last.partition);
    for (const record of records) {
      const touch = touchOf(record, this.published);
      if (!touch) continue;
      // Dropped from the cache even when the store has its rows already: the cache may have read
      // them before they were written.
      touched.push(touch);
      if (record.offset < storedUpTo) continue;
      const previous = partition.touches[partition.touches.length - 1];
      if (previous && previous.appId === touch.appId && previous.interval === touch.interval) previous.offset = record.offset;
      else if (this.pendingCount < this.maxPending) {
        partition.touches.push({ first: record.offset, offset: record.offset, ...touch });
        this.pendingCount++;
        this.perApp.set(touch.appId, (this.perApp.get(touch.appId) ?? 0) + 1);
      } else {
        if (partition.overflowUntil === undefined) this.overflowed++;
        partition.overflowUntil = record.offset;
        partition.overflowFrom = Math.min(partition.overflowFrom ?? Infinity, touch.interval);
        partition.overflowTo = Math.max(partition.overflowTo ?? -Infinity, touch.interval);
      }
    }
    if (touched.length > 0) this.options.invalidate(touched);
    this.progress.advance(records);
    if (this.pendingCount > 0 || this.overflowed > 0) this.schedulePoll();
    this.scheduleRoll();
  }

  /** The checkpoint reads wait on for a topic: the rollups' with a roller, else the samples'. */
  private checkpointOf(topic: Topic): string {
    return this.options.rollups ? rolledTopic(topic) : topic;
  }

  /** Whether records applied here are not in the rollups' (or samples') checkpoint as last read. */
  private behindStore(): boolean {
    if (this.pendingCount > 0 || this.overflowed > 0) return true;
    for (const [topic, stored] of this.stored) for (const [p, next] of this.progress.of(topic)) if (next > (stored.get(p) ?? 0)) return true;
    return false;
  }

  /** While records wait for their rollups, the roller (whichever instance it is now) rolls up now and then. */
  private scheduleRoll(): void {
    const rollups = this.options.rollups;
    if (!rollups || this.rollTimer || this.closed) return;
    this.rollTimer = setTimeout(() => {
      this.rollTimer = undefined;
      if (!rollups.isRoller()) {
        if (this.behindStore()) this.scheduleRoll();
        return;
      }
      void this.rollNow()
        .catch((err: unknown) => rollups.onError?.(err))
        .finally(() => {
          if (this.behindStore()) this.scheduleRoll();
        });
    }, rollups.everyMs ?? 250);
    this.rollTimer.unref();
  }

  /** One roll-up at a time (the timer's and a read's). */
  private rollNow(): Promise<void> {
    return (this.rolling ??= this.roll().finally(() => {
      this.rolling = undefined;
    }));
  }

  /**
   * The roller's step: reads the samples' checkpoints; recomputes the rollups of the touches they
   * include (and that this reader has applied); then writes the rollups' checkpoint, and lets go
   * of those touches here (the other instances' readers read that checkpoint).
   */
  private async roll(): Promise<void> {
    const rollups = this.options.rollups!;
    const topics = [...this.stored.keys()];
    const written = await Promise.all(topics.map(async (topic) => [topic, positionsOf(await this.options.store.loadCheckpoint(topic))] as const));
    const touched: Touch[] = [];
    const ranges: [number, number][] = [];
    const moved: [Topic, Map<number, number>][] = [];
    for (const [topic, samples] of written) {
      const applied = this.progress.of(topic);
      const stored = this.stored.get(topic)!;
      const upTo = new Map<number, number>();
      for (const [p, next] of samples) {
        // Records the writers wrote but this reader has not applied have no touch here yet.
        const until = Math.min(next, applied.get(p) ?? 0);
        if (until <= (stored.get(p) ?? 0)) continue;
        upTo.set(p, until);
        const part = this.pending.get(topic)?.get(p);
        if (!part) continue;
        // A touch widened past `until` (records of its interval after it) is rolled up now for
        // the records before `until` (the checkpoint written below says they are), and again once
        // the samples include the rest. Rolled by its last offset alone, its first records were
        // never rolled up while the rollups' checkpoint passed them (a read answered without them).
        for (const t of part.touches) {
          if (t.first >= until) break;
          touched.push({ ...t });
        }
        if (part.gap && !part.gap.ranged) await this.gapRange(topic, p, part);
        if (part.overflowUntil !== undefined && part.overflowFrom !== undefined) ranges.push([part.overflowFrom, part.overflowTo! + SAMPLE_MS]);
      }
      if (upTo.size > 0) moved.push([topic, upTo]);
    }
    if (moved.length === 0) return;
    await rollups.writer.rollUp(touched);
    for (const [from, to] of ranges) await rollups.writer.rollUpRange(from, to);
    for (const [topic, upTo] of moved) {
      const checkpoint: StatsCheckpoint = new Map([...upTo].map(([p, next]) => [p, { from: next, finalized: -Infinity, applied: next }]));
      await rollups.writer.writeCheckpoint(rolledTopic(topic), checkpoint);
    }
    const released: Touch[] = [];
    for (const [topic, upTo] of moved) this.storeMoved(topic, upTo, released);
    if (released.length > 0) this.options.invalidate(released);
  }

  /** A start's gap's intervals, onto `part` (overflowFrom, overflowTo): see `gapIntervals`. */
  private async gapRange(topic: Topic, partition: number, part: PartitionTouches): Promise<void> {
    if (!this.options.read) throw new Error('the stats reader cannot read the log: a gap cannot be rolled up');
    const range = await gapIntervals(this.options.read, topic, partition, part.gap!, this.published);
    part.gap!.ranged = true;
    if (!range) return;
    part.overflowFrom = Math.min(part.overflowFrom ?? Infinity, range[0]);
    part.overflowTo = Math.max(part.overflowTo ?? -Infinity, range[1]);
  }

  /**
   * Resolves once the store's rows include the records at `positions` of each topic (this
   * instance's own appends, whichever instance writes their partitions), and this reader has
   * applied them; throws after `timeoutMs` (StatsWritersBehind when the writers are behind). How
   * it waits and stands in for stalled writers: stats-read-wait.ts.
   */
  reflect(targets: [Topic, LogPosition[]][], timeoutMs: number): Promise<void> {
    return this.wait.reflect(targets, timeoutMs);
  }

  /** Reads that stood in for the writers (see `reflect`). */
  get standIns(): number {
    return this.wait.standIns;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    clearTimeout(this.rollTimer);
    this.rollTimer = undefined;
  }

  /**
   * How many records before `next` of a partition the store's rows may lack: none once its
   * checkpoint passed `next`, and none either once this reader applied them all and no record it
   * counts waits for its rows there (no touch, no overflow or start's gap). Records that change
   * no stats row (an instance's `instance.alive`, a connection closed) need no write: a read no
   * longer waits for a writer to pass them, which across a rebalance meant a stand-in for every
   * heartbeat of the connections topic.
   */
  private partitionBehind(topic: Topic, partition: number, next: number): number {
    const at = this.stored.get(topic)?.get(partition) ?? 0;
    if (at >= next) return 0;
    if (this.progress.nextOf(topic, partition) >= next) {
      const part = this.pending.get(topic)?.get(partition);
      if (!part || (part.overflowUntil === undefined && (part.touches.length === 0 || part.touches[0].first >= next))) return 0;
    }
    return next - at;
  }

  private partitionTouches(topic: Topic, partition: number): PartitionTouches {
    let byPartition = this.pending.get(topic);
    if (!byPartition) this.pending.set(topic, (byPartition = new Map()));
    let touches = byPartition.get(partition);
    if (!touches) byPartition.set(partition, (touches = { touches: [] }));
    return touches;
  }

  /** Reads the store's checkpoints of `topics` and lets go of the touches their rows now include. */
  private async readStore(topics: Topic[]): Promise<void> {
    const read = await Promise.all(topics.map(async (topic) => [topic, positionsOf(await this.options.store.loadCheckpoint(this.checkpointOf(topic)))] as const));
    const released: Touch[] = [];
    for (const [topic, positions] of read) this.storeMoved(topic, positions, released);
    if (released.length > 0) this.options.invalidate(released);
  }

  /** The store's rows now include the records before `positions`: the touches before them let go. */
  private storeMoved(topic: Topic, positions: Map<number, number>, released: Touch[]): void {
    let stored = this.stored.get(topic);
    if (!stored) this.stored.set(topic, (stored = new Map()));
    for (const [p, next] of positions) {
      if (next <= (stored.get(p) ?? 0)) continue;
      stored.set(p, next);
      this.movedAt.set(`${topic}\u0000${p}`, Date.now());
      this.release(topic, p, next, released);
    }
  }

  /**
   * Lets go of the touches of a partition before `next`; onto `released`, whose rows the cache
   * drops again: a read that began before the store had them must not keep what it read.
   */
  private release(topic: Topic, partition: number, next: number, released: Touch[]): void {
    const touches = this.pending.get(topic)?.get(partition);
    if (!touches) return;
    let gone = 0;
    while (gone < touches.touches.length && touches.touches[gone].offset < next) {
      const { appId } = touches.touches[gone];
      released.push(touches.touches[gone]);
      const left = (this.perApp.get(appId) ?? 1) - 1;
      if (left > 0) this.perApp.set(appId, left);
      else this.perApp.delete(appId);
      gone++;
    }
    if (gone > 0) touches.touches.splice(0, gone);
    this.pendingCount -= gone;
    if (touches.overflowUntil !== undefined && touches.overflowUntil < next) {
      touches.overflowUntil = undefined;
      touches.overflowFrom = undefined;
      touches.overflowTo = undefined;
      touches.gap = undefined;
      this.overflowed--;
    }
  }

  /** While touches wait, the store's checkpoints are read now and then (a read also reads them). */
  private schedulePoll(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const topics = [...this.pending].filter(([, parts]) => [...parts.values()].some((t) => t.touches.length > 0 || t.overflowUntil !== undefined)).map(([topic]) => topic);
      this.polling ??= this.readStore(topics)
        .catch(() => undefined)
        .finally(() => {
          this.polling = undefined;
          if (this.pendingCount > 0 || this.overflowed > 0) this.schedulePoll();
        });
    }, this.options.pollMs ?? 1000);
    this.timer.unref();
  }
}

/** The next offset the store's rows do not include, per partition (`from` for a checkpoint written without `applied`). */
function positionsOf(checkpoint: StatsCheckpoint): Map<number, number> {
  return new Map([...checkpoint].map(([p, c]) => [p, c.applied ?? c.from]));
}
