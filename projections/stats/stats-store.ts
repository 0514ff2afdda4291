import type { Counters, StatsBucket, StatsQuery, Unit } from '../../src/domain/stats-sample.js';
import type { LevelRow, Piece } from './rollups.js';

/**
 * One 6-second sample of one app from one log partition (or one late record, see `slot`). `version` is the offset of the last
 * record folded into it: a replay rewrites the same row with the same version and values, and a
 * later, fuller write of the same sample replaces an earlier one (ReplacingMergeTree semantics).
 */
export interface StatsRow {
  appId: string;
  interval: number;
  topic: string;
  partition: number;
  /** 0 for the sample; offset + 1 of a record that came after its interval had closed */
  slot: number;
  version: number;
  counters: Counters;
  /** channels active in this sample (messages topic) */
  channels: number;
  /** realtime connections open in this sample: the sum of the instances' readings (usage topic) */
  connections: number;
}

/**
 * Where a partition's stats resume: `from` is the next offset to read (far enough back to rebuild
 * the sample before the oldest unwritten one); samples at or before `finalized` are already final
 * in the store, so a replay rebuilds them for context but never writes them again. `applied` is
 * the next offset after the records the rows written so far include (absent in a checkpoint an
 * older release wrote: then `from` is what is known): what another instance waits on to read its
 * own writes from rows a writer on another instance wrote (projections/stats/stats-reader.ts).
 */
export type StatsCheckpoint = Map<number, { from: number; finalized: number; applied?: number }>;

export interface StatsStore {
  readonly kind: string;
  init(): Promise<void>;
  /**
   * Writes rows, the rollups they fall in (unless `rollUp` is false: one instance rolls up for all,
   * StatsRollups), then the checkpoint of the topic they came from.
   */
  write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint, options?: { rollUp?: boolean }): Promise<void>;
  /** A store whose rollups may be written apart from the samples, by one instance for all (ClickHouse). */
  readonly rollupWriter?: StatsRollups;
  loadCheckpoint(topic: string): Promise<StatsCheckpoint>;
  /** Buckets of the unit with any sample in [start, end], oldest first (read from the rollups: `bucketsOf`). */
  query(q: StatsQuery): Promise<StatsBucket[]>;
  /** The rows of each piece's level with a start in [from, to): rollups, or samples summed per interval. */
  readPieces(appId: string, pieces: Piece[]): Promise<LevelRow[]>;
  /**
   * The same buckets folded from the 6-second samples alone, reading every sample: what `query`
   * must always equal (tests and audits; the rollups' reference).
   */
  queryFromSamples(q: StatsQuery): Promise<StatsBucket[]>;
  /**
   * The app's oldest sample's interval (undefined: none): a page of stats need not look further
   * back than that (asked only when a page comes back short).
   */
  oldestInterval(appId: string): Promise<number | undefined>;
  /** The apps with any stats (every publish and request counts): at start, to warn of an app the apps file left out. */
  appsWithData(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Rollups written apart from their samples (production mode: the stats writers share the
 * partitions, and one instance, the roller, recomputes the rollups that every writer's samples fall
 * in: projections/stats/stats-reader.ts). The roller's progress is a checkpoint of its own per topic
 * (`rolledTopic`): the next offset of each partition whose records the rollups do not include yet.
 */
export interface StatsRollups {
  /** Recomputes every rollup that samples of these (app, interval) fall in, bottom up. */
  rollUp(touched: { appId: string; interval: number }[]): Promise<void>;
  /** Recomputes the rollups of every app with samples in [from, to) (touches not kept: a reader over its limit). */
  rollUpRange(from: number, to: number): Promise<void>;
  loadCheckpoint(topic: string): Promise<StatsCheckpoint>;
  writeCheckpoint(topic: string, checkpoint: StatsCheckpoint): Promise<void>;
}

/** The name the rollups' checkpoint of a topic is kept under (in the checkpoints table). */
export const rolledTopic = (topic: string): string => `rollups:${topic}`;

/** What the stats projection needs of a store: its checkpoint, and writes. */
export type StatsWriter = Pick<StatsStore, 'init' | 'loadCheckpoint' | 'write'>;
