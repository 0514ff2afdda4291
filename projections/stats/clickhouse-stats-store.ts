import { ClickHouseSession, type ClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlIdentifier, sqlTable, type Sql } from '../../src/stores/clickhouse/sql.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { BASE_COUNTERS, type Counters, type StatsBucket, type Unit } from './stats-sample.js';

const COUNTER_ID = new Map(BASE_COUNTERS.map((name, i) => [name, i + 1]));
import type { StatsCheckpoint, StatsQuery, StatsRow, StatsStore } from './stats-store.js';

export interface ClickHouseStatsStoreOptions {
  client?: ClickHouseClient;
  url?: string;
  database?: string;
  /** Prepended to table names; tests use a unique prefix each. */
  tablePrefix?: string;
  clock?: Clock;
}

interface BucketRow {
  bucket: string | number;
  counters: [(string | number)[], (string | number)[]];
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
  private readonly clock: Clock;
  private version = 0;

  constructor(options: ClickHouseStatsStoreOptions) {
    this.ch = new ClickHouseSession(options, 'ClickHouseStatsStore');
    this.database = options.database ?? 'default';
    const prefix = options.tablePrefix ?? '';
    this.samplesName = `${prefix}stats_samples`;
    this.samples = sqlTable(this.database, this.samplesName);
    this.checkpoints = sqlTable(this.database, `${prefix}stats_checkpoints`);
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
        topic String, partition UInt32, from_offset UInt64, finalized Int64, version UInt64
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY (topic, partition)`);
  }

  async write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint): Promise<void> {
    // Samples first: a crash in between replays samples the table already has, and loses none.
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
    this.version = Math.max(this.version + 1, this.clock.now() * 1000);
    await this.ch.client.insert({
      table: this.checkpoints.text,
      format: 'JSONEachRow',
      values: [...checkpoint].map(([partition, c]) => ({
        topic,
        partition,
        from_offset: c.from,
        finalized: Number.isFinite(c.finalized) ? c.finalized : -1,
        version: this.version,
      })),
    });
  }

  async loadCheckpoint(topic: string): Promise<StatsCheckpoint> {
    const rows = await this.ch.select<{ partition: number; from_offset: string | number; finalized: string | number; latest: string | number }>(sql`
      SELECT partition, argMax(from_offset, version) AS from_offset, argMax(finalized, version) AS finalized, max(version) AS latest
      FROM ${this.checkpoints} WHERE topic = ${topic} GROUP BY partition`);
    for (const r of rows) this.version = Math.max(this.version, Number(r.latest));
    return new Map(
      rows.map((r) => [Number(r.partition), { from: Number(r.from_offset), finalized: Number(r.finalized) < 0 ? -Infinity : Number(r.finalized) }]),
    );
  }

  async query(q: StatsQuery): Promise<StatsBucket[]> {
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
        channelSamples: Number(r.channel_samples),
        channelSum: Number(r.channel_sum),
        channelMax: Number(r.channel_max),
        channelMin: Number(r.channel_min),
        connectionSamples: Number(r.connection_samples),
        connectionSum: Number(r.connection_sum),
        connectionMax: Number(r.connection_max),
        connectionMin: Number(r.connection_min),
        lastSample: Number(r.last_sample),
      };
    });
  }

  async close(): Promise<void> {
    await this.ch.close();
  }
}
