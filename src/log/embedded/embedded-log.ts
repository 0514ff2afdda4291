import Database from '../../stores/sqlite/driver.mjs';
import type {
  AppendRecord,
  ConsumeOptions,
  Log,
  LogPosition,
  LogRecord,
  RecordVisitor,
  ScanResult,
  Subscription,
  Topic,
} from '../port.js';
import { LogClosedError, Topics } from '../port.js';
import { partitionFor } from '../partitioner.js';
import { pumpedSubscription } from './embedded-subscription.js';
import { SqliteWriter } from './sqlite-writer.js';
import { keyBytesOf, packSegment, visitRecord, type Segment } from './segment.js';
import { chainSegment, lastLink, ZERO_LINK } from './chain.mjs';
import { ChainReader, type ChainHead, type ChainedRecord } from './chain-reader.js';
import { retentionChunk } from './retention.mjs';
import { LostRecords } from '../lost-records.js';
import { EmbeddedCheckpoints, type CheckpointOptions } from './embedded-checkpoints.js';
import { RecentWindows } from './recent-windows.js';
import { fromSegment, readStream, scanStream, STREAM_END, STREAM_END_OFFSET, STREAM_SHIFT, STREAM_START } from './stream-rows.js';

export type { ChainHead, ChainedRecord } from './chain-reader.js';

export interface EmbeddedLogOptions {
  /** Path of the SQLite file, or ':memory:' for tests that need no durability. */
  path: string;
  partitions?: number;
  /** Records older than this are deleted; must be at least the longest history retention. */
  retentionMs?: number;
  batchSize?: number;
  /** A consumer's batch stops at the record that reaches this many bytes (one record at least). */
  batchBytes?: number;
  /** Bytes of values and keys the in-memory windows (recent-windows.ts) hold, all partitions together. */
  windowBytes?: number;
  /** Bytes of memory shared with the writer thread for the segments of commits in flight. */
  writerRingBytes?: number;
  /**
   * Signed checkpoints of the chain heads (src/audit/checkpoint.ts), appended to the `audit` topic
   * every intervalMs when the log has changed, and at close. Absent: none (the replay CLI, tests).
   */
  checkpoints?: CheckpointOptions;
  /** Where a consumer behind retention is told of (LostRecords); absent: counted only. */
  logger?: { error(obj: object, msg?: string): void };
}

/**
 * A stream is one partition of one topic (log_streams). Its segments are one range of row ids,
 * id = (stream << STREAM_SHIFT) + first_offset, in offset order: an append adds a row at the end
 * of its range of the table's own B-tree, and a read is a range of ids. A segment of up to about
 * 4 KB sits in its leaf page, so a commit writes about three pages (leaf, parent, header), where
 * the first layout (WITHOUT ROWID, keyed by topic, partition and first_offset) spilled anything
 * over about 1 KB to overflow pages and wrote four or five: each page costs the writer thread a
 * write and its share of the fsync.
 */

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS log_streams (
    stream INTEGER PRIMARY KEY, topic TEXT NOT NULL, partition INTEGER NOT NULL, UNIQUE (topic, partition));
  CREATE TABLE IF NOT EXISTS log_segments (
    id INTEGER PRIMARY KEY, topic TEXT NOT NULL, partition INTEGER NOT NULL, first_offset INTEGER NOT NULL,
    count INTEGER NOT NULL, last_ts INTEGER NOT NULL, records BLOB NOT NULL, chain BLOB);
  CREATE TABLE IF NOT EXISTS log_meta (topic TEXT PRIMARY KEY, partitions INTEGER NOT NULL)`;

/** A segment's row: named parameters are a Segment's fields and `topic` (the writer thread binds the same). */
const INSERT_SEGMENT = `INSERT INTO log_segments (id, topic, partition, first_offset, count, last_ts, records, chain)
  VALUES ((@stream << ${STREAM_SHIFT}) + CAST(@firstOffset AS INTEGER), @topic, @partition, @firstOffset, @count, @lastTs, @records, @chain)`;

/**
 * The chain column of a stream's newest row: the link before its first record, then each record's
 * link (chain.mjs), 32 bytes each; NULL in rows written before the log kept a chain.
 */
const LAST_CHAIN = `SELECT chain FROM log_segments WHERE id >= (@stream << ${STREAM_SHIFT}) AND id < ((@stream + 1) << ${STREAM_SHIFT}) ORDER BY id DESC LIMIT 1`;

/** Retention's statements (retention.mjs): a stream's oldest rows, its newest row's first offset, its rows before offset @to. */
const RETENTION = {
  oldest: `SELECT first_offset, last_ts FROM log_segments WHERE id >= ${STREAM_START} AND id < ${STREAM_END} ORDER BY id LIMIT @limit`,
  newest: `SELECT first_offset FROM log_segments WHERE id >= ${STREAM_START} AND id < ${STREAM_END} ORDER BY id DESC LIMIT 1`,
  deleteBefore: `DELETE FROM log_segments WHERE id >= ${STREAM_START} AND id < ${STREAM_START} + CAST(@to AS INTEGER)`,
};

/**
 * The embedded log: SQLite in WAL mode with synchronous=FULL, so a committed append survives
 * kill -9 and power loss. An append is all-or-nothing (one transaction, which appends queued up
 * behind a commit share, so one fsync covers them). It stores
 * one row per partition per append (a segment: the consecutive records of that append, packed
 * with MessagePack), so the cost of a commit grows with appends rather than with records.
 * For a file, a writer thread commits while the event loop goes on; offsets are assigned here,
 * in call order. A failed commit (a full disk) fails the log for a moment: later appends are
 * refused at once, so offsets never have gaps, until every commit in flight has been answered;
 * then the next append reads the end offsets again from SQLite (the failed transactions rolled
 * back), resets the writer thread and is tried. Consumers run in-process, right after every
 * commit, and read the newest records from memory (only committed ones are there).
 */
export class EmbeddedLog implements Log {
  readonly kind = 'embedded' as const;
  /**
   * Offsets are assigned at the call and the writer commits in order, failing everything after a
   * failure. Three: while one commits, the appends queued behind it share the next transaction
   * (measured against two, which never queue more than one: 1.01 to 1.05 of the throughput).
   */
  readonly maxAppendsInFlight = 3;
  private readonly db: Database.Database;
  private readonly partitionCount: number;
  private readonly ends = new Map<string, number[]>();
  /** each topic's stream numbers, by partition */
  private readonly streams = new Map<string, number[]>();
  /** each topic's consumers (see consume) */
  private readonly pumps = new Map<string, Set<() => void>>();
  /** The newest records of each topic and partition, which consumers read without SQLite. */
  private readonly recent: RecentWindows;
  /** Records retention deleted before a consumer of this process read them (README: Records the log deleted before they were applied). */
  private readonly lostOnes: LostRecords;
  private readonly insert: Database.Statement;
  private readonly select: Database.Statement;
  private readonly chains: ChainReader;
  private readonly insertTx: (topic: Topic, segments: Segment[]) => void;
  private readonly streamOfStmt: Database.Statement;
  private readonly addStream: Database.Statement;
  private readonly streamEnd: Database.Statement;
  /** the writer thread (file logs); in-memory logs commit inline */
  private readonly writer: SqliteWriter | undefined;
  /** a commit failed: appends are refused until recover() */
  private failure: Error | undefined;
  /** appends sent to the writer thread and not answered yet */
  private writesInFlight = 0;
  private readonly retentionMs: number;
  private readonly batchSize: number;
  private readonly batchBytes: number;
  private closed = false;
  /** in-memory logs: each stream's chain head (file logs: the writer thread's) */
  private readonly inlineHeads = new Map<number, Buffer>();
  private readonly lastChain: Database.Statement;
  private readonly checkpoints: EmbeddedCheckpoints | undefined;

  constructor(options: EmbeddedLogOptions) {
    this.db = new Database(options.path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.migrateKeyedSegments();
    this.db.exec(SCHEMA);
    const columns = this.db.prepare(`SELECT name FROM pragma_table_info('log_segments')`).pluck().all() as string[];
    if (!columns.includes('chain')) this.db.exec('ALTER TABLE log_segments ADD COLUMN chain BLOB');
    this.lastChain = this.db.prepare(LAST_CHAIN).pluck();
    this.insert = this.db.prepare(INSERT_SEGMENT);
    this.streamOfStmt = this.db.prepare('SELECT stream FROM log_streams WHERE topic = ? AND partition = ?').pluck();
    this.addStream = this.db.prepare('INSERT INTO log_streams (topic, partition) VALUES (?, ?)');
    this.streamEnd = this.db.prepare(STREAM_END_OFFSET).pluck();
    this.migrateRecordRows();
    this.partitionCount = options.partitions ?? 1;
    this.retentionMs = options.retentionMs ?? 7 * 24 * 3600_000;
    this.lostOnes = new LostRecords(options.logger);
    this.batchSize = options.batchSize ?? 1000;
    this.batchBytes = options.batchBytes ?? 8 * 1024 * 1024;
    this.recent = new RecentWindows(options.windowBytes ?? 64 * 1024 * 1024);
    this.select = this.db.prepare(fromSegment('first_offset, records'));
    this.chains = new ChainReader(this.db, fromSegment('first_offset, count, records, chain'), STREAM_SHIFT);
    this.insertTx = this.db.transaction((topic: Topic, segments: Segment[]) => {
      for (const segment of segments) {
        const records = packSegment(segment.records);
        const prev = this.inlineHeads.get(segment.stream) ?? lastLink(this.lastChain.get({ stream: segment.stream }) as Buffer | undefined) ?? ZERO_LINK;
        const chain = chainSegment(prev, records, segment.firstOffset);
        this.insert.run({ ...segment, topic, records, chain });
        this.inlineHeads.set(segment.stream, lastLink(chain)!);
      }
    });
    this.writer = options.path === ':memory:' ? undefined : new SqliteWriter(options.path, INSERT_SEGMENT, LAST_CHAIN, RETENTION, options.writerRingBytes);
    if (options.checkpoints) {
      this.checkpoints = new EmbeddedCheckpoints(
        options.checkpoints,
        () => this.chainHeads(),
        (value) => this.append(Topics.audit, [{ key: 'checkpoint', timestamp: Date.now(), value }]),
      );
    }
  }

  /** Each topic partition's chain head, as committed (rows written before chains have none). */
  chainHeads(): ChainHead[] {
    return this.chains.heads();
  }

  /**
   * Reads records with their links (an audit's read, from SQLite: the in-memory window keeps none).
   * A row's first record carries `prev` too, the link before it.
   */
  readChained(topic: Topic, partition: number, fromOffset: number, maxRecords: number): ChainedRecord[] {
    const stream = this.streams.get(topic)?.[partition] ?? (this.streamOfStmt.get(topic, partition) as number | undefined);
    return stream === undefined ? [] : this.chains.read(topic, partition, stream, fromOffset, maxRecords);
  }

  /** Appends a signed checkpoint of the chain heads to the `audit` topic, if they moved since the last (embedded-checkpoints.ts). */
  async checkpoint(): Promise<void> {
    if (!this.closed) await this.checkpoints?.checkpoint();
  }

  /** The stream of a topic's partition, numbered on first use. */
  private streamOf(topic: string, partition: number): number {
    const stream = this.streamOfStmt.get(topic, partition) as number | undefined;
    return stream ?? Number(this.addStream.run(topic, partition).lastInsertRowid);
  }

  /**
   * Logs written with the first segment layout (WITHOUT ROWID, keyed by topic, partition and
   * first_offset): their segments move to the current one, stream by stream, in one transaction.
   */
  private migrateKeyedSegments(): void {
    const columns = this.db.prepare(`SELECT name FROM pragma_table_info('log_segments')`).pluck().all() as string[];
    if (columns.length === 0 || columns.includes('id')) return;
    this.db.transaction(() => {
      this.db.exec('ALTER TABLE log_segments RENAME TO log_segments_keyed');
      this.db.exec(SCHEMA);
      this.db.exec(`INSERT OR IGNORE INTO log_streams (topic, partition)
        SELECT DISTINCT topic, partition FROM log_segments_keyed ORDER BY topic, partition`);
      this.db.exec(`INSERT INTO log_segments (id, topic, partition, first_offset, count, last_ts, records)
        SELECT (st.stream << ${STREAM_SHIFT}) + s.first_offset, s.topic, s.partition, s.first_offset, s.count, s.last_ts, s.records
        FROM log_segments_keyed s JOIN log_streams st ON st.topic = s.topic AND st.partition = s.partition
        ORDER BY s.topic, s.partition, s.first_offset`);
      this.db.exec('DROP TABLE log_segments_keyed');
    })();
  }

  /** Logs written before segments kept one row per record (table log_records): one segment each. */
  private migrateRecordRows(): void {
    const old = this.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_records'`).get();
    if (!old) return;
    const select = this.db.prepare(
      'SELECT topic, partition, offset, key, ts, value FROM log_records WHERE (topic, partition, offset) > (?, ?, ?) ORDER BY topic, partition, offset LIMIT 10000',
    );
    this.db.transaction(() => {
      let after: [string, number, number] = ['', -1, -1];
      for (;;) {
        const rows = select.all(...after) as { topic: string; partition: number; offset: number; key: string; ts: number; value: Buffer }[];
        if (rows.length === 0) break;
        for (const r of rows) {
          const records = packSegment([{ key: r.key, timestamp: r.ts, value: r.value }]);
          this.insert.run({ topic: r.topic, stream: this.streamOf(r.topic, r.partition), partition: r.partition, firstOffset: r.offset, count: 1, lastTs: r.ts, records, chain: null });
        }
        const last = rows[rows.length - 1];
        after = [last.topic, last.partition, last.offset];
      }
      this.db.exec('DROP TABLE log_records');
    })();
  }

  private endsOf(topic: string): number[] {
    let ends = this.ends.get(topic);
    if (ends) return ends;
    const meta = this.db.prepare('SELECT partitions FROM log_meta WHERE topic = ?').get(topic) as
      | { partitions: number }
      | undefined;
    const count = meta?.partitions ?? this.partitionCount;
    if (!meta) this.db.prepare('INSERT INTO log_meta (topic, partitions) VALUES (?, ?)').run(topic, count);
    const streams = Array.from({ length: count }, (_, p) => this.streamOf(topic, p));
    ends = streams.map((stream) => (this.streamEnd.get({ stream }) as number | undefined) ?? 0);
    this.streams.set(topic, streams);
    this.ends.set(topic, ends);
    return ends;
  }

  async append(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    if (this.closed) throw new LogClosedError();
    if (this.failure) this.recover();
    if (records.length === 0) return [];
    const ends = this.endsOf(topic);
    if (!this.writer) return this.appendInline(topic, ends, records);
    const { positions, segments } = this.segmentsOf(ends, this.streams.get(topic)!, records);
    this.writesInFlight++;
    try {
      await this.writer.write(topic, segments);
    } catch (err) {
      this.failure ??= err as Error;
      throw new Error(`embedded log write failed: ${(err as Error).message}`);
    } finally {
      this.writesInFlight--;
    }
    this.recent.remember(topic, records, positions);
    this.wake(topic);
    return positions;
  }

  /** In-memory logs commit on the event loop; a failed transaction rolls back, and the end offsets with it. */
  private appendInline(topic: Topic, ends: number[], records: AppendRecord[]): LogPosition[] {
    const before = [...ends];
    const { positions, segments } = this.segmentsOf(ends, this.streams.get(topic)!, records);
    try {
      this.insertTx(topic, segments);
    } catch (err) {
      this.ends.set(topic, before);
      this.inlineHeads.clear(); // read again from what SQLite holds
      throw err;
    }
    this.recent.remember(topic, records, positions);
    this.wake(topic);
    return positions;
  }

  /** Why no append can commit again until a restart (the writer thread is gone), if so: GET /ready stays down. */
  get unavailable(): Error | undefined {
    return this.writer?.dead;
  }

  /**
   * After a failed commit: throws (the append is refused) while commits are in flight, whose
   * offsets follow the failed ones and which the writer fails too. Once all are answered, the
   * end offsets are read again (what SQLite holds, so a commit that failed after all its data
   * landed is kept, not overwritten), the writer is told to take commits again, and the append
   * goes on. A writer thread that exited stays failed: see SqliteWriter's exit handler.
   */
  private recover(): void {
    const failure = this.failure!;
    const dead = this.writer?.dead;
    if (dead) throw new Error(`embedded log unavailable: ${dead.message}; restart the service`);
    if (this.writesInFlight > 0) throw new Error(`embedded log recovering from a failed write: ${failure.message}`);
    for (const [topic, ends] of this.ends) {
      const streams = this.streams.get(topic)!;
      for (let p = 0; p < ends.length; p++) ends[p] = (this.streamEnd.get({ stream: streams[p] }) as number | undefined) ?? 0;
    }
    this.writer!.reset();
    this.failure = undefined;
  }

  /** Offsets for the records (advancing `ends`), and one segment per partition they go to. */
  private segmentsOf(ends: number[], streams: number[], records: AppendRecord[]): { positions: LogPosition[]; segments: Segment[] } {
    const positions: LogPosition[] = [];
    const byPartition = new Map<number, { firstOffset: number; lastTs: number; records: AppendRecord[] }>();
    for (const r of records) {
      const partition = partitionFor(r.key, ends.length);
      const offset = ends[partition]++;
      positions.push({ partition, offset });
      let segment = byPartition.get(partition);
      if (!segment) byPartition.set(partition, (segment = { firstOffset: offset, lastTs: r.timestamp, records: [] }));
      segment.records.push(r);
      segment.lastTs = Math.max(segment.lastTs, r.timestamp);
    }
    const segments: Segment[] = [];
    for (const [partition, s] of byPartition) {
      segments.push({ stream: streams[partition], partition, firstOffset: s.firstOffset, count: s.records.length, lastTs: s.lastTs, records: s.records });
    }
    return { positions, segments };
  }

  /** Runs the consumers of a topic after a commit to it. */
  private wake(topic: string): void {
    const pumps = this.pumps.get(topic);
    if (pumps) for (const pump of pumps) pump();
  }

  /** Records retention deleted before a consumer of this process applied them, by topic (GET /metrics: cm_log_records_lost_total). */
  lostRecords(): { topic: string; count: number }[] {
    return this.lostOnes.counted();
  }

  async read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    return this.readSync(topic, partition, fromOffset, maxRecords);
  }

  /** Up to maxRecords records from fromOffset, ending at the first that reaches maxBytes (a consumer's batch: one record at least). */
  private readSync(topic: string, partition: number, fromOffset: number, maxRecords: number, maxBytes = Infinity): LogRecord[] {
    const recent = this.recent.read(topic, partition, fromOffset, maxRecords, maxBytes);
    if (recent) return recent;
    // A read numbers no stream: one that was never written to has nothing to read.
    const stream = this.streams.get(topic)?.[partition] ?? (this.streamOfStmt.get(topic, partition) as number | undefined);
    if (stream === undefined || maxRecords <= 0) return [];
    return readStream(this.select, topic, partition, stream, fromOffset, maxRecords, maxBytes);
  }

  async scan(topic: Topic, partition: number, fromOffset: number, maxRecords: number, visit: RecordVisitor): Promise<ScanResult> {
    const result: ScanResult = { count: 0, next: fromOffset, lastTimestamp: -Infinity };
    if (maxRecords <= 0) return result;
    const held = this.recent.holding(topic, partition, fromOffset);
    if (held) {
      const { records, index } = held;
      const to = Math.min(records.length, index + maxRecords);
      for (let i = index; i < to; i++) {
        const r = records[i];
        visitRecord(visit, result, r.offset, r.timestamp, r.value, 0, r.value.length, keyBytesOf(r.key));
      }
      return result;
    }
    const stream = this.streams.get(topic)?.[partition] ?? (this.streamOfStmt.get(topic, partition) as number | undefined);
    if (stream === undefined) return result;
    return scanStream(this.select, stream, fromOffset, maxRecords, visit, result);
  }

  /**
   * The topics this log numbered with another partition count than `partitions` (EMBEDDED_PARTITIONS
   * given after they were made): theirs stays, as history serials are offsets within a partition.
   */
  partitionCountsOtherThan(partitions: number): { topic: string; partitions: number }[] {
    return this.db.prepare('SELECT topic, partitions FROM log_meta WHERE partitions != ? ORDER BY topic').all(partitions) as { topic: string; partitions: number }[];
  }

  async partitions(topic: Topic): Promise<number> {
    return this.endsOf(topic).length;
  }

  async endOffsets(topic: Topic): Promise<Map<number, number>> {
    return new Map(this.endsOf(topic).map((end, p) => [p, end]));
  }

  /** A consumer of `options.topic` (embedded-subscription.ts): run again after each commit to it. */
  consume(options: ConsumeOptions): Subscription {
    return pumpedSubscription(
      {
        ends: (topic) => this.endsOf(topic),
        read: (topic, partition, fromOffset) => this.readSync(topic, partition, fromOffset, this.batchSize, this.batchBytes),
        release: (topic, partition) => this.recent.release(topic, partition),
        isClosed: () => this.closed,
        lost: (topic, partition, from, to) => this.lostOnes.lost(topic, topic, partition, from, to, options.consumer),
        register: (topic, positions, pump) => {
          let pumps = this.pumps.get(topic);
          if (!pumps) this.pumps.set(topic, (pumps = new Set()));
          const reader = this.recent.addReader(topic, positions);
          pumps.add(pump);
          return { pump: () => void pumps.delete(pump), reader };
        },
      },
      options,
    );
  }

  /**
   * Deletes, in each partition but the apps topic's, the oldest segments whose records are all past
   * retention, up to the first that is not, never the newest (end offsets survive a restart): the log
   * must keep at least the longest history retention. Resolves with how many segments went. A file
   * log's writer thread deletes a chunk at a time between commits (retention.mjs): one DELETE of
   * every expired row, on the event loop, blocked it and the commits for as long as it ran (a
   * million expired rows: seconds), and commits waiting past busy_timeout failed.
   */
  async enforceRetention(now: number): Promise<number> {
    if (this.closed) return 0;
    const streams = this.db.prepare(`SELECT stream FROM log_streams WHERE topic <> 'apps' ORDER BY stream`).pluck().all() as number[];
    const cutoff = now - this.retentionMs;
    if (this.writer) return this.writer.retain(streams, cutoff);
    const chunk = retentionChunk(this.db, RETENTION);
    let deleted = 0;
    for (const stream of streams) {
      for (let more = true; more; ) {
        const step = chunk(stream, cutoff);
        deleted += step.deleted;
        more = step.more;
      }
    }
    return deleted;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // The last checkpoint covers everything appended; a log that cannot take it closes all the same.
    await this.checkpoints?.stop();
    this.closed = true;
    await this.writer?.close();
    this.db.close();
  }
}
