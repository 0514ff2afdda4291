import { LIFECYCLE_CHANNEL } from '../../src/domain/channel.js';
import type { Checkpoint, LogRecord, RecordVisitor } from '../../src/log/port.js';
import { decodedEvent } from '../../src/log/event-codec.js';
import { eventOf } from '../../src/log/event-shape.js';
import type { LogEvent } from '../../src/domain/events.js';
import { readPublished, type PublishedSummary } from '../../src/log/published-summary.js';
import { dataSize } from '../../src/domain/message.js';
import { BASE_COUNTERS, fixtureIntervalHeld, intervalOf, SAMPLE_MS } from '../../src/domain/stats-sample.js';
import type { StatsCheckpoint, StatsRow, StatsWriter } from './stats-store.js';
import { FlushTimer } from '../flush-timer.js';
import {
  addNamed,
  CHANNELS_OPENED,
  CONNECTIONS_OPENED,
  INBOUND,
  INBOUND_PRESENCE,
  KEEP_MS,
  MAX_FIXTURE_LEVEL,
  named,
  partitionState,
  sealOpen,
  STORED,
  STORED_PRESENCE,
  type AppSample,
  type PartitionState,
  type Sample,
} from './stats-samples.js';

export interface StatsProjectionOptions {
  store: StatsWriter;
  /** whether a channel's messages are persisted (counted twice, spec quota rules) */
  isPersisted: (appId: string, channel: string) => boolean;
  flushIntervalMs?: number;
  /** Told of a store write that failed (it is retried at the next flush). */
  onFlushError?: (err: unknown) => void;
  /** Whether its writes recompute the rollups their samples fall in (default true; false: the roller does, StatsRollups). */
  rollUp?: boolean;
}

/**
 * The stats projection (ARCHITECTURE: stats): rolls published messages, presence events, usage
 * reports and realtime connections made up into 6-second samples per app. Replay-safe by construction:
 * - a sample is a function of one partition's records alone, keyed by (app, interval, topic,
 *   partition) and versioned by its last offset, so rewriting it gives the same row;
 * - samples close by record time (never by wall time or by when they were written); a record
 *   for a closed interval gets a row of its own, keyed by its offset (its `slot`);
 * - the checkpoint goes back to the newest final sample, which a replay rebuilds as context
 *   (for `channels.opened`) but does not write again.
 */
/** The newest by interval of `final` and the slot-0 samples of `closed` (a late record's own row is never final). */
function newestFinal(closed: Sample[], final: Sample | undefined): Sample | undefined {
  for (const s of closed) if (s.slot === 0 && (!final || s.interval > final.interval)) final = s;
  return final;
}

interface Waiter {
  topic: string;
  partition: number;
  offset: number;
  resolve: () => void;
}

export class StatsProjection {
  static readonly handles = ['messages.published', 'channel.used', 'presence.changed', 'usage.reported', 'stats.fixture', 'connection.opened'] as const;
  private readonly partitions = new Map<string, Map<number, PartitionState>>();
  private stored = new Map<string, StatsCheckpoint>();
  private readonly flushTimer: FlushTimer;
  private flushing: Promise<void> | undefined;
  /** seal() has run: its flush was the last to write (a shared writer leaving its groups). */
  private writesEnded = false;
  /** Callers waiting for a record to be applied (read-your-writes of sandbox stats fixtures). */
  private waiters: Waiter[] = [];

  constructor(private readonly options: StatsProjectionOptions) {
    this.flushTimer = new FlushTimer(options.flushIntervalMs ?? 250, () => this.flush(), options.onFlushError);
  }

  canHandle(event: LogEvent): boolean {
    return (StatsProjection.handles as readonly string[]).includes(event.type);
  }

  async start(topic: string): Promise<Checkpoint> {
    await this.options.store.init();
    const stored = await this.options.store.loadCheckpoint(topic);
    this.stored.set(topic, stored);
    return new Map([...stored].map(([p, c]) => [p, c.from]));
  }

  /**
   * Where partitions of `topic` handed to this projection start (a writer sharing the topic's
   * partitions with other instances: ConsumeOptions.shared): their checkpoints as the store holds
   * them now, which the writer that had them may have moved on since this one started. What this
   * projection held of them before is dropped (rebuilt from the checkpoint).
   */
  async handOver(topic: string, partitions: number[]): Promise<Checkpoint> {
    const stored = await this.options.store.loadCheckpoint(topic);
    let mine = this.stored.get(topic);
    if (!mine) this.stored.set(topic, (mine = new Map()));
    const from: Checkpoint = new Map();
    for (const p of partitions) {
      this.partitions.get(topic)?.delete(p);
      const c = stored.get(p);
      if (c) mine.set(p, c);
      else mine.delete(p);
      from.set(p, c?.from ?? 0);
    }
    return from;
  }

  /**
   * Partitions of `topic` taken away from this projection (another instance writes them now): what
   * it held of them is dropped unwritten (the next holder starts from the store's checkpoint, so it
   * writes those rows), and its writes leave their checkpoints alone.
   */
  revoke(topic: string, partitions: number[]): void {
    for (const p of partitions) {
      this.partitions.get(topic)?.delete(p);
      this.stored.get(topic)?.delete(p);
    }
  }

  private state(topic: string, partition: number, offset: number): PartitionState {
    let byTopic = this.partitions.get(topic);
    if (!byTopic) this.partitions.set(topic, (byTopic = new Map()));
    let s = byTopic.get(partition);
    if (!s) {
      s = partitionState(this.stored.get(topic)?.get(partition), offset);
      byTopic.set(partition, s);
    }
    return s;
  }

  apply(records: LogRecord[]): void {
    for (const record of records) {
      const state = this.state(record.topic, record.partition, record.offset);
      this.applyRecord(state, record.offset, record.timestamp, record.value, 0, record.value.length, decodedEvent(record.value));
    }
    this.applied();
  }

  /**
   * The log deleted records of `topic`'s `partition` before `next` that this projection had yet to
   * apply (ConsumeOptions.lost; README: Records the log deleted before they were applied): they
   * count as applied, and the checkpoint moves past them, so that a start after it neither reads
   * from before the log's start again nor tells of the loss again. The partition's open samples,
   * which hold records before the loss that no replay can read again, close: written as they are
   * and final in the store (a record after the loss in one of their intervals gets a row of its own,
   * as a late record does, instead of a sample rebuilt without them that would replace theirs).
   */
  lost(topic: string, partition: number, next: number): void {
    const stored = this.stored.get(topic)?.get(partition);
    const fresh = !this.partitions.get(topic)?.has(partition);
    const state = this.state(topic, partition, stored?.from ?? 0);
    if (state.next >= next) return;
    if (fresh && (stored?.applied ?? 0) > next) state.contextUntil = stored!.applied!;
    sealOpen(state, Math.max(next, state.contextUntil));
    state.lostBefore = Math.max(state.lostBefore, next);
    state.next = next;
    this.applied();
  }

  /**
   * What applies the records of one partition that a log visits in place (Log.scan: a rebuild's
   * read), from `from` on; call `applied` after each batch.
   */
  visitor(topic: string, partition: number, from: number): RecordVisitor {
    const state = this.state(topic, partition, from);
    return (offset, timestamp, bytes, start, end) => this.applyRecord(state, offset, timestamp, bytes, start, end, undefined);
  }

  /** After a batch: the next flush scheduled, the callers waiting for these records told. */
  applied(): void {
    this.flushTimer.schedule();
    if (this.waiters.length > 0) this.wake();
  }

  /** The summary of the publish being applied (one object for all: this runs for every record). */
  private readonly published: PublishedSummary = { appId: '', channel: '', transport: '', count: 0, data: 0 };

  /** Applies the record whose value is bytes[start, end) (its event too, when it is decoded already). */
  private applyRecord(state: PartitionState, offset: number, timestamp: number, bytes: Uint8Array, start: number, end: number, decoded: LogEvent | undefined): void {
    // The record's own time counts: whether its interval has closed does not depend on where
    // a replay starts (the first record after a resume had no newest time before it).
    if (timestamp > state.newest) state.newest = timestamp;
    // A publish not decoded yet is read for its counts alone (a rebuild's hot path).
    if (decoded === undefined && readPublished(bytes, start, end, this.published)) this.countPublished(state, this.published, timestamp, offset);
    else {
      // undefined: not one of the service's events (another producer's record read by a stand-in: src/log/event-shape.ts).
      const event = decoded ?? eventOf(start === 0 && end === bytes.length ? bytes : bytes.subarray(start, end));
      if (event && this.canHandle(event)) this.evolve(state, event, timestamp, offset);
    }
    state.next = offset + 1;
    this.closeSamples(state);
  }

  private appliedBeyond(topic: string, partition: number, offset: number): boolean {
    return (this.partitions.get(topic)?.get(partition)?.next ?? 0) > offset;
  }

  private wake(): void {
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (this.appliedBeyond(w.topic, w.partition, w.offset)) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  /**
   * Resolves once the records at `positions` of `topic` are applied and written to the store, so a
   * query sees them (read-your-writes); rejects after `timeoutMs`.
   */
  async visible(topic: string, positions: { partition: number; offset: number }[], timeoutMs: number): Promise<void> {
    const pending = positions.filter((p) => !this.appliedBeyond(topic, p.partition, p.offset));
    if (pending.length > 0) {
      const mine: Waiter[] = [];
      const applied = Promise.all(
        pending.map((p) => new Promise<void>((resolve) => {
          const w = { topic, ...p, resolve };
          mine.push(w);
          this.waiters.push(w);
        })),
      );
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          applied,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`not applied within ${timeoutMs} ms`)), timeoutMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => !mine.includes(w));
      }
    }
    await this.flush();
  }

  /**
   * The sample a record counts in: its interval's open sample; or, when that interval has closed
   * (by record time, so the same for every replay), a row of its own keyed by the record's offset.
   */
  private sampleFor(state: PartitionState, timestamp: number, offset: number): Sample {
    const interval = intervalOf(timestamp);
    if (interval <= state.sealed && offset >= state.sealedFrom) return this.ownRow(state, interval, offset);
    const current = state.current;
    if (current !== undefined && current.interval === interval) {
      current.lastOffset = offset;
      return current;
    }
    let sample = state.open.get(interval);
    if (!sample && this.closable(interval, state)) return this.ownRow(state, interval, offset);
    // Replayed after a loss into a row written already (contextUntil): final, never written again.
    if (offset < state.contextUntil && interval > state.sealed) state.sealed = state.finalizedInStore = interval;
    if (!sample) {
      state.open.set(interval, (sample = { interval, slot: 0, firstOffset: offset, lastOffset: offset, apps: new Map() }));
      if (interval < state.oldestOpen) state.oldestOpen = interval;
    }
    sample.lastOffset = offset;
    state.dirty.add(interval);
    state.current = sample;
    return sample;
  }

  /** A sample of one record, keyed by its offset (written again by a replay: the same row), written at the next flush and let go. */
  private ownRow(state: PartitionState, interval: number, offset: number): Sample {
    const sample: Sample = { interval, slot: offset + 1, firstOffset: offset, lastOffset: offset, apps: new Map() };
    state.unwritten.push(sample);
    return sample;
  }

  private closable(interval: number, state: PartitionState): boolean {
    return interval + SAMPLE_MS + KEEP_MS <= state.newest;
  }

  private appOf(sample: Sample, appId: string): AppSample {
    let app = sample.apps.get(appId);
    if (!app) sample.apps.set(appId, (app = { counters: new Float64Array(BASE_COUNTERS.length), channels: new Map(), fixtureChannels: 0, connections: 0 }));
    return app;
  }

  private evolve(state: PartitionState, event: LogEvent, timestamp: number, offset: number): void {
    switch (event.type) {
      case 'messages.published': {
        let data = 0;
        for (const m of event.messages) data += dataSize(m.data, m.encoding);
        this.countPublished(state, { appId: event.appId, channel: event.channel, transport: event.transport, count: event.messages.length, data }, timestamp, offset);
        break;
      }
      case 'channel.used': {
        // A realtime attachment (issue 28): the channel is active without a message published.
        const sample = this.sampleFor(state, timestamp, offset);
        this.channelActive(state, sample, this.appOf(sample, event.appId), event.appId, event.channel);
        break;
      }
      case 'presence.changed': {
        const app = this.appOf(this.sampleFor(state, timestamp, offset), event.appId);
        const data = dataSize(event.event.data, event.event.encoding);
        // A drop is the service's own leave for a connection that went, and `held` its note of a
        // resume on another instance: no client sent them, and `held` is in no presence history.
        if (event.event.action === 'held') break;
        if (event.event.action !== 'drop') {
          app.counters[INBOUND_PRESENCE.count] += 1;
          app.counters[INBOUND_PRESENCE.data] += data;
        }
        if (this.options.isPersisted(event.appId, event.channel)) {
          app.counters[STORED_PRESENCE.count] += 1;
          app.counters[STORED_PRESENCE.data] += data;
        }
        break;
      }
      case 'usage.reported': {
        const app = this.appOf(this.sampleFor(state, event.intervalStart, offset), event.appId);
        addNamed(app.counters, event.counters);
        // Each instance's reading once per interval: the instances add up.
        app.connections += event.connections ?? 0;
        break;
      }
      case 'stats.fixture': {
        // One the route refuses now, in a log from before: no store holds its interval.
        if (!fixtureIntervalHeld(event.intervalStart)) break;
        // A row of its own: one of the future was an open sample, held until its time came (review finding).
        const app = this.appOf(this.ownRow(state, intervalOf(event.intervalStart), offset), event.appId);
        addNamed(app.counters, event.counters);
        app.fixtureChannels = Math.min(MAX_FIXTURE_LEVEL, app.fixtureChannels + (event.channels ?? 0));
        app.connections = Math.min(MAX_FIXTURE_LEVEL, app.connections + (event.connections ?? 0));
        break;
      }
      case 'connection.opened':
        // Made, not resumed: a resume (here or on another instance) is the same connection.
        if (!event.resumed) this.appOf(this.sampleFor(state, timestamp, offset), event.appId).counters[CONNECTIONS_OPENED] += 1;
        break;
      default:
        break;
    }
  }

  private countPublished(state: PartitionState, event: PublishedSummary, timestamp: number, offset: number): void {
    const sample = this.sampleFor(state, timestamp, offset);
    // The service's own lifecycle messages: no client published them, and the metachannel is
    // not a channel in use (what is sent of them to subscribers counts, as outbound).
    if (event.channel === LIFECYCLE_CHANNEL) return;
    const app = this.appOf(sample, event.appId);
    const keys = event.transport === 'realtime' ? INBOUND.realtime : INBOUND.rest;
    app.counters[keys.count] += event.count;
    app.counters[keys.data] += event.data;
    if (this.channelActive(state, sample, app, event.appId, event.channel)) {
      app.counters[STORED.count] += event.count;
      app.counters[STORED.data] += event.data;
    }
  }

  /**
   * The channel is active in the sample (published to, or attached: `channel.used`); opened if it
   * was not in the sample before. Returns whether its messages are persisted: asked once a sample
   * (a rule changed inside a sample counts from the next one; a rebuild asks its registry as loaded).
   */
  private channelActive(state: PartitionState, sample: Sample, app: AppSample, appId: string, channel: string): boolean {
    let persisted = app.channels.get(channel);
    if (persisted === undefined) {
      persisted = this.options.isPersisted(appId, channel);
      app.channels.set(channel, persisted);
      if (sample.slot === 0 && !this.activeIn(state, sample.interval - SAMPLE_MS, appId, channel)) app.counters[CHANNELS_OPENED] += 1;
    }
    return persisted;
  }

  /** Was the channel active in the sample of `interval` (same partition)? */
  private activeIn(state: PartitionState, interval: number, appId: string, channel: string): boolean {
    const sample =
      state.open.get(interval) ??
      state.unwritten.find((s) => s.interval === interval && s.slot === 0) ??
      (state.final?.interval === interval ? state.final : undefined);
    return sample?.apps.get(appId)?.channels.has(channel) ?? false;
  }

  /** Closes samples that the partition's newest record has left KEEP_MS behind. */
  private closeSamples(state: PartitionState): void {
    // Most records close none: one comparison with the oldest open interval.
    if (!this.closable(state.oldestOpen, state)) return;
    // Open intervals are few (KEEP_MS / SAMPLE_MS).
    state.oldestOpen = Infinity;
    for (const interval of [...state.open.keys()].sort((a, b) => a - b)) {
      if (!this.closable(interval, state)) {
        state.oldestOpen = interval;
        break;
      }
      const sample = state.open.get(interval)!;
      state.open.delete(interval);
      if (state.current === sample) state.current = undefined;
      if (state.dirty.has(interval)) {
        state.dirty.delete(interval);
        state.unwritten.push(sample);
      } else {
        state.final = sample;
      }
    }
  }

  private rowsOf(topic: string, partition: number, sample: Sample, state: PartitionState): StatsRow[] {
    // A sample final in the store is rebuilt for context only. A late record's row (its own slot)
    // is written again: the same row, and perhaps the crash came before it was written at all.
    if (sample.slot === 0 && sample.interval <= state.finalizedInStore) return [];
    return [...sample.apps].map(([appId, app]) => ({
      appId,
      interval: sample.interval,
      topic,
      partition,
      slot: sample.slot,
      version: sample.lastOffset,
      counters: named(app.counters),
      channels: Math.min(MAX_FIXTURE_LEVEL, app.channels.size + app.fixtureChannels),
      connections: app.connections,
    }));
  }

  /** Writes closed and changed open samples of every partition, then the checkpoints (`last`: then never again, seal()). */
  async flush(last = false): Promise<void> {
    // Another caller's failed write is theirs to report: this call tries its own.
    while (this.flushing) await this.flushing.catch(() => undefined);
    if (this.writesEnded) return;
    if (last) this.writesEnded = true;
    this.flushing = (async () => {
      for (const [topic, byPartition] of this.partitions) {
        const rows: StatsRow[] = [];
        const checkpoint: StatsCheckpoint = new Map();
        const written: [PartitionState, Sample[], [number, number][]][] = [];
        for (const [partition, state] of byPartition) {
          if (state.next < state.contextUntil) continue;
          const closed = [...state.unwritten];
          const dirty: [number, number][] = [...state.dirty].map((i) => [i, state.open.get(i)!.lastOffset]);
          for (const sample of closed) rows.push(...this.rowsOf(topic, partition, sample, state));
          for (const [interval] of dirty) rows.push(...this.rowsOf(topic, partition, state.open.get(interval)!, state));
          written.push([state, closed, dirty]);
          // The newest final sample by interval: a closed sample written now can be older than
          // one that closed with it already written (a late record changed the older one).
          const final = newestFinal(closed, state.final);
          const firstOffsets = [...state.open.values(), ...state.unwritten.slice(closed.length)].map((s) => s.firstOffset);
          if (final) firstOffsets.push(final.firstOffset);
          checkpoint.set(partition, {
            // Never before records the log deleted (lost()): the samples that held them are final.
            from: Math.max(firstOffsets.reduce((min, o) => Math.min(min, o), state.next), state.lostBefore),
            finalized: Math.max(final?.interval ?? -Infinity, state.finalizedInStore, state.sealed),
            // Every record before it is in the rows written so far, or in these.
            applied: state.next,
          });
        }
        // Records that changed no sample (a connection closed) move `applied` on: written too, so
        // that an instance waiting for its own writes in the store sees them (stats-reader.ts).
        if (written.every(([state, closed, dirty]) => closed.length === 0 && dirty.length === 0 && state.writtenNext === state.next)) continue;
        const nexts = written.map(([state]) => state.next);
        await this.options.store.write(topic, rows, checkpoint, this.options.rollUp === false ? { rollUp: false } : undefined);
        for (const [i, [state, closed, dirty]] of written.entries()) {
          state.writtenNext = nexts[i];
          state.unwritten.splice(0, closed.length);
          state.final = newestFinal(closed, state.final);
          // Records applied while writing make a sample dirty again; only unchanged ones are clean.
          for (const [interval, lastOffset] of dirty) {
            if (state.open.get(interval)?.lastOffset !== lastOffset) continue;
            state.dirty.delete(interval);
            if (state.current?.interval === interval) state.current = undefined;
          }
        }
      }
    })().finally(() => {
      this.flushing = undefined;
    });
    await this.flushing;
  }

  /**
   * A writer sharing its partitions, about to leave its groups (a graceful stop): writes its
   * samples and checkpoints, then never again (HistoryProjection.seal: the next holders write
   * what it applies after, from these checkpoints, which a later write moved back).
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
