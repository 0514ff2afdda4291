import Database from 'better-sqlite3';
import { addCounters } from './stats-sample.js';
import { toBuckets, type SampleTotal } from './bucketing.js';
import type { StatsCheckpoint, StatsQuery, StatsRow, StatsStore } from './stats-store.js';
import type { StatsBucket } from './stats-sample.js';

/**
 * Stats in the embedded mode: one row per (app, 6-second interval, topic, partition), replaced
 * only by a row of the same or a newer version, and the checkpoint in the same transaction.
 */
export class SqliteStatsStore implements StatsStore {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private writeTx!: (topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint) => void;

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
        slot INTEGER NOT NULL, version INTEGER NOT NULL, counters TEXT NOT NULL, channels INTEGER NOT NULL,
        PRIMARY KEY (app_id, interval, topic, partition, slot)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS stats_checkpoints (
        topic TEXT NOT NULL, partition INTEGER NOT NULL, from_offset INTEGER NOT NULL, finalized INTEGER NOT NULL,
        PRIMARY KEY (topic, partition));`);
    const upsert = this.db.prepare(`
      INSERT INTO stats_samples (app_id, interval, topic, partition, slot, version, counters, channels) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (app_id, interval, topic, partition, slot) DO UPDATE SET
        version = excluded.version, counters = excluded.counters, channels = excluded.channels
      WHERE excluded.version >= stats_samples.version`);
    const saveCheckpoint = this.db.prepare(
      `INSERT INTO stats_checkpoints (topic, partition, from_offset, finalized) VALUES (?, ?, ?, ?)
       ON CONFLICT (topic, partition) DO UPDATE SET from_offset = excluded.from_offset, finalized = excluded.finalized`,
    );
    this.writeTx = this.db.transaction((topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint) => {
      for (const r of rows) upsert.run(r.appId, r.interval, r.topic, r.partition, r.slot, r.version, JSON.stringify(r.counters), r.channels);
      for (const [partition, c] of checkpoint) {
        saveCheckpoint.run(topic, partition, c.from, Number.isFinite(c.finalized) ? c.finalized : -1);
      }
    });
  }

  async write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint): Promise<void> {
    this.writeTx(topic, rows, checkpoint);
  }

  async loadCheckpoint(topic: string): Promise<StatsCheckpoint> {
    const rows = this.db.prepare('SELECT partition, from_offset, finalized FROM stats_checkpoints WHERE topic = ?').all(topic) as {
      partition: number;
      from_offset: number;
      finalized: number;
    }[];
    return new Map(rows.map((r) => [r.partition, { from: r.from_offset, finalized: r.finalized < 0 ? -Infinity : r.finalized }]));
  }

  async query(q: StatsQuery): Promise<StatsBucket[]> {
    const rows = this.db
      .prepare('SELECT interval, counters, channels FROM stats_samples WHERE app_id = ? AND interval >= ? AND interval <= ? ORDER BY interval')
      .iterate(q.appId, q.start, q.end) as IterableIterator<{ interval: number; counters: string; channels: number }>;
    function* samples(): Generator<SampleTotal> {
      let current: SampleTotal | undefined;
      for (const r of rows) {
        if (current && current.interval !== r.interval) {
          yield current;
          current = undefined;
        }
        current ??= { interval: r.interval, counters: {}, channels: 0 };
        addCounters(current.counters, JSON.parse(r.counters));
        current.channels += r.channels;
      }
      if (current) yield current;
    }
    return toBuckets(samples(), q.unit);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
