// The stats projection's samples and per-partition state (projections/stats/stats-projection.ts).
import { Base, BASE_COUNTERS, type Counters } from '../../src/domain/stats-sample.js';
import type { StatsCheckpoint } from './stats-store.js';

/**
 * A sample's counters: one number per base counter, by its position in BASE_COUNTERS (an index into
 * an array, not a string key into a dictionary: this runs for every record of a rebuild).
 */
export type CounterArray = Float64Array;
export const INDEX = new Map(BASE_COUNTERS.map((name, i) => [name, i]));
const at = (name: string): number => INDEX.get(name)!;

// Counter positions of the per-record path, found once.
export const INBOUND = {
  rest: { count: at(Base.inbound('rest', 'messages', 'count')), data: at(Base.inbound('rest', 'messages', 'data')) },
  realtime: { count: at(Base.inbound('realtime', 'messages', 'count')), data: at(Base.inbound('realtime', 'messages', 'data')) },
};
export const INBOUND_PRESENCE = { count: at(Base.inbound('realtime', 'presence', 'count')), data: at(Base.inbound('realtime', 'presence', 'data')) };
export const STORED = { count: at(Base.stored('messages', 'count')), data: at(Base.stored('messages', 'data')) };
export const STORED_PRESENCE = { count: at(Base.stored('presence', 'count')), data: at(Base.stored('presence', 'data')) };
export const CHANNELS_OPENED = at(Base.channelsOpened);
export const CONNECTIONS_OPENED = at(Base.connectionsOpened);

/** Adds an event's counters by name (usage reports, fixtures); a name no release knows is not kept, as no store keeps it. */
export function addNamed(into: CounterArray, from: Counters): void {
  for (const name in from) {
    const i = INDEX.get(name);
    const v = from[name];
    if (i !== undefined && typeof v === 'number' && v) into[i] += v;
  }
}

export function named(counters: CounterArray): Counters {
  const out: Counters = {};
  for (let i = 0; i < counters.length; i++) if (counters[i]) out[BASE_COUNTERS[i]] = counters[i];
  return out;
}

export interface AppSample {
  counters: CounterArray;
  /** the channels published to or attached in the sample, each with whether its messages are persisted */
  channels: Map<string, boolean>;
  /** channels of sandbox fixtures (a number each names, added up): counted, not each held as a key */
  fixtureChannels: number;
  /** open realtime connections: the instances' readings, added up */
  connections: number;
}

/** UInt32 in ClickHouse. A fixture of 30,000,000 channels was as many keys: a Map holds 2^24 (review finding). */
export const MAX_FIXTURE_LEVEL = 2 ** 32 - 1;

/** A sample stays open (and rewritable) until its partition's newest record is this much later. */
export const KEEP_MS = 60_000;

export interface Sample {
  interval: number;
  /** 0 for the sample itself; offset + 1 for a record that arrived after its interval closed */
  slot: number;
  firstOffset: number;
  lastOffset: number;
  apps: Map<string, AppSample>;
}

export interface PartitionState {
  /** open samples by interval */
  open: Map<number, Sample>;
  /** the oldest interval in `open` (Infinity when none) */
  oldestOpen: number;
  /** the open sample the last record counted in, while it is in `dirty` (most records count in it too) */
  current: Sample | undefined;
  /** closed samples not yet written */
  unwritten: Sample[];
  /** the newest closed sample that is written: context for the next one, never written again */
  final?: Sample;
  /** from the stored checkpoint: samples up to here are final in the store */
  finalizedInStore: number;
  dirty: Set<number>;
  newest: number;
  next: number;
  /** `next` as the store's checkpoint last took it (what the rows written include) */
  writtenNext: number;
  /**
   * Slot-0 samples up to this interval are final in the store and not rebuilt: a record from
   * `sealedFrom` on that falls in one gets a row of its own (after a loss, lost(); at a start, the
   * stored checkpoint's `finalized` and `applied`: such a record came after they closed).
   */
  sealed: number;
  sealedFrom: number;
  /** The log deleted the records before it (lost()): the checkpoint never goes back before it. */
  lostBefore: number;
  /**
   * After a loss at a start (lost()), the records before it are replayed into rows written already
   * (the stored checkpoint's `applied`), whose samples lack what the log deleted: they are context
   * only, final in the store, and no checkpoint is written until the replay has passed it.
   */
  contextUntil: number;
}

/** The state of a partition met first at `offset`, resuming from its stored checkpoint (absent: none). */
export function partitionState(stored: ReturnType<StatsCheckpoint['get']>, offset: number): PartitionState {
  const finalized = stored?.finalized ?? -Infinity;
  return {
    open: new Map(),
    oldestOpen: Infinity,
    current: undefined,
    unwritten: [],
    finalizedInStore: finalized,
    dirty: new Set(),
    newest: -Infinity,
    next: offset,
    writtenNext: offset,
    sealed: finalized,
    sealedFrom: stored?.applied ?? Infinity,
    lostBefore: 0,
    contextUntil: 0,
  };
}

/**
 * Closes every open sample of the partition, whatever its time: written (at the next flush) as it
 * is, then final (`sealed`): a record from `from` on in one of their intervals gets a row of its own.
 */
export function sealOpen(state: PartitionState, from: number): void {
  for (const interval of [...state.open.keys()].sort((a, b) => a - b)) {
    const sample = state.open.get(interval)!;
    if (state.dirty.delete(interval)) state.unwritten.push(sample);
    else if (!state.final || state.final.interval < interval) state.final = sample;
    if (interval > state.sealed) state.sealed = interval;
  }
  state.open.clear();
  state.oldestOpen = Infinity;
  state.current = undefined;
  state.sealedFrom = Math.min(state.sealedFrom, from);
}
