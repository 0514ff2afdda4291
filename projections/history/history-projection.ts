import type { Checkpoint, LogRecord } from '../../src/log/port.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import type { StoredMessage } from '../../src/domain/message.js';
import type { Clock } from '../../src/clock.js';
import type { HistoryStore, LogMark, PersistedEntry } from './history-store.js';
import { MemoryTail } from './memory-tail.js';
import { serialOf, type HistoryEntry, type HistoryQuery } from './history-entry.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';
import { AppliedPositions } from '../../src/log/applied-positions.js';
import { FlushTimer } from '../flush-timer.js';

export interface HistoryOptions {
  store: HistoryStore;
  clock: Clock;
  /** In-memory history of every channel (spec: two minutes). Also the idempotent-publish window. */
  tailMs: number;
  /** Retention in hours of a channel's persisted history, or undefined when it is not persisted. */
  retentionOf: (appId: string, channel: string) => number | undefined;
  /** Largest delay before persisted rows are written to the store. */
  flushIntervalMs?: number;
  /** Told of a store write that failed (it is retried at the next flush). */
  onFlushError?: (err: unknown) => void;
  /**
   * Persisted rows kept for a store that does not take them (down); past it a batch is refused
   * until the store catches up (limits.ts: maxUnstoredRows).
   */
  maxUnstoredRows?: number;
  /** Bytes of those rows, counted as their log records' encoded size (limits.ts: maxUnstoredBytes). */
  maxUnstoredBytes?: number;
  /**
   * Told when the projection starts refusing batches for its store (true) and when it applies
   * one again (false): meanwhile the in-memory tail is the caller's to feed (followTail), so that
   * channels' recent history does not wait for the store.
   */
  onBehind?: (behind: boolean) => void;
  /**
   * What an event adds to history, called once per record in log order. Defaults to the
   * messages of `messages.published`; presence history passes its own (see projections/presence).
   */
  entriesOf?: (event: LogEvent) => ChannelEntries | undefined;
  /**
   * Whether it writes to its store (default true). A projection that does not is a reader: the
   * in-memory tail of every partition, merged with the store that writers fill (production mode:
   * the instances share the writing, projections/projection-set.ts).
   */
  writes?: boolean;
  /**
   * The first offset of a partition at or after a time (src/log/offset-at-time.ts): where a start
   * reads a partition with no mark older than the window from, rather than from its first record.
   */
  offsetAt?: (partition: number, timestamp: number) => Promise<number>;
}

/** How much earlier than the window a start without a mark reads: clock differences between the instances that appended. */
export const OFFSET_AT_SLACK_MS = 30_000;

export interface ChannelEntries {
  appId: string;
  channel: string;
  messages: StoredMessage[];
  /** ids supplied by clients: checked against (and added to) the idempotency index */
  clientIds?: boolean;
}

export const publishedMessages = (event: LogEvent): ChannelEntries | undefined =>
  event.type === 'messages.published' ? event : undefined;

/**
 * The history projection (ARCHITECTURE: history). evolve() applies `messages.published` events
 * (or, for presence history, presence events) to the in-memory tail of every channel and queues persisted channels' messages for the store;
 * flush() writes them with the checkpoint. Deterministic: a message whose id was already seen on
 * the channel within the tail window is a repeat of an idempotent publish and is dropped. While
 * the store is too far behind, apply() refuses batches and followTail() keeps the tail current.
 */
export class HistoryProjection {
  readonly tail: MemoryTail;
  /**
   * What query() includes, per partition: records apply() took, or followTail() added to the tail
   * (reads wait on it to include their instance's own writes: src/log/own-writes.ts).
   */
  readonly progress = new AppliedPositions();
  private readonly store: HistoryStore;
  private readonly clock: Clock;
  private checkpoint: Checkpoint = new Map();
  private storedCheckpoint: Checkpoint = new Map();
  private pending: PersistedEntry[] = [];
  private marks: LogMark[] = [];
  /** Per partition: with one for all, the partition a fetch hands over first took every mark, and a start re-read the others from their oldest. */
  private readonly lastMarkAt = new Map<number, number>();
  private flushing: Promise<void> | undefined;
  /** seal() has run: its flush was the last to write (a shared writer leaving its group). */
  private writesEnded = false;
  private readonly flushTimer: FlushTimer;
  private readonly maxUnstoredRows: number;
  private readonly maxUnstoredBytes: number;
  /** Per partition, the encoded bytes of the log records whose rows `pending` holds. */
  private pendingBytes = new Map<number, number>();
  /** The same for the rows of the write in flight (taken from `pending` until it settles). */
  private flushingBytes = 0;
  /** The rows of the write in flight: still unstored until it settles. */
  private flushingRows = 0;
  private readonly entriesOf: (event: LogEvent) => ChannelEntries | undefined;
  private lastAppliedTs = 0;
  private behind = false;
  private readonly byReference: boolean;
  private readonly writes: boolean;

  constructor(private readonly options: HistoryOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.flushTimer = new FlushTimer(options.flushIntervalMs ?? 100, () => this.flush(), options.onFlushError);
    this.maxUnstoredRows = options.maxUnstoredRows ?? DEFAULT_LIMITS.maxUnstoredRows;
    this.maxUnstoredBytes = options.maxUnstoredBytes ?? DEFAULT_LIMITS.maxUnstoredBytes;
    this.entriesOf = options.entriesOf ?? publishedMessages;
    // Published messages follow from their record alone, so the tail keeps them by reference to
    // the record's bytes; entries that depend on projection state (presence) are kept as objects.
    this.byReference = options.entriesOf === undefined;
    this.writes = options.writes ?? true;
    this.tail = new MemoryTail(options.tailMs, this.byReference ? (value) => publishedMessages(decodeEvent(value))?.messages ?? [] : undefined);
  }

  /**
   * Where consumption resumes: early enough to refill the in-memory tail (from the newest mark
   * older than the tail window), never later than the store's checkpoint.
   */
  async start(): Promise<Checkpoint> {
    await this.store.init();
    this.storedCheckpoint = await this.store.loadCheckpoint();
    this.checkpoint = new Map(this.storedCheckpoint);
    this.marks = await this.store.loadMarks();
    return this.startOf(this.storedCheckpoint.keys());
  }

  private async startOf(partitions: Iterable<number>): Promise<Checkpoint> {
    const from: Checkpoint = new Map();
    const horizon = this.tail.horizon(this.clock.now());
    for (const partition of partitions) {
      const stored = this.storedCheckpoint.get(partition) ?? 0;
      const older = this.marks.filter((m) => m.partition === partition && m.timestamp < horizon).sort((a, b) => b.offset - a.offset);
      // No mark older than the window (none written yet, a store whose marks were lost): the
      // partition's first offset in the window, found in the log; else (or if the search fails:
      // the log is read at start anyway, and reading it whole is correct) its first record.
      const start = older[0]?.offset ?? (stored > 0 && this.options.offsetAt ? await this.options.offsetAt(partition, horizon - OFFSET_AT_SLACK_MS).catch(() => 0) : 0);
      from.set(partition, Math.min(stored, start));
    }
    return from;
  }

  /**
   * Where partitions handed to this projection start (a writer sharing a topic's partitions with
   * other instances: ConsumeOptions.shared): their checkpoints and marks as the store holds them
   * now, which the writer that had them may have moved on since this one started.
   */
  async handOver(partitions: number[]): Promise<Checkpoint> {
    const stored = await this.store.loadCheckpoint();
    const marks = await this.store.loadMarks();
    const given = new Set(partitions);
    for (const p of partitions) {
      this.storedCheckpoint.set(p, stored.get(p) ?? 0);
      this.checkpoint.set(p, stored.get(p) ?? 0);
      this.lastMarkAt.delete(p);
    }
    this.marks = [...this.marks.filter((m) => !given.has(m.partition)), ...marks.filter((m) => given.has(m.partition))];
    return this.startOf(partitions);
  }

  /**
   * Partitions taken away from this projection (another instance writes them now): what it held
   * for them is dropped unwritten (the next holder starts from the store's checkpoint, so it
   * writes those rows), and its writes leave their checkpoints alone.
   */
  revoke(partitions: number[]): void {
    const taken = new Set(partitions);
    this.pending = this.pending.filter((row) => !taken.has(row.partition));
    for (const p of partitions) this.pendingBytes.delete(p);
    this.marks = this.marks.filter((m) => !taken.has(m.partition));
    for (const p of partitions) {
      this.checkpoint.delete(p);
      this.storedCheckpoint.delete(p);
      this.lastMarkAt.delete(p);
    }
  }

  /**
   * Applies one batch of log records (one partition, in order). Throws, having applied nothing,
   * while the store is too far behind: the log delivers the batch again later (Subscription), so
   * memory stays bounded through a store outage and nothing is skipped.
   */
  apply(records: LogRecord[]): void {
    if (this.unstored >= this.maxUnstoredRows || this.unstoredBytes >= this.maxUnstoredBytes) {
      const unstored = this.unstored;
      // Write now, not at the next tick: the refused batch comes back in a moment.
      if (!this.flushing) {
        void this.flush().catch((err) => {
          this.options.onFlushError?.(err);
          this.flushTimer.schedule();
        });
      }
      this.setBehind(true);
      throw new Error(`the history store is ${unstored} rows behind; the batch waits for it`);
    }
    this.setBehind(false);
    // One instant for the batch: which of its messages are too old for the in-memory window.
    const horizon = this.tail.horizon(this.clock.now());
    for (const record of records) {
      const entries = this.entriesOf(decodeEvent(record.value));
      if (entries) this.evolve(entries, record, horizon);
      this.checkpoint.set(record.partition, record.offset + 1);
    }
    const last = records[records.length - 1];
    if (last) {
      this.lastAppliedTs = Math.max(this.lastAppliedTs, last.timestamp);
      // Marks go to the store with the checkpoint; a reader writes neither (nor keeps them).
      if (this.writes && last.timestamp - (this.lastMarkAt.get(last.partition) ?? 0) >= 1000) {
        this.lastMarkAt.set(last.partition, last.timestamp);
        this.marks.push({ partition: last.partition, offset: last.offset + 1, timestamp: last.timestamp });
      }
    }
    this.progress.advance(records);
    this.flushTimer.schedule();
  }

  /**
   * Adds records the projection has not applied yet to the in-memory tail only: nothing is queued
   * for the store and the checkpoint stays, so apply() takes them again once the store catches up
   * (the tail keeps each serial once, and a message it holds is not a repeat of itself).
   */
  followTail(records: LogRecord[]): void {
    const horizon = this.tail.horizon(this.clock.now());
    for (const record of records) {
      if (record.offset < (this.checkpoint.get(record.partition) ?? 0)) continue;
      const entries = this.entriesOf(decodeEvent(record.value));
      if (entries) this.evolve(entries, record, horizon, true);
      this.lastAppliedTs = Math.max(this.lastAppliedTs, record.timestamp);
    }
    this.progress.advance(records);
  }

  /**
   * The log deleted records of `topic`'s `partition` before `next` that this projection had yet to
   * apply (ConsumeOptions.lost): they count as applied (reads waiting for them), and the checkpoint
   * moves past them (a writer's, to its store).
   */
  lost(topic: string, partition: number, next: number): void {
    if ((this.checkpoint.get(partition) ?? 0) < next) {
      this.checkpoint.set(partition, next);
      if (this.writes) this.flushTimer.schedule();
    }
    this.progress.lost(topic, partition, next);
  }

  /** Whether apply() refuses batches now (its store is maxUnstoredRows behind). */
  get refusing(): boolean {
    return this.behind;
  }

  private setBehind(behind: boolean): void {
    if (behind === this.behind) return;
    this.behind = behind;
    this.options.onBehind?.(behind);
  }

  private evolve(event: ChannelEntries, record: LogRecord, horizon: number, tailOnly = false): void {
    const alreadyStored = tailOnly || record.offset < (this.storedCheckpoint.get(record.partition) ?? 0);
    const retentionHours = this.options.retentionOf(event.appId, event.channel);
    const messages = event.messages;
    let counted = false;
    for (let index = 0; index < messages.length; index++) {
      const message = messages[index];
      const serial = serialOf(record.offset, index);
      if (event.clientIds) {
        const seen = this.tail.idSeenAt(event.appId, event.channel, message.id);
        if (seen !== undefined && message.timestamp - seen <= this.options.tailMs && !this.tail.holds(event.appId, event.channel, serial)) continue;
      }
      const persist = retentionHours !== undefined && !alreadyStored && this.writes;
      const entry: HistoryEntry | undefined =
        persist || !this.byReference ? { appId: event.appId, channel: event.channel, serial, partition: record.partition, message } : undefined;
      // Replays from far back fill only the store, not the in-memory window, unless the store
      // does not hold them yet (a reader's view of another instance's writer, a store behind).
      if (message.timestamp >= horizon || (record.offset >= this.unstoredFrom(record.partition) && this.tail.count < this.maxUnstoredRows)) {
        if (this.byReference) {
          const id = event.clientIds ? message.id : undefined;
          this.tail.addRecord(event.appId, event.channel, serial, record.partition, message.timestamp, record.value, index, id);
        } else {
          this.tail.add(entry!, event.clientIds);
        }
      }
      if (persist) {
        // The record's bytes once, with its first row held.
        if (!counted) this.pendingBytes.set(record.partition, (this.pendingBytes.get(record.partition) ?? 0) + record.value.byteLength);
        counted = true;
        this.pending.push({ ...entry!, retentionHours });
      }
    }
  }

  /** Writes queued rows and the checkpoint (`last`: then never again, seal()). Safe to call at any time; calls do not overlap. */
  async flush(last = false): Promise<void> {
    // Another caller's failed write is theirs to report: this call tries its own.
    while (this.flushing) await this.flushing.catch(() => undefined);
    if (this.writesEnded) return;
    if (last) this.writesEnded = true;
    const rows = this.pending;
    const checkpoint = new Map(this.checkpoint);
    if (!this.writes || (rows.length === 0 && sameCheckpoint(checkpoint, this.storedCheckpoint))) return;
    this.pending = [];
    const bytes = this.pendingBytes;
    this.pendingBytes = new Map();
    for (const n of bytes.values()) this.flushingBytes += n;
    this.flushingRows = rows.length;
    const horizon = this.tail.horizon(this.clock.now()) - 60_000;
    // Keep recent marks and the newest one older than the window, per partition.
    const keep = new Map<number, LogMark>();
    for (const m of this.marks) if (m.timestamp < horizon) keep.set(m.partition, m);
    this.marks = [...keep.values(), ...this.marks.filter((m) => m.timestamp >= horizon)];
    this.flushing = this.store
      .write(rows, checkpoint, this.marks)
      .then(() => {
        // Of the partitions it still holds: one handed over while the write was in flight keeps the
        // checkpoint its hand-over read (replaced wholesale, it was lost, and every record read
        // again for the tail was written again), and one taken away meanwhile stays forgotten.
        for (const [p, offset] of checkpoint) if (this.checkpoint.has(p)) this.storedCheckpoint.set(p, Math.max(offset, this.storedCheckpoint.get(p) ?? 0));
      })
      .catch((err) => {
        this.pending = rows.concat(this.pending);
        for (const [p, n] of bytes) this.pendingBytes.set(p, (this.pendingBytes.get(p) ?? 0) + n);
        throw err;
      })
      .finally(() => {
        this.flushing = undefined;
        this.flushingBytes = 0;
        this.flushingRows = 0;
      });
    await this.flushing;
  }

  /**
   * Newest timestamp up to which history is complete: what a query with no `end` may use as its
   * end so that paging with `next` while publishes continue sees each message exactly once.
   * `fencedNow` is an instant no later append can reach (MonotonicClock.fence()).
   */
  visibleUntil(caughtUp: boolean, oldestInFlight: number | undefined, fencedNow: number): number {
    if (!caughtUp) return Math.min(fencedNow, this.lastAppliedTs);
    return oldestInFlight === undefined ? fencedNow : Math.min(fencedNow, oldestInFlight - 1);
  }

  /** History of one channel: the in-memory tail merged with the store for persisted channels. */
  async query(q: HistoryQuery): Promise<HistoryEntry[]> {
    const fromTail = this.tail.query(q);
    const retentionHours = this.options.retentionOf(q.appId, q.channel);
    const now = this.clock.now();
    if (retentionHours === undefined) {
      const horizon = this.tail.horizon(now);
      return fromTail.filter((e) => e.message.timestamp >= horizon);
    }
    const start = Math.max(q.start, now - retentionHours * 3600_000);
    if (start > q.end) return [];
    const fromStore = await this.store.query({ ...q, start });
    const bySerial = new Map<number, HistoryEntry>();
    for (const e of fromStore) bySerial.set(e.serial, e);
    for (const e of fromTail) if (e.message.timestamp >= start) bySerial.set(e.serial, e);
    const merged = [...bySerial.values()].sort((a, b) =>
      q.direction === 'forwards' ? a.serial - b.serial : b.serial - a.serial,
    );
    return merged.slice(0, q.limit);
  }

  /** Next offset to apply, per partition. */
  /** Persisted rows held for the store, not yet written, a write in flight's included (GET /metrics: cm_store_unstored_rows). */
  get unstored(): number {
    return this.pending.length + this.flushingRows;
  }

  /** The encoded bytes of the log records whose rows are held unwritten (a write in flight's included). */
  get unstoredBytes(): number {
    let n = this.flushingBytes;
    for (const bytes of this.pendingBytes.values()) n += bytes;
    return n;
  }

  applied(): Checkpoint {
    return this.checkpoint;
  }

  /**
   * Drops what fell out of the in-memory window, but for entries the store does not hold yet (up
   * to maxUnstoredRows of them): a query merges the tail with the store, so a message leaves the
   * tail only once the store answers for it. Without this, a reader whose writer was late (a
   * killed instance's partitions wait for the group's session timeout) lost the messages between
   * the store's checkpoint and the window from every history read meanwhile.
   */
  evict(): number {
    return this.tail.evict(this.clock.now(), (partition) => this.unstoredFrom(partition), this.maxUnstoredRows);
  }

  /**
   * A reader's view of what the store holds, as the writers (other instances, this one's writer)
   * left it: the store's checkpoint, read again. A writer knows its own.
   */
  async followStore(): Promise<void> {
    if (this.writes) return;
    this.storedCheckpoint = await this.store.loadCheckpoint();
  }

  /** The first offset of a partition the store does not hold; a writer's partitions it does not write: none. */
  private unstoredFrom(partition: number): number {
    return this.storedCheckpoint.get(partition) ?? (this.writes ? Infinity : 0);
  }

  /**
   * A writer sharing its partitions, about to leave its group (a graceful stop): writes what it
   * holds and its checkpoints, then never again. What it applies after is the partitions' next
   * holder's to write, from the checkpoint written here: written later, after the next holder's,
   * it moved the partitions back, and their records were written again at the next hand-over.
   */
  async seal(): Promise<void> {
    this.flushTimer.cancel();
    await this.flush(true);
  }

  async close(): Promise<void> {
    this.flushTimer.cancel();
    await this.flush();
  }
}

function sameCheckpoint(a: Checkpoint, b: Checkpoint): boolean {
  if (a.size !== b.size) return false;
  for (const [p, o] of a) if (b.get(p) !== o) return false;
  return true;
}
