import Database from '../../src/stores/sqlite/driver.mjs';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import type { Checkpoint } from '../../src/log/port.js';
import type { StoredMessage } from '../../src/domain/message.js';
import type { HistoryEntry, HistoryQuery } from './history-entry.js';
import type { HistoryStore, LogMark, PersistedEntry } from './history-store.js';
import { expiryDay } from './retention.js';

interface Row {
  app_id: string;
  channel: string;
  serial: number;
  partition: number;
  message: Buffer;
}

/**
 * Persisted history in the embedded mode: a SQLite table keyed by (app, channel, serial), so a
 * replayed row is ignored, with the checkpoint written in the same transaction. Retention drops
 * whole expiry days, like the ClickHouse store drops partitions.
 */
export class SqliteHistoryStore implements HistoryStore {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private writeTx!: (rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]) => void;

  private readonly table: string;

  /** `name` keeps stores apart in one file: message history, presence history. */
  constructor(path: string, private readonly consumer = 'history', name = 'history') {
    if (!/^\w+$/.test(name)) throw new Error(`bad store name ${name}`);
    this.table = `${name}_messages`;
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    // The log is the source of truth; this state is rebuilt from it after a crash.
    this.db.pragma('synchronous = NORMAL');
  }

  async init(): Promise<void> {
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        app_id TEXT NOT NULL, channel TEXT NOT NULL, serial INTEGER NOT NULL, partition INTEGER NOT NULL,
        ts INTEGER NOT NULL, expires_on TEXT NOT NULL, message BLOB NOT NULL,
        PRIMARY KEY (app_id, channel, serial)) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS ${this.table}_expiry ON ${this.table} (expires_on);
      CREATE TABLE IF NOT EXISTS projection_checkpoints (
        consumer TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
        PRIMARY KEY (consumer, partition));
      CREATE TABLE IF NOT EXISTS projection_marks (
        consumer TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL, ts INTEGER NOT NULL,
        PRIMARY KEY (consumer, partition, offset));`);
    const insert = this.db.prepare(
      `INSERT OR IGNORE INTO ${this.table} (app_id, channel, serial, partition, ts, expires_on, message) VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
    const saveCheckpoint = this.db.prepare(
      'INSERT INTO projection_checkpoints (consumer, partition, next_offset) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET next_offset = excluded.next_offset',
    );
    const clearMarks = this.db.prepare('DELETE FROM projection_marks WHERE consumer = ? AND partition = ?');
    const saveMark = this.db.prepare('INSERT OR REPLACE INTO projection_marks (consumer, partition, offset, ts) VALUES (?, ?, ?, ?)');
    this.writeTx = this.db.transaction((rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]) => {
      for (const r of rows) {
        insert.run(r.appId, r.channel, r.serial, r.partition, r.message.timestamp, expiryDay(r.message.timestamp, r.retentionHours), Buffer.from(packValue(r.message)));
      }
      for (const [partition, offset] of checkpoint) {
        saveCheckpoint.run(this.consumer, partition, offset);
        clearMarks.run(this.consumer, partition);
      }
      for (const m of marks) saveMark.run(this.consumer, m.partition, m.offset, m.timestamp);
    });
  }

  async write(rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]): Promise<void> {
    this.writeTx(rows, checkpoint, marks);
  }

  async loadCheckpoint(): Promise<Checkpoint> {
    const rows = this.db
      .prepare('SELECT partition, next_offset FROM projection_checkpoints WHERE consumer = ?')
      .all(this.consumer) as { partition: number; next_offset: number }[];
    return new Map(rows.map((r) => [r.partition, r.next_offset]));
  }

  async loadMarks(): Promise<LogMark[]> {
    const rows = this.db
      .prepare('SELECT partition, offset, ts FROM projection_marks WHERE consumer = ? ORDER BY offset')
      .all(this.consumer) as { partition: number; offset: number; ts: number }[];
    return rows.map((r) => ({ partition: r.partition, offset: r.offset, timestamp: r.ts }));
  }

  async query(q: HistoryQuery): Promise<HistoryEntry[]> {
    const backwards = q.direction === 'backwards';
    const after = q.after ?? (backwards ? Number.MAX_SAFE_INTEGER : -1);
    const rows = this.db
      .prepare(
        `SELECT app_id, channel, serial, partition, message FROM ${this.table}
         WHERE app_id = ? AND channel = ? AND ts >= ? AND ts <= ? AND serial ${backwards ? '<' : '>'} ?
         ORDER BY serial ${backwards ? 'DESC' : 'ASC'} LIMIT ?`,
      )
      .all(q.appId, q.channel, q.start, q.end, after, q.limit) as Row[];
    return rows.map((r) => ({
      appId: r.app_id,
      channel: r.channel,
      serial: r.serial,
      partition: r.partition,
      message: unpackValue(r.message) as StoredMessage,
    }));
  }

  async dropExpired(now: number): Promise<number> {
    const today = new Date(now).toISOString().slice(0, 10);
    const days = this.db.prepare(`SELECT DISTINCT expires_on FROM ${this.table} WHERE expires_on < ?`).all(today);
    this.db.prepare(`DELETE FROM ${this.table} WHERE expires_on < ?`).run(today);
    return days.length;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
