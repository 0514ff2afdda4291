import Database from 'better-sqlite3';
import type {
  AppendRecord,
  ConsumeOptions,
  Log,
  LogPosition,
  LogRecord,
  Subscription,
  Topic,
} from '../port.js';
import { partitionFor } from '../partitioner.js';
import { SqliteWriter, type LogRow } from './sqlite-writer.js';

export interface EmbeddedLogOptions {
  /** Path of the SQLite file, or ':memory:' for tests that need no durability. */
  path: string;
  partitions?: number;
  /** Records older than this are deleted; must be at least the longest history retention. */
  retentionMs?: number;
  batchSize?: number;
}

interface Row {
  partition: number;
  offset: number;
  key: string;
  ts: number;
  value: Buffer;
}

/**
 * The embedded log: one SQLite table in WAL mode with synchronous=FULL, so a committed append
 * survives kill -9 and power loss. An append is one transaction, so a batch is all-or-nothing.
 * For a file, a writer thread commits while the event loop goes on; offsets are assigned here,
 * in call order. A failed commit fails the log: later appends are refused until a restart, so
 * offsets never have gaps. Consumers run in-process, are woken after every commit and read the
 * newest records from memory.
 */
export class EmbeddedLog implements Log {
  readonly kind = 'embedded' as const;
  private readonly db: Database.Database;
  private readonly partitionCount: number;
  private readonly ends = new Map<string, number[]>();
  private readonly waiters = new Map<string, Set<() => void>>();
  /** The newest records of each topic and partition, so consumers read them without SQLite. */
  private readonly recent = new Map<string, { start: number; records: LogRecord[] }[]>();
  private readonly recentMax = 20_000;
  private readonly insert: Database.Statement;
  private readonly select: Database.Statement;
  private readonly appendTx: (topic: Topic, records: AppendRecord[]) => LogPosition[];
  /** the writer thread (file logs); in-memory logs commit inline */
  private readonly writer: SqliteWriter | undefined;
  private failure: Error | undefined;
  private readonly retentionMs: number;
  private readonly batchSize: number;
  private closed = false;

  constructor(options: EmbeddedLogOptions) {
    this.db = new Database(options.path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS log_records (
      topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
      key TEXT NOT NULL, ts INTEGER NOT NULL, value BLOB NOT NULL,
      PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID`);
    this.db.exec(`CREATE TABLE IF NOT EXISTS log_meta (topic TEXT PRIMARY KEY, partitions INTEGER NOT NULL)`);
    this.partitionCount = options.partitions ?? 1;
    this.retentionMs = options.retentionMs ?? 7 * 24 * 3600_000;
    this.batchSize = options.batchSize ?? 1000;
    this.insert = this.db.prepare(
      'INSERT INTO log_records (topic, partition, offset, key, ts, value) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.select = this.db.prepare(
      'SELECT partition, offset, key, ts, value FROM log_records WHERE topic = ? AND partition = ? AND offset >= ? ORDER BY offset LIMIT ?',
    );
    this.appendTx = this.db.transaction((topic: Topic, records: AppendRecord[]) => {
      const ends = this.endsOf(topic);
      const positions: LogPosition[] = [];
      for (const r of records) {
        const partition = partitionFor(r.key, ends.length);
        const offset = ends[partition];
        this.insert.run(topic, partition, offset, r.key, r.timestamp, r.value);
        ends[partition] = offset + 1;
        positions.push({ partition, offset });
      }
      return positions;
    });
    this.writer = options.path === ':memory:' ? undefined : new SqliteWriter(options.path);
  }

  private endsOf(topic: string): number[] {
    let ends = this.ends.get(topic);
    if (ends) return ends;
    const meta = this.db.prepare('SELECT partitions FROM log_meta WHERE topic = ?').get(topic) as
      | { partitions: number }
      | undefined;
    const count = meta?.partitions ?? this.partitionCount;
    if (!meta) this.db.prepare('INSERT INTO log_meta (topic, partitions) VALUES (?, ?)').run(topic, count);
    ends = new Array<number>(count).fill(0);
    const rows = this.db
      .prepare('SELECT partition, MAX(offset) AS last FROM log_records WHERE topic = ? GROUP BY partition')
      .all(topic) as { partition: number; last: number }[];
    for (const row of rows) ends[row.partition] = row.last + 1;
    this.ends.set(topic, ends);
    return ends;
  }

  async append(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    if (this.closed) throw new Error('log is closed');
    if (this.failure) throw new Error(`the embedded log failed earlier (${this.failure.message}); restart the service`);
    if (records.length === 0) return [];
    if (this.writer) return this.appendThroughWriter(this.writer, topic, records);
    const ends = this.endsOf(topic);
    const before = [...ends];
    let positions: LogPosition[];
    try {
      positions = this.appendTx(topic, records);
    } catch (err) {
      // The transaction rolled back; so must the in-memory end offsets.
      this.ends.set(topic, before);
      throw err;
    }
    this.remember(topic, records, positions);
    this.wake(topic);
    return positions;
  }

  private async appendThroughWriter(writer: SqliteWriter, topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    const ends = this.endsOf(topic);
    const positions: LogPosition[] = [];
    const rows: LogRow[] = [];
    for (const r of records) {
      const partition = partitionFor(r.key, ends.length);
      const offset = ends[partition]++;
      positions.push({ partition, offset });
      rows.push([topic, partition, offset, r.key, r.timestamp, r.value]);
    }
    try {
      await writer.write(rows);
    } catch (err) {
      this.failure ??= err as Error;
      throw err;
    }
    this.remember(topic, records, positions);
    this.wake(topic);
    return positions;
  }

  /** Keeps committed records in memory (a bounded window per partition) for consumers. */
  private remember(topic: string, records: AppendRecord[], positions: LogPosition[]): void {
    let partitions = this.recent.get(topic);
    if (!partitions) this.recent.set(topic, (partitions = []));
    records.forEach((r, i) => {
      const { partition, offset } = positions[i];
      let window = partitions[partition];
      if (!window || window.start + window.records.length !== offset) window = partitions[partition] = { start: offset, records: [] };
      window.records.push({ topic, partition, offset, key: r.key, timestamp: r.timestamp, value: r.value });
      if (window.records.length > this.recentMax) {
        const drop = window.records.length - this.recentMax / 2;
        window.records.splice(0, drop);
        window.start += drop;
      }
    });
  }

  private wake(topic?: string): void {
    const topics = topic === undefined ? [...this.waiters.keys()] : [topic];
    for (const t of topics) {
      const waiters = this.waiters.get(t);
      if (!waiters) continue;
      this.waiters.delete(t);
      for (const w of waiters) w();
    }
  }

  private nextAppend(topic: string): Promise<void> {
    return new Promise((resolve) => {
      let waiters = this.waiters.get(topic);
      if (!waiters) this.waiters.set(topic, (waiters = new Set()));
      waiters.add(resolve);
    });
  }

  async read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    return this.readSync(topic, partition, fromOffset, maxRecords);
  }

  private readSync(topic: string, partition: number, fromOffset: number, maxRecords: number): LogRecord[] {
    const window = this.recent.get(topic)?.[partition];
    if (window && fromOffset >= window.start) {
      const from = fromOffset - window.start;
      return window.records.slice(from, from + maxRecords);
    }
    const rows = this.select.all(topic, partition, fromOffset, maxRecords) as Row[];
    return rows.map((r) => ({
      topic,
      partition: r.partition,
      offset: r.offset,
      key: r.key,
      timestamp: r.ts,
      value: r.value,
    }));
  }

  async partitions(topic: Topic): Promise<number> {
    return this.endsOf(topic).length;
  }

  async endOffsets(topic: Topic): Promise<Map<number, number>> {
    return new Map(this.endsOf(topic).map((end, p) => [p, end]));
  }

  consume(options: ConsumeOptions): Subscription {
    const { topic } = options;
    const ends = this.endsOf(topic);
    const positions = ends.map((_, p) => options.from.get(p) ?? 0);
    const startEnds = [...ends];
    let stopped = false;
    let markCaughtUp!: () => void;
    const caughtUp = new Promise<void>((resolve) => (markCaughtUp = resolve));

    const loop = async (): Promise<void> => {
      let reportedCaughtUp = false;
      while (!stopped && !this.closed) {
        let delivered = false;
        for (let p = 0; p < positions.length && !stopped && !this.closed; p++) {
          const records = this.readSync(topic, p, positions[p], this.batchSize);
          if (records.length === 0) continue;
          try {
            await options.handle(records);
            positions[p] = records[records.length - 1].offset + 1;
            delivered = true;
          } catch (err) {
            options.onError?.(err);
            await new Promise((r) => setTimeout(r, 200));
            delivered = true;
          }
        }
        if (!reportedCaughtUp && positions.every((pos, p) => pos >= startEnds[p])) {
          reportedCaughtUp = true;
          markCaughtUp();
        }
        if (!delivered && !stopped) await this.nextAppend(topic);
      }
      markCaughtUp();
    };
    const running = loop();

    return {
      caughtUp,
      highWatermarks: () => new Map(this.endsOf(topic).map((end, p) => [p, end])),
      stop: async () => {
        stopped = true;
        this.wake();
        await running;
      },
    };
  }

  /** Deletes records past retention; the log must keep at least the longest history retention. */
  enforceRetention(now: number): number {
    // The newest record of each partition stays, so end offsets survive a restart.
    return this.db
      .prepare(
        `DELETE FROM log_records WHERE topic <> 'apps' AND ts < ? AND offset < (
           SELECT MAX(l.offset) FROM log_records l WHERE l.topic = log_records.topic AND l.partition = log_records.partition)`,
      )
      .run(now - this.retentionMs).changes;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake();
    await this.writer?.close();
    this.db.close();
  }
}
