import { ClickHouseSession, type ClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlDottedName, sqlIdentifier, sqlInt, sqlJoin, sqlTable, type Sql } from '../../src/stores/clickhouse/sql.js';
import { NAMED_COLUMNS } from './named-columns.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { BASE_COUNTERS, bucketEnd, bucketStart, SAMPLE_MS, type Counters, type StatsBucket, type Unit } from '../../src/domain/stats-sample.js';
import type { StatsCheckpoint, StatsRollups, StatsRow, StatsStore } from './stats-store.js';
import type { StatsQuery } from '../../src/domain/stats-sample.js';
import { bucketsOf, dirtyRanges, sampleAggregate, ROLLUP_UNITS, UNIT_CODE, type DirtyRange, type LevelRow, type Piece } from './rollups.js';

const UNIT_LEVEL: Record<number, Unit> = Object.fromEntries(Object.entries(UNIT_CODE).map(([unit, code]) => [code, unit as Unit]));

const COUNTER_ID = new Map(BASE_COUNTERS.map((name, i) => [name, i + 1]));

const id = (name: string): Sql => sqlIdentifier(name);
const list = (parts: Sql[]): Sql => sqlJoin(parts, sql`, `);
/** Rollup counter columns c1..cN, by position in BASE_COUNTERS (as the samples' counter ids). */
const COLUMNS = BASE_COUNTERS.map((_, i) => `c${i + 1}`);
const FIGURES = [
  'channel_samples', 'channel_sum', 'channel_max', 'channel_min',
  'connection_samples', 'connection_sum', 'connection_max', 'connection_min', 'last_sample',
] as const;

/** SQL giving the start (ms) of the bucket of a unit that a ms column falls in (UTC). */
const START: Record<Unit, (col: Sql) => Sql> = {
  minute: (c) => sql`intDiv(${c}, 60000) * 60000`,
  hour: (c) => sql`intDiv(${c}, 3600000) * 3600000`,
  day: (c) => sql`intDiv(${c}, 86400000) * 86400000`,
  month: (c) => sql`toUInt64(toStartOfMonth(toDateTime(intDiv(${c}, 1000), 'UTC'))) * 86400000`,
};

/** The channel and connection figures and last sample, in the columns rollups and buckets share. */
interface FigureColumns {
  channel_samples: string | number;
  channel_sum: string | number;
  channel_max: string | number;
  channel_min: string | number;
  connection_samples: string | number;
  connection_sum: string | number;
  connection_max: string | number;
  connection_min: string | number;
  last_sample: string | number;
}

interface AggregateRow extends FigureColumns {
  s: string | number;
  [column: string]: string | number;
}

export interface ClickHouseStatsStoreOptions {
  client?: ClickHouseClient;
  url?: string;
  database?: string;
  /** Prepended to table names; tests use a unique prefix each. */
  tablePrefix?: string;
  clock?: Clock;
}

interface BucketRow extends FigureColumns {
  bucket: string | number;
  counters: [(string | number)[], (string | number)[]];
}

const figuresOf = (r: FigureColumns): Omit<StatsBucket, 'start' | 'counters'> => ({
  channelSamples: Number(r.channel_samples),
  channelSum: Number(r.channel_sum),
  channelMax: Number(r.channel_max),
  channelMin: Number(r.channel_min),
  connectionSamples: Number(r.connection_samples),
  connectionSum: Number(r.connection_sum),
  connectionMax: Number(r.connection_max),
  connectionMin: Number(r.connection_min),
  lastSample: Number(r.last_sample),
});

/** SQL giving a bucket key per unit: ms of the bucket start, or yyyymm for months. */
const BUCKET: Record<Unit, Sql> = {
  minute: sql`intDiv(sample_start, 60000) * 60000`,
  hour: sql`intDiv(sample_start, 3600000) * 3600000`,
  day: sql`intDiv(sample_start, 86400000) * 86400000`,
  month: sql`toYYYYMM(toDateTime(intDiv(sample_start, 1000), 'UTC'))`,
};

const bucketStartOf = (unit: Unit, key: number): number =>
  unit === 'month' ? Date.UTC(Math.floor(key / 100), (key % 100) - 1, 1) : key;

/**
 * Stats in ClickHouse, in SQL that 18.16 and current releases share. Samples sit in a
 * ReplacingMergeTree(version) keyed by (app, sample_start, topic, partition, slot); reads use FINAL, so
 * a replayed sample counts once whether or not the parts have merged (Summing or Aggregating
 * engines would add a replayed block twice). Counters are a pair of arrays, ids (positions in
 * BASE_COUNTERS: 18.16's sumMap takes numeric keys only) and values; queries fold samples into
 * unit buckets with sumMap.
 *
 * For analysts: `SELECT ... FROM stats_samples FINAL` gives one row per sample and source
 * partition; see the README for example queries.
 */
export class ClickHouseStatsStore implements StatsStore {
  readonly kind = 'clickhouse';
  private readonly ch: ClickHouseSession;
  private readonly database: string;
  private readonly samples: Sql;
  private readonly samplesName: string;
  private readonly checkpoints: Sql;
  private readonly checkpointsName: string;
  private readonly rollups: Sql;
  private readonly rollupsName: string;
  private readonly view: Sql;
  private readonly viewName: string;
  private readonly clock: Clock;
  private version = 0;
  /** INSERT ... SELECT statements of rollups this store ran (tests: which instance rolls up). */
  rollupStatements = 0;
  /** Its rollups may be written apart from samples, by one instance for all (StatsRollups). */
  readonly rollupWriter: StatsRollups = this;

  constructor(options: ClickHouseStatsStoreOptions) {
    this.ch = new ClickHouseSession(options, 'ClickHouseStatsStore');
    this.database = options.database ?? 'default';
    const prefix = options.tablePrefix ?? '';
    this.samplesName = `${prefix}stats_samples`;
    this.samples = sqlTable(this.database, this.samplesName);
    this.checkpointsName = `${prefix}stats_checkpoints`;
    this.checkpoints = sqlTable(this.database, this.checkpointsName);
    this.rollupsName = `${prefix}stats_rollups`;
    this.rollups = sqlTable(this.database, this.rollupsName);
    this.viewName = `${prefix}stats`;
    this.view = sqlTable(this.database, this.viewName);
    this.clock = options.clock ?? systemClock;
  }

  async init(): Promise<void> {
    if (this.database !== 'default') await this.ch.command(sql`CREATE DATABASE IF NOT EXISTS ${sqlIdentifier(this.database)}`);
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.samples} (
        app_id String, sample_start UInt64, topic String, partition UInt32, slot UInt64, version UInt64,
        counter_ids Array(UInt16), counter_values Array(Float64), channels UInt32, day Date, connections UInt32 DEFAULT 0
      ) ENGINE = ReplacingMergeTree(version)
      PARTITION BY toYYYYMM(day)
      ORDER BY (app_id, sample_start, topic, partition, slot)`);
    // A table made by an older release has no `connections` (18.16 has no ADD COLUMN IF NOT EXISTS).
    const columns = await this.ch.select<{ name: string }>(
      sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.samplesName}`,
    );
    if (!columns.some((c) => c.name === 'connections')) {
      await this.ch.command(sql`ALTER TABLE ${this.samples} ADD COLUMN connections UInt32 DEFAULT 0`);
    }
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.checkpoints} (
        topic String, partition UInt32, from_offset UInt64, finalized Int64, version UInt64, applied_offset Int64 DEFAULT -1
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY (topic, partition)`);
    // A table made by an older release has no `applied_offset` (-1: unknown, `from` stands for it);
    // one made now has it, so no start alters it (the loser of that race is logged by ClickHouse).
    const checkpointColumns = await this.ch.select<{ name: string }>(
      sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.checkpointsName}`,
    );
    if (!checkpointColumns.some((c) => c.name === 'applied_offset')) {
      // Instances starting together each add it; the ones that lose the race find it there.
      await this.ch.command(sql`ALTER TABLE ${this.checkpoints} ADD COLUMN applied_offset Int64 DEFAULT -1`).catch(async (err: unknown) => {
        const now = await this.ch.select<{ name: string }>(sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.checkpointsName} AND name = 'applied_offset'`);
        if (now.length === 0) throw err;
      });
    }
    await this.initRollups();
    await this.initView();
  }

  /**
   * The view `stats` for analysts: one row per app, unit and interval, one column per figure under
   * the spec's name (NAMED_COLUMNS), computed as GET /stats computes it (mean over the samples
   * elapsed so far in the current interval, min 0 unless every sample of the interval had one).
   */
  private async initView(): Promise<void> {
    const present = new Set(
      (await this.ch.select<{ name: string }>(sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.viewName}`)).map((c) => c.name),
    );
    if (present.size > 0 && NAMED_COLUMNS.every((c) => present.has(c.name))) return;
    if (present.size > 0) {
      // A view an older release made lacks counters added since: made again (it holds no data).
      // Anything else of that name is not ours to drop.
      const [found] = await this.ch.select<{ engine: string }>(sql`SELECT engine FROM system.tables WHERE database = ${this.database} AND name = ${this.viewName}`);
      if (found?.engine !== 'View') throw new Error(`${this.database}.${this.viewName} exists and is not the stats view (engine ${found?.engine}): the service keeps its stats view under that name; rename that table`);
      await this.ch.command(sql`DROP TABLE IF EXISTS ${this.view}`);
    }
    const figures = NAMED_COLUMNS.map((c) => {
      if (c.kind === 'sum') return sql`${sqlJoin(c.terms.map((t) => (t.times === 1 ? id(COLUMNS[t.counter]) : sql`${t.times} * ${id(COLUMNS[t.counter])}`)), sql` + `)} AS ${sqlDottedName(c.name)}`;
      const [samples, sum, max, min] = ['samples', 'sum', 'max', 'min'].map((f) => id(`${c.of}_${f}`));
      const value = c.figure === 'peak' ? max : c.figure === 'min' ? sql`if(${samples} >= total_samples, ${min}, 0)` : sql`round(${sum} / elapsed_samples, 3)`;
      return sql`${value} AS ${sqlDottedName(c.name)}`;
    });
    await this.ch.command(sql`CREATE VIEW IF NOT EXISTS ${this.view} AS
      SELECT app_id, unit_name AS unit, interval_start, intervalId, ${list(NAMED_COLUMNS.map((c) => sqlDottedName(c.name)))}
      FROM (
        SELECT app_id, transform(unit, [1, 2, 3, 4], ['minute', 'hour', 'day', 'month'], '') AS unit_name,
          toDateTime(intDiv(bucket_start, 1000), 'UTC') AS interval_start,
          multiIf(unit = 1, formatDateTime(interval_start, '%Y-%m-%d:%H:%M', 'UTC'), unit = 2, formatDateTime(interval_start, '%Y-%m-%d:%H', 'UTC'),
                  unit = 3, formatDateTime(interval_start, '%Y-%m-%d', 'UTC'), formatDateTime(interval_start, '%Y-%m', 'UTC')) AS intervalId,
          multiIf(unit = 1, 10, unit = 2, 600, unit = 3, 14400,
                  (toUInt32(addMonths(toDate(interval_start), 1)) - toUInt32(toDate(interval_start))) * 14400) AS total_samples,
          least(total_samples, greatest(1, intDiv(toInt64(intDiv(toUInt64(now()), 6)) * 6000 + 6000 - toInt64(bucket_start), 6000))) AS elapsed_samples,
          ${list(figures)}
        FROM ${this.rollups} FINAL
      )`);
  }

  /**
   * Rollups per minute, hour, day and month (see rollups.ts), in a ReplacingMergeTree(version) read
   * with FINAL. Each is recomputed by INSERT ... SELECT from the rows beneath it, read FINAL, and
   * versioned by what that read saw: the sum over those rows of (version + 1) (a sample's version
   * is its last offset; a rollup's is this sum). Rows only ever get replaced by newer versions, so a
   * later read sees the same rows or more, with a larger sum; the recompute that read last (which,
   * with several instances writing, is one that came after every write) has the largest version,
   * and FINAL returns it. A replay writes the same rows and so the same versions and figures.
   */
  private async initRollups(): Promise<void> {
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.rollups} (
        app_id String, unit UInt8, bucket_start UInt64, version UInt64,
        ${list(COLUMNS.map((c) => sql`${id(c)} Float64`))},
        ${list(FIGURES.map((f) => sql`${id(f)} UInt64`))}
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY (app_id, unit, bucket_start)
      SETTINGS index_granularity = 1024`);
    const present = new Set(
      (await this.ch.select<{ name: string }>(sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.rollupsName}`)).map((c) => c.name),
    );
    for (const c of COLUMNS.filter((name) => !present.has(name))) await this.ch.command(sql`ALTER TABLE ${this.rollups} ADD COLUMN ${id(c)} Float64`);
    // Samples an older release wrote have no rollups yet: every app, whole range, once. Months are
    // written last (each level in one statement), so with any month row the rollups are complete;
    // a start that died halfway through this does it again.
    const months = await this.ch.select<{ n: string | number }>(sql`SELECT count() AS n FROM ${this.rollups} WHERE unit = ${UNIT_CODE.month}`);
    if (Number(months[0]?.n ?? 0) > 0) return;
    const apps = await this.ch.select<{ app_id: string; oldest: string | number; newest: string | number }>(
      sql`SELECT app_id, min(sample_start) AS oldest, max(sample_start) AS newest FROM ${this.samples} GROUP BY app_id`,
    );
    if (apps.length === 0) return;
    for (const unit of ROLLUP_UNITS) {
      await this.rollUpUnit(
        unit,
        apps.map((a) => ({ appId: a.app_id, from: bucketStart(Number(a.oldest), unit), to: bucketEnd(bucketStart(Number(a.newest), unit), unit) })),
      );
    }
  }

  /** Recomputes the rollups of a unit over these ranges, from the samples (minutes) or the unit below. */
  private async rollUpUnit(unit: Unit, ranges: DirtyRange[]): Promise<void> {
    if (ranges.length === 0) return;
    this.rollupStatements++;
    const startCol = unit === 'minute' ? id('sample_start') : id('bucket_start');
    const where = sqlJoin(
      ranges.map((r) => sql`(app_id = ${r.appId} AND ${startCol} >= ${r.from} AND ${startCol} < ${r.to})`),
      sql` OR `,
    );
    const columns = sql`app_id, unit, bucket_start, version, ${list(COLUMNS.map(id))}, ${list(FIGURES.map(id))}`;
    if (unit === 'minute') {
      // Counters by sumMap per sample, then per minute; into columns once per minute (30
      // arrayElement columns over every sample row cost more than the rest of the statement).
      await this.ch.command(sql`INSERT INTO ${this.rollups} (${columns})
        SELECT app_id, toUInt8(${UNIT_CODE.minute}), b, vv, ${list(COLUMNS.map((_, i) => sql`arrayElement(tupleElement(mm, 2), indexOf(tupleElement(mm, 1), ${i + 1}))`))},
          cs, csum, cmax, cmin, os, osum, omax, omin, last
        FROM (
          SELECT app_id, ${START.minute(id('sample_start'))} AS b, sum(v) AS vv, sumMap(tupleElement(m, 1), tupleElement(m, 2)) AS mm,
            countIf(ch > 0) AS cs, sum(ch) AS csum, max(ch) AS cmax, minIf(ch, ch > 0) AS cmin,
            countIf(co > 0) AS os, sum(co) AS osum, max(co) AS omax, minIf(co, co > 0) AS omin, max(sample_start) AS last
          FROM (
            SELECT app_id, sample_start, sum(version + 1) AS v, sumMap(counter_ids, counter_values) AS m,
              toUInt64(sum(channels)) AS ch, toUInt64(sum(connections)) AS co
            FROM ${this.samples} FINAL WHERE ${where}
            GROUP BY app_id, sample_start
          )
          GROUP BY app_id, b
        )`);
      return;
    }
    const below = UNIT_CODE[ROLLUP_UNITS[ROLLUP_UNITS.indexOf(unit) - 1]];
    await this.ch.command(sql`INSERT INTO ${this.rollups} (${columns})
      SELECT app_id, toUInt8(${UNIT_CODE[unit]}), ${START[unit](id('bucket_start'))} AS b, sum(version),
        ${list(COLUMNS.map((c) => sql`sum(${id(c)})`))},
        sum(channel_samples), sum(channel_sum), max(channel_max), minIf(channel_min, channel_samples > 0),
        sum(connection_samples), sum(connection_sum), max(connection_max), minIf(connection_min, connection_samples > 0), max(last_sample)
      FROM ${this.rollups} FINAL WHERE unit = ${below} AND (${where})
      GROUP BY app_id, b`);
  }

  /** Recomputes every rollup that samples of these rows fall in, bottom up. */
  async rollUp(rows: { appId: string; interval: number }[]): Promise<void> {
    const dirty = dirtyRanges(rows);
    for (const unit of ROLLUP_UNITS) await this.rollUpUnit(unit, dirty[unit]);
  }

  /** Recomputes the rollups of every app with samples in [from, to), bottom up. */
  async rollUpRange(from: number, to: number): Promise<void> {
    if (from >= to) return;
    const apps = await this.ch.select<{ app_id: string }>(sql`SELECT DISTINCT app_id FROM ${this.samples} WHERE sample_start >= ${sqlInt(from)} AND sample_start < ${sqlInt(to)}`);
    for (const unit of ROLLUP_UNITS) {
      await this.rollUpUnit(unit, apps.map((a) => ({ appId: a.app_id, from: bucketStart(from, unit), to: bucketEnd(bucketStart(to - 1, unit), unit) })));
    }
  }

  /**
   * Samples, then the rollups they fall in (unless the roller does: StatsRollups), then the
   * checkpoint: a crash between any two replays samples the table already has (the same rows
   * again) and recomputes their rollups; none is lost.
   */
  async write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint, options?: { rollUp?: boolean }): Promise<void> {
    await this.writeSamples(rows);
    if (options?.rollUp !== false) await this.rollUp(rows);
    await this.writeCheckpoint(topic, checkpoint);
  }

  /** The first step of `write` (public so that tests can stop after it, as a crash would). */
  async writeSamples(rows: StatsRow[]): Promise<void> {
    if (rows.length > 0) {
      await this.ch.client.insert({
        table: this.samples.text,
        format: 'JSONEachRow',
        values: rows.map((r) => {
          const keys = Object.keys(r.counters).filter((k) => COUNTER_ID.has(k));
          return {
            app_id: r.appId,
            sample_start: r.interval,
            topic: r.topic,
            partition: r.partition,
            slot: r.slot,
            version: r.version,
            counter_ids: keys.map((k) => COUNTER_ID.get(k)),
            counter_values: keys.map((k) => r.counters[k]),
            channels: r.channels,
            connections: r.connections,
            day: new Date(r.interval).toISOString().slice(0, 10),
          };
        }),
      });
    }
  }

  /** The last step of `write`. */
  async writeCheckpoint(topic: string, checkpoint: StatsCheckpoint): Promise<void> {
    this.version = Math.max(this.version + 1, this.clock.now() * 1000);
    await this.ch.client.insert({
      table: this.checkpoints.text,
      format: 'JSONEachRow',
      values: [...checkpoint].map(([partition, c]) => ({
        topic,
        partition,
        from_offset: c.from,
        finalized: Number.isFinite(c.finalized) ? c.finalized : -1,
        applied_offset: c.applied ?? -1,
        version: this.version,
      })),
    });
  }

  async loadCheckpoint(topic: string): Promise<StatsCheckpoint> {
    const rows = await this.ch.select<{ partition: number; from_offset: string | number; finalized: string | number; applied: string | number; latest: string | number }>(sql`
      SELECT partition, argMax(from_offset, version) AS from_offset, argMax(finalized, version) AS finalized, argMax(applied_offset, version) AS applied, max(version) AS latest
      FROM ${this.checkpoints} WHERE topic = ${topic} GROUP BY partition`);
    for (const r of rows) this.version = Math.max(this.version, Number(r.latest));
    return new Map(
      rows.map((r) => [
        Number(r.partition),
        { from: Number(r.from_offset), finalized: Number(r.finalized) < 0 ? -Infinity : Number(r.finalized), ...(Number(r.applied) >= 0 ? { applied: Number(r.applied) } : {}) },
      ]),
    );
  }

  /** Buckets from the rollups (see `bucketsOf`): a page is one read (4 ms on 18.16) where it was two. */
  async query(q: StatsQuery): Promise<StatsBucket[]> {
    return bucketsOf(q, (pieces) => this.readPieces(q.appId, pieces));
  }

  /** The rows of these pieces: rollups (FINAL) and samples (summed per 6-second interval), in parallel. */
  async readPieces(appId: string, pieces: Piece[]): Promise<LevelRow[]> {
    const rollupRanges = pieces.filter((p) => p.level !== 'sample');
    const sampleRanges = pieces.filter((p) => p.level === 'sample');
    const [rollups, samples] = await Promise.all([
      rollupRanges.length === 0
        ? Promise.resolve([])
        : this.ch.select<AggregateRow & { u: string | number }>(sql`
            SELECT unit AS u, bucket_start AS s, ${list(COLUMNS.map(id))}, ${list(FIGURES.map(id))}
            FROM ${this.rollups} FINAL
            WHERE app_id = ${appId} AND (${sqlJoin(
              rollupRanges.map((p) => sql`(unit = ${UNIT_CODE[p.level as Unit]} AND bucket_start >= ${sqlInt(p.from)} AND bucket_start < ${sqlInt(p.to)})`),
              sql` OR `,
            )})`),
      this.readSamples(appId, sampleRanges),
    ]);
    const out: LevelRow[] = rollups.map((r) => {
      const counters: Counters = {};
      COLUMNS.forEach((c, i) => {
        const v = Number(r[c]);
        if (v) counters[BASE_COUNTERS[i]] = v;
      });
      return { level: UNIT_LEVEL[Number(r.u)], start: Number(r.s), counters, ...figuresOf(r) };
    });
    return [...out, ...samples];
  }

  /**
   * Samples in these ranges, one aggregate per 6-second interval (over partitions and slots). The
   * rows are read as they are and the newest version of each kept here, which is what FINAL
   * does (rows of one version are the same row: a sample is a function of its records), at half
   * the cost on 18.16: the ranges are at most a minute at either end of a window.
   */
  private async readSamples(appId: string, ranges: Piece[]): Promise<LevelRow[]> {
    if (ranges.length === 0) return [];
    const rows = await this.ch.select<{
      s: string | number;
      topic: string;
      partition: number;
      slot: string | number;
      version: string | number;
      ids: (string | number)[];
      vals: (string | number)[];
      ch: string | number;
      co: string | number;
    }>(sql`
      SELECT sample_start AS s, topic, partition, slot, version, counter_ids AS ids, counter_values AS vals, channels AS ch, connections AS co
      FROM ${this.samples}
      WHERE app_id = ${appId} AND (${sqlJoin(
        ranges.map((p) => sql`(sample_start >= ${sqlInt(p.from)} AND sample_start < ${sqlInt(p.to)})`),
        sql` OR `,
      )})`);
    const newest = new Map<string, (typeof rows)[number]>();
    for (const r of rows) {
      const key = `${r.s}\u0000${r.topic}\u0000${r.partition}\u0000${r.slot}`;
      const known = newest.get(key);
      if (!known || Number(r.version) >= Number(known.version)) newest.set(key, r);
    }
    const byInterval = new Map<number, { counters: Counters; ch: number; co: number }>();
    for (const r of newest.values()) {
      const start = Number(r.s);
      let sum = byInterval.get(start);
      if (!sum) byInterval.set(start, (sum = { counters: {}, ch: 0, co: 0 }));
      r.ids.forEach((counterId, i) => {
        const name = BASE_COUNTERS[Number(counterId) - 1];
        const v = Number(r.vals[i]);
        if (name && v) sum.counters[name] = (sum.counters[name] ?? 0) + v;
      });
      sum.ch += Number(r.ch);
      sum.co += Number(r.co);
    }
    return [...byInterval].map(([start, { counters, ch, co }]) => ({ level: 'sample' as const, ...sampleAggregate(start, counters, ch, co) }));
  }

  /**
   * The app's oldest sample's interval, or undefined when it has none: a read of the app's range of
   * the primary key (app, sample start, ...), one column (some milliseconds for 30 days of
   * samples; the route asks only when a page comes back short). Without it a page of an app
   * younger than the page widened its window back to 1970, a query each time (twelve for a page
   * of minutes).
   */
  async appsWithData(): Promise<string[]> {
    const rows = await this.ch.select<{ app_id: string }>(sql`SELECT DISTINCT app_id FROM ${this.rollups}`);
    return rows.map((r) => r.app_id);
  }

  async oldestInterval(appId: string): Promise<number | undefined> {
    const [row] = await this.ch.select<{ oldest: string | number; n: string | number }>(
      sql`SELECT min(sample_start) AS oldest, count() AS n FROM ${this.samples} WHERE app_id = ${appId}`,
    );
    return row && Number(row.n) > 0 ? Number(row.oldest) : undefined;
  }

  /** The same buckets folded from the 6-second samples alone (what the rollups must always equal). */
  async queryFromSamples(q: StatsQuery): Promise<StatsBucket[]> {
    // Inner: one total per 6-second sample (FINAL drops replayed rows); outer: unit buckets.
    const rows = await this.ch.select<BucketRow>(sql`
      SELECT ${BUCKET[q.unit]} AS bucket,
        sumMap(tupleElement(m, 1), tupleElement(m, 2)) AS counters,
        countIf(ch > 0) AS channel_samples, sum(ch) AS channel_sum, max(ch) AS channel_max, minIf(ch, ch > 0) AS channel_min,
        countIf(co > 0) AS connection_samples, sum(co) AS connection_sum, max(co) AS connection_max, minIf(co, co > 0) AS connection_min,
        max(sample_start) AS last_sample
      FROM (
        SELECT sample_start, sumMap(counter_ids, counter_values) AS m, sum(channels) AS ch, sum(connections) AS co
        FROM ${this.samples} FINAL
        WHERE app_id = ${q.appId} AND sample_start >= ${Math.max(0, q.start)} AND sample_start <= ${Math.max(0, q.end)}
        GROUP BY sample_start
      )
      GROUP BY bucket
      ORDER BY bucket`);
    return rows.map((r) => {
      const counters: Counters = {};
      r.counters[0].forEach((id, i) => {
        const v = Number(r.counters[1][i]);
        const name = BASE_COUNTERS[Number(id) - 1];
        if (v && name) counters[name] = v;
      });
      return {
        start: bucketStartOf(q.unit, Number(r.bucket)),
        counters,
        ...figuresOf(r),
      };
    });
  }

  async close(): Promise<void> {
    await this.ch.close();
  }
}
