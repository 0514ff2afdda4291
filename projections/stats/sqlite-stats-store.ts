import Database from '../../src/stores/sqlite/driver.mjs';
import type { StatsCheckpoint, StatsRow, StatsStore } from './stats-store.js';
import type { StatsQuery } from '../../src/domain/stats-sample.js';
import { BASE_COUNTERS, bucketEnd, bucketStart, SAMPLE_MS, type Counters, type StatsBucket, type Unit } from '../../src/domain/stats-sample.js';
import { bucketsOf, dirtyRanges, sampleAggregate, ROLLUP_UNITS, UNIT_CODE, type Level, type LevelRow, type Piece } from './rollups.js';

/** One column per known counter, c1..cN by position in BASE_COUNTERS (as ClickHouse keeps ids). */
const COLUMNS = BASE_COUNTERS.map((_, i) => `c${i + 1}`);

/** SQL giving a bucket key per unit: ms of the bucket start (UTC), or 'yyyy-mm' for months. */
const BUCKET_SQL: Record<Unit, string> = {
  minute: '(interval / 60000) * 60000',
  hour: '(interval / 3600000) * 3600000',
  day: '(interval / 86400000) * 86400000',
  month: "strftime('%Y-%m', interval / 1000, 'unixepoch')",
};

/** The figures of a row of any level, in rollup columns. */
const FIGURES = [
  'channel_samples', 'channel_sum', 'channel_max', 'channel_min',
  'connection_samples', 'connection_sum', 'connection_max', 'connection_min', 'last_sample',
] as const;

/** SQL giving the start (ms) of the bucket of a unit that a start column falls in. */
const START_SQL: Record<Unit, (col: string) => string> = {
  minute: (c) => `(${c} / 60000) * 60000`,
  hour: (c) => `(${c} / 3600000) * 3600000`,
  day: (c) => `(${c} / 86400000) * 86400000`,
  month: (c) => `CAST(strftime('%s', ${c} / 1000, 'unixepoch', 'start of month') AS INTEGER) * 1000`,
};

/** Samples summed per 6-second interval over partitions and slots: one row per interval, as a rollup's parts. */
const PER_INTERVAL = `SELECT interval AS start, ${COLUMNS.map((c) => `SUM(${c}) AS ${c}`).join(', ')},
  SUM(channels) AS ch, SUM(connections) AS co FROM stats_samples WHERE app_id = ? AND interval >= ? AND interval < ? GROUP BY interval`;

const countersOf = (row: Record<string, number>): Counters => {
  const into: Counters = {};
  BASE_COUNTERS.forEach((name, i) => {
    if (row[COLUMNS[i]]) into[name] = row[COLUMNS[i]];
  });
  return into;
};

const bucketStartOf = (unit: Unit, key: number | string): number =>
  unit === 'month' ? Date.UTC(Number(String(key).slice(0, 4)), Number(String(key).slice(5, 7)) - 1, 1) : Number(key);

/**
 * Stats in the embedded mode: one row per (app, 6-second interval, topic, partition), replaced
 * only by a row of the same or a newer version, and the checkpoint in the same transaction.
 */
export class SqliteStatsStore implements StatsStore {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private writeTx!: Database.Transaction<(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint) => void>;
  private rollUpTx!: (touched: { appId: string; interval: number }[]) => void;

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    // Rebuilt from the log after a crash, so no fsync per write.
    this.db.pragma('synchronous = NORMAL');
  }

  async init(): Promise<void> {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS stats_samples (
        app_id TEXT NOT NULL, interval INTEGER NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
        slot INTEGER NOT NULL, version INTEGER NOT NULL, channels INTEGER NOT NULL,
        ${COLUMNS.map((c) => `${c} REAL NOT NULL DEFAULT 0`).join(', ')},
        connections INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (app_id, interval, topic, partition, slot)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS stats_rollups (
        app_id TEXT NOT NULL, unit INTEGER NOT NULL, start INTEGER NOT NULL,
        ${COLUMNS.map((c) => `${c} REAL NOT NULL DEFAULT 0`).join(', ')},
        channel_samples INTEGER NOT NULL, channel_sum INTEGER NOT NULL, channel_max INTEGER NOT NULL, channel_min INTEGER NOT NULL,
        connection_samples INTEGER NOT NULL, connection_sum INTEGER NOT NULL, connection_max INTEGER NOT NULL, connection_min INTEGER NOT NULL,
        last_sample INTEGER NOT NULL,
        PRIMARY KEY (app_id, unit, start)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS stats_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS stats_checkpoints (
        topic TEXT NOT NULL, partition INTEGER NOT NULL, from_offset INTEGER NOT NULL, finalized INTEGER NOT NULL,
        applied INTEGER NOT NULL DEFAULT -1,
        PRIMARY KEY (topic, partition));`);
    // A checkpoint table made by an older release has no `applied` (-1: unknown).
    const inCheckpoints = new Set(this.db.prepare(`SELECT name FROM pragma_table_info('stats_checkpoints')`).pluck().all() as string[]);
    if (!inCheckpoints.has('applied')) this.db.exec('ALTER TABLE stats_checkpoints ADD COLUMN applied INTEGER NOT NULL DEFAULT -1');
    // A table made by an older release lacks the columns added since (counters are append-only).
    const present = new Set(this.db.prepare(`SELECT name FROM pragma_table_info('stats_samples')`).pluck().all() as string[]);
    for (const c of [...COLUMNS, 'connections'].filter((name) => !present.has(name))) {
      this.db.exec(`ALTER TABLE stats_samples ADD COLUMN ${c} ${c === 'connections' ? 'INTEGER' : 'REAL'} NOT NULL DEFAULT 0`);
    }
    const inRollups = new Set(this.db.prepare(`SELECT name FROM pragma_table_info('stats_rollups')`).pluck().all() as string[]);
    for (const c of COLUMNS.filter((name) => !inRollups.has(name))) this.db.exec(`ALTER TABLE stats_rollups ADD COLUMN ${c} REAL NOT NULL DEFAULT 0`);
    const upsert = this.db.prepare(`
      INSERT INTO stats_samples (app_id, interval, topic, partition, slot, version, channels, connections, ${COLUMNS.join(', ')})
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ${COLUMNS.map(() => '?').join(', ')})
      ON CONFLICT (app_id, interval, topic, partition, slot) DO UPDATE SET
        version = excluded.version, channels = excluded.channels, connections = excluded.connections,
        ${COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')}
      WHERE excluded.version >= stats_samples.version`);
    const saveCheckpoint = this.db.prepare(
      `INSERT INTO stats_checkpoints (topic, partition, from_offset, finalized, applied) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (topic, partition) DO UPDATE SET from_offset = excluded.from_offset, finalized = excluded.finalized, applied = excluded.applied`,
    );
    // A minute from its samples (summed per interval first), a larger unit from the unit below it.
    const rollUp = Object.fromEntries(
      ROLLUP_UNITS.map((unit, i) => {
        const insert = `INSERT OR REPLACE INTO stats_rollups (app_id, unit, start, ${COLUMNS.join(', ')}, ${FIGURES.join(', ')})`;
        const statement =
          unit === 'minute'
            ? `${insert} SELECT ?, ${UNIT_CODE.minute}, ${START_SQL.minute('start')} AS bucket, ${COLUMNS.map((c) => `SUM(${c})`).join(', ')},
                 SUM(ch > 0), SUM(ch), MAX(ch), COALESCE(MIN(CASE WHEN ch > 0 THEN ch END), 0),
                 SUM(co > 0), SUM(co), MAX(co), COALESCE(MIN(CASE WHEN co > 0 THEN co END), 0), MAX(start)
               FROM (${PER_INTERVAL}) GROUP BY bucket`
            : `${insert} SELECT ?, ${UNIT_CODE[unit]}, ${START_SQL[unit]('start')} AS bucket, ${COLUMNS.map((c) => `SUM(${c})`).join(', ')},
                 SUM(channel_samples), SUM(channel_sum), MAX(channel_max), COALESCE(MIN(CASE WHEN channel_samples > 0 THEN channel_min END), 0),
                 SUM(connection_samples), SUM(connection_sum), MAX(connection_max), COALESCE(MIN(CASE WHEN connection_samples > 0 THEN connection_min END), 0),
                 MAX(last_sample)
               FROM stats_rollups WHERE app_id = ? AND unit = ${UNIT_CODE[ROLLUP_UNITS[i - 1]]} AND start >= ? AND start < ? GROUP BY bucket`;
        return [unit, this.db.prepare(statement)];
      }),
    ) as Record<Unit, Database.Statement>;
    this.rollUpTx = this.db.transaction((touched: { appId: string; interval: number }[]) => {
      const dirty = dirtyRanges(touched);
      for (const unit of ROLLUP_UNITS) for (const r of dirty[unit]) rollUp[unit].run(r.appId, r.appId, r.from, r.to);
    });
    this.backfill(rollUp);
    this.writeTx = this.db.transaction((topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint) => {
      for (const r of rows) {
        upsert.run(r.appId, r.interval, r.topic, r.partition, r.slot, r.version, r.channels, r.connections, ...BASE_COUNTERS.map((name) => r.counters[name] ?? 0));
      }
      // Every rollup the rows fall in, in the same transaction as they and the checkpoint.
      this.rollUpTx(rows);
      for (const [partition, c] of checkpoint) {
        saveCheckpoint.run(topic, partition, c.from, Number.isFinite(c.finalized) ? c.finalized : -1, c.applied ?? -1);
      }
    });
  }

  /**
   * Rollups of samples that an older release wrote (it kept none): every bucket of every app, once.
   */
  private backfill(rollUp: Record<Unit, Database.Statement>): void {
    this.db.transaction(() => {
      if (this.db.prepare(`SELECT 1 FROM stats_meta WHERE name = 'rollups'`).get()) return;
      const apps = this.db.prepare('SELECT app_id, MIN(interval) AS oldest, MAX(interval) AS newest FROM stats_samples GROUP BY app_id').all() as {
        app_id: string;
        oldest: number;
        newest: number;
      }[];
      for (const unit of ROLLUP_UNITS) {
        for (const a of apps) rollUp[unit].run(a.app_id, a.app_id, bucketStart(a.oldest, unit), bucketEnd(bucketStart(a.newest, unit), unit));
      }
      this.db.prepare(`INSERT INTO stats_meta (name, value) VALUES ('rollups', '1')`).run();
    })();
  }

  async write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint): Promise<void> {
    // The write lock first (BEGIN IMMEDIATE): another connection writing (the service beside a
    // rebuild, a rebuild's other threads) is waited for, where a read lock taken first could not
    // be turned into a write lock.
    this.writeTx.immediate(topic, rows, checkpoint);
  }

  async loadCheckpoint(topic: string): Promise<StatsCheckpoint> {
    const rows = this.db.prepare('SELECT partition, from_offset, finalized, applied FROM stats_checkpoints WHERE topic = ?').all(topic) as {
      partition: number;
      from_offset: number;
      finalized: number;
      applied: number;
    }[];
    return new Map(
      rows.map((r) => [r.partition, { from: r.from_offset, finalized: r.finalized < 0 ? -Infinity : r.finalized, ...(r.applied >= 0 ? { applied: r.applied } : {}) }]),
    );
  }

  /** Buckets from the rollups (see `bucketsOf`). */
  async query(q: StatsQuery): Promise<StatsBucket[]> {
    return bucketsOf(q, (pieces) => this.readPieces(q.appId, pieces));
  }

  async readPieces(appId: string, pieces: Piece[]): Promise<LevelRow[]> {
    const rows: LevelRow[] = [];
    for (const p of pieces) for (const r of this.rowsOf(appId, p.level, p.from, p.to)) rows.push(r);
    return rows;
  }

  private rowsOf(appId: string, level: Level, from: number, to: number): LevelRow[] {
    if (level === 'sample') {
      this.perIntervalStmt ??= this.db.prepare(PER_INTERVAL);
      return (this.perIntervalStmt.all(appId, from, to) as ({ start: number; ch: number; co: number } & Record<string, number>)[]).map((r) =>
        Object.assign(sampleAggregate(r.start, countersOf(r), r.ch, r.co), { level }),
      );
    }
    // Rows as arrays (raw): no object of 40 properties per row.
    this.rollupStmt ??= this.db
      .prepare(`SELECT start, ${FIGURES.join(', ')}, ${COLUMNS.join(', ')} FROM stats_rollups WHERE app_id = ? AND unit = ? AND start >= ? AND start < ? ORDER BY start`)
      .raw(true);
    const n = FIGURES.length + 1;
    return (this.rollupStmt.all(appId, UNIT_CODE[level], from, to) as number[][]).map((r) => {
      const counters: Counters = {};
      for (let i = 0; i < BASE_COUNTERS.length; i++) if (r[n + i]) counters[BASE_COUNTERS[i]] = r[n + i];
      return {
        level,
        start: r[0],
        counters,
        channelSamples: r[1],
        channelSum: r[2],
        channelMax: r[3],
        channelMin: r[4],
        connectionSamples: r[5],
        connectionSum: r[6],
        connectionMax: r[7],
        connectionMin: r[8],
        lastSample: r[9],
      };
    });
  }
  private perIntervalStmt: Database.Statement | undefined;
  private rollupStmt: Database.Statement | undefined;

  /** The same buckets folded from the 6-second samples alone (what the rollups must always equal). */
  async queryFromSamples(q: StatsQuery): Promise<StatsBucket[]> {
    const bucket = BUCKET_SQL[q.unit];
    // Counters add up per bucket directly; channel figures need per-sample totals first.
    const counters = this.db
      .prepare(
        `SELECT ${bucket} AS bucket, ${COLUMNS.map((c) => `SUM(${c}) AS ${c}`).join(', ')}
         FROM stats_samples WHERE app_id = ? AND interval >= ? AND interval <= ? GROUP BY bucket`,
      )
      .all(q.appId, q.start, q.end) as ({ bucket: number | string } & Record<string, number>)[];
    const byBucket = new Map<string, Counters>();
    for (const row of counters) {
      const into: Counters = {};
      BASE_COUNTERS.forEach((name, i) => {
        if (row[COLUMNS[i]]) into[name] = row[COLUMNS[i]];
      });
      byBucket.set(String(row.bucket), into);
    }
    const samples = this.db
      .prepare(
        `SELECT ${bucket} AS bucket, SUM(ch > 0) AS channel_samples, SUM(ch) AS channel_sum, MAX(ch) AS channel_max,
                MIN(CASE WHEN ch > 0 THEN ch END) AS channel_min,
                SUM(co > 0) AS connection_samples, SUM(co) AS connection_sum, MAX(co) AS connection_max,
                MIN(CASE WHEN co > 0 THEN co END) AS connection_min, MAX(interval) AS last_sample
         FROM (SELECT interval, SUM(channels) AS ch, SUM(connections) AS co FROM stats_samples
               WHERE app_id = ? AND interval >= ? AND interval <= ? GROUP BY interval)
         GROUP BY bucket ORDER BY bucket`,
      )
      .all(q.appId, q.start, q.end) as {
      bucket: number | string;
      channel_samples: number;
      channel_sum: number;
      channel_max: number;
      channel_min: number | null;
      connection_samples: number;
      connection_sum: number;
      connection_max: number;
      connection_min: number | null;
      last_sample: number;
    }[];
    return samples.map((r) => ({
      start: bucketStartOf(q.unit, r.bucket),
      counters: byBucket.get(String(r.bucket)) ?? {},
      channelSamples: r.channel_samples,
      channelSum: r.channel_sum,
      channelMax: r.channel_samples > 0 ? r.channel_max : 0,
      channelMin: r.channel_min ?? 0,
      connectionSamples: r.connection_samples,
      connectionSum: r.connection_sum,
      connectionMax: r.connection_samples > 0 ? r.connection_max : 0,
      connectionMin: r.connection_min ?? 0,
      lastSample: r.last_sample,
    }));
  }

  /** One step down the primary key (app_id, interval, ...). */
  async appsWithData(): Promise<string[]> {
    // One primary-key seek per app (a DISTINCT would read every row).
    const next = this.db.prepare('SELECT app_id FROM stats_rollups WHERE app_id > ? ORDER BY app_id LIMIT 1').pluck();
    const apps: string[] = [];
    for (let at = next.get('') as string | undefined; at !== undefined; at = next.get(at) as string | undefined) apps.push(at);
    return apps;
  }

  async oldestInterval(appId: string): Promise<number | undefined> {
    this.oldestStmt ??= this.db.prepare('SELECT MIN(interval) AS oldest FROM stats_samples WHERE app_id = ?');
    const row = this.oldestStmt.get(appId) as { oldest: number | null };
    return row.oldest ?? undefined;
  }
  private oldestStmt: Database.Statement | undefined;

  async close(): Promise<void> {
    this.db.close();
  }
}
