import { bucketEnd, bucketStart, SAMPLE_MS, type Counters, type StatsBucket, type StatsQuery, type Unit } from '../../src/domain/stats-sample.js';

/**
 * Rollups of the 6-second samples per minute, hour, day and month (issue 14: a page of any unit reads
 * about as many rows as it returns). A rollup is a pure function of what it covers:
 * - a minute rolls up the samples of the minute, summed per 6-second interval over every partition
 *   and slot first (a channel or connection figure is one per interval, over all partitions);
 * - an hour rolls up its minutes, a day its hours, a month its days.
 * Every figure folds associatively (counters and sample counts add, peaks take the largest, minima
 * the smallest of the parts that had a sample), so a rollup equals the fold of its samples, and a
 * page of any unit reads rollup rows, plus, at a window edge that cuts a bucket, the rows of the
 * lower levels that make up the part inside the window (see `cover`).
 *
 * The stores recompute every rollup a write touches, bottom up, from the rows beneath it, so a replay,
 * a rebuild or a late sample gives the same rows again. SQLite does it in the write's transaction;
 * ClickHouse versions each rollup by what it read (see ClickHouseStatsStore).
 */
export const LEVELS = ['sample', 'minute', 'hour', 'day', 'month'] as const;
export type Level = (typeof LEVELS)[number];
export const ROLLUP_UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

/** The unit number stored in rollup rows. */
export const UNIT_CODE: Record<Unit, number> = { minute: 1, hour: 2, day: 3, month: 4 };

const lower = (level: Level): Level => LEVELS[LEVELS.indexOf(level) - 1];

/** A contiguous range [from, to) of one level's rows. */
export interface Piece {
  level: Level;
  from: number;
  to: number;
}

/** The start of the row of a level that a time falls in, and the end of a row of that start. */
export const startOf = (ms: number, level: Level): number => (level === 'sample' ? ms - (((ms % SAMPLE_MS) + SAMPLE_MS) % SAMPLE_MS) : bucketStart(ms, level));
export const endOf = (start: number, level: Level): number => (level === 'sample' ? start + SAMPLE_MS : bucketEnd(start, level));

/**
 * The fewest rows that make up [from, to) (6-second aligned): whole buckets of `level` inside it, and
 * the parts at either end that no whole bucket covers, made up of the levels below, down to samples.
 */
export function cover(from: number, to: number, level: Level): Piece[] {
  if (from >= to) return [];
  if (level === 'sample') return [{ level, from, to }];
  const first = startOf(from, level) === from ? from : endOf(startOf(from, level), level);
  // The end of the last whole bucket: the start of the bucket `to` falls in.
  const last = startOf(to, level);
  if (last <= first) return cover(from, to, lower(level));
  return [...cover(from, first, lower(level)), { level, from: first, to: last }, ...cover(last, to, lower(level))];
}

/** The samples' range [from, to) of a query's inclusive [start, end] (which need not be 6-second aligned). */
export function sampleRange(start: number, end: number): [number, number] {
  const floor = (ms: number): number => ms - (((ms % SAMPLE_MS) + SAMPLE_MS) % SAMPLE_MS);
  const from = Math.max(0, start);
  return [floor(from) === from ? from : floor(from) + SAMPLE_MS, end < 0 ? 0 : floor(end) + SAMPLE_MS];
}

/**
 * One row of any level: a sample's totals over all partitions, or a rollup. It has a bucket's
 * shape (the smallest figure of the samples that had one, 0 when none had), so rollups of rollups
 * fold like samples.
 */
export type Aggregate = StatsBucket;

/** A row of one level: a rollup (`level` its unit) or a sample's totals over all partitions (`sample`). */
export type LevelRow = Aggregate & { level: Level };

/** Reads the rows of these pieces (each level's rows with a start in [from, to)), in one go where the store can. */
export type PieceReader = (pieces: Piece[]) => Promise<LevelRow[]>;

/**
 * The buckets of a query from rollups: whole buckets of the unit, and where the range cuts a
 * bucket, the rows of lower levels that make up the part inside it (see `cover`).
 *
 * A page that ends now (the usual one) cuts the newest bucket, in which no sample is later than
 * the window's end: that bucket's rollup is then the part inside the window, whole. It is read
 * with the other rows, and the pieces below it (minutes, samples) only when its newest sample is
 * past the window's end (a window that ends in the past). So a page is one read where it was two.
 */
export async function bucketsOf(q: StatsQuery, read: PieceReader): Promise<StatsBucket[]> {
  const [from, to] = sampleRange(q.start, q.end);
  if (from >= to) return [];
  const newest = bucketStart(to, q.unit);
  const cut = newest < to && newest >= from;
  const pieces = cut ? cover(from, newest, q.unit) : cover(from, to, q.unit);
  if (cut) pieces.push({ level: q.unit, from: newest, to: bucketEnd(newest, q.unit) });
  const rows = await read(pieces);
  if (cut) {
    const at = rows.findIndex((r) => r.start === newest && r.level === q.unit);
    // No rollup: no sample in the bucket either (a rollup is written with its samples, or right
    // after them in ClickHouse, where until then the bucket shows as it was, as any read shows the
    // projection's state a moment ago).
    if (at >= 0 && rows[at].lastSample >= to) rows.splice(at, 1, ...(await read(cover(newest, to, q.unit))));
  }
  return foldInto(q.unit, rows);
}

/** One 6-second interval's totals over all partitions (open channels, open connections) as an aggregate. */
export function sampleAggregate(start: number, counters: Counters, channels: number, connections: number): Aggregate {
  return {
    start,
    counters,
    channelSamples: channels > 0 ? 1 : 0,
    channelSum: channels,
    channelMax: channels,
    channelMin: channels,
    connectionSamples: connections > 0 ? 1 : 0,
    connectionSum: connections,
    connectionMax: connections,
    connectionMin: connections,
    lastSample: start,
  };
}

/** A bucket made of one row alone, starting where the bucket does: that row (see `wholeRowOf`). */
const WHOLE_ROW = new WeakMap<StatsBucket, object>();

/**
 * The row a bucket was made of, when it was one row alone that starts where the bucket does (a
 * rollup of the unit, or a row of a smaller unit that was all the bucket had): a held row's
 * record can be made once (src/routes/stats.ts).
 */
export const wholeRowOf = (bucket: StatsBucket): object | undefined => WHOLE_ROW.get(bucket);

/** Folds rows of any levels into buckets of the unit, oldest first. */
export function foldInto(unit: Unit, rows: Aggregate[]): StatsBucket[] {
  const buckets = new Map<number, StatsBucket>();
  for (const row of rows) {
    const start = bucketStart(row.start, unit);
    const b = buckets.get(start);
    if (!b) {
      // A copy: the rows may be a cache's, and a row of a level carries its level.
      const made: StatsBucket = {
        start,
        counters: { ...row.counters },
        channelSamples: row.channelSamples,
        channelSum: row.channelSum,
        channelMax: row.channelMax,
        channelMin: row.channelMin,
        connectionSamples: row.connectionSamples,
        connectionSum: row.connectionSum,
        connectionMax: row.connectionMax,
        connectionMin: row.connectionMin,
        lastSample: row.lastSample,
      };
      buckets.set(start, made);
      if (row.start === start) WHOLE_ROW.set(made, row);
      continue;
    }
    WHOLE_ROW.delete(b);
    for (const [k, v] of Object.entries(row.counters)) if (v) b.counters[k] = (b.counters[k] ?? 0) + v;
    if (row.channelSamples > 0) b.channelMin = b.channelSamples > 0 ? Math.min(b.channelMin, row.channelMin) : row.channelMin;
    if (row.connectionSamples > 0) b.connectionMin = b.connectionSamples > 0 ? Math.min(b.connectionMin, row.connectionMin) : row.connectionMin;
    b.channelSamples += row.channelSamples;
    b.channelSum += row.channelSum;
    b.channelMax = Math.max(b.channelMax, row.channelMax);
    b.connectionSamples += row.connectionSamples;
    b.connectionSum += row.connectionSum;
    b.connectionMax = Math.max(b.connectionMax, row.connectionMax);
    b.lastSample = Math.max(b.lastSample, row.lastSample);
  }
  return [...buckets.values()].sort((a, b) => a.start - b.start);
}

/** Ranges [from, to) of buckets of a unit to recompute for one app. */
export interface DirtyRange {
  appId: string;
  from: number;
  to: number;
}

/**
 * The buckets of each unit that samples at these intervals fall in, as contiguous ranges per app
 * (a rebuild writes thousands of minutes at once: one range, not one statement per minute).
 */
export function dirtyRanges(rows: { appId: string; interval: number }[]): Record<Unit, DirtyRange[]> {
  const out = {} as Record<Unit, DirtyRange[]>;
  const byApp = new Map<string, Set<number>>();
  for (const r of rows) {
    let set = byApp.get(r.appId);
    if (!set) byApp.set(r.appId, (set = new Set()));
    set.add(bucketStart(r.interval, 'minute'));
  }
  for (const unit of ROLLUP_UNITS) {
    const ranges: DirtyRange[] = [];
    for (const [appId, minutes] of byApp) {
      const starts = [...new Set([...minutes].map((m) => bucketStart(m, unit)))].sort((a, b) => a - b);
      for (const s of starts) {
        const prev = ranges[ranges.length - 1];
        if (prev && prev.appId === appId && prev.to === s) prev.to = bucketEnd(s, unit);
        else ranges.push({ appId, from: s, to: bucketEnd(s, unit) });
      }
    }
    out[unit] = ranges;
  }
  return out;
}
