// The embedded log of an existing DATA_DIR as the command-line tools read it (replay, its export and
// --verify; rebuild), beside a running service or not: a read-only SQLite connection that writes
// nothing to log.db (no log_meta row, no stream numbered, no migration, no WAL checkpoint: a
// read-only connection takes none, even as the last one to close), where EmbeddedLog, the service's,
// numbers a topic on first use, so a tool that read a topic first fixed its partition count for the
// service. What such a reader does to the files is what every SQLite reader does: it reads the WAL,
// marks its place in the -shm, and makes the two (empty) when the service is stopped.
import Database from '../../stores/sqlite/driver.mjs';
import type { AppendRecord, ConsumeOptions, Log, LogPosition, LogRecord, RecordVisitor, ScanResult, Subscription, Topic } from '../port.js';
import { ChainReader, type ChainHead, type ChainedRecord } from './chain-reader.js';
import { fromSegment, readStream, scanStream, STREAM_END_OFFSET, STREAM_LOW_OFFSET, STREAM_SHIFT } from './stream-rows.js';

/** log.db is not a log this version reads as it stands (an older layout, which only the service migrates). */
export class LogLayoutError extends Error {
  override readonly name = 'LogLayoutError';
}

export interface EmbeddedLogReaderOptions {
  path: string;
  /**
   * Every read from one snapshot of the log, taken at the first (one read transaction for the
   * reader's life): the service's appends and its retention's deletes after it are not seen, so a
   * verification reading a partition in batches never sees its oldest rows vanish between two (a
   * gap it would report as records removed). While it is held the service's WAL cannot start over
   * from its beginning, so it grows by what the service writes meanwhile; closing the reader ends it.
   */
  snapshot?: boolean;
}

/**
 * The embedded log, read only (Log's reads; append and consume throw). Partition counts are the
 * stored ones (log_meta): a topic the log holds no row of has one empty partition, as far as this
 * reader says, and still none stored, whatever EMBEDDED_PARTITIONS the tool was given.
 */
export class EmbeddedLogReader implements Log {
  readonly kind = 'embedded' as const;
  private readonly db: Database.Database;
  private readonly meta: Database.Statement;
  private readonly streamsOf: Database.Statement;
  private readonly streamEnd: Database.Statement;
  private readonly streamLow: Database.Statement;
  private readonly select: Database.Statement;
  private readonly chains: ChainReader;
  /** each topic's streams by partition (undefined: a partition never written to) */
  private readonly streams = new Map<string, (number | undefined)[]>();

  constructor(options: EmbeddedLogReaderOptions) {
    this.db = new Database(options.path, { readonly: true, fileMustExist: true });
    try {
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('query_only = ON');
      checkLayout(this.db, options.path);
      this.meta = this.db.prepare('SELECT partitions FROM log_meta WHERE topic = ?').pluck();
      this.streamsOf = this.db.prepare('SELECT partition, stream FROM log_streams WHERE topic = ?');
      this.streamEnd = this.db.prepare(STREAM_END_OFFSET).pluck();
      this.streamLow = this.db.prepare(STREAM_LOW_OFFSET).pluck();
      this.select = this.db.prepare(fromSegment('first_offset, records'));
      this.chains = new ChainReader(this.db, fromSegment('first_offset, count, records, chain'), STREAM_SHIFT);
      if (options.snapshot) {
        this.db.exec('BEGIN');
        this.meta.get(''); // the read transaction (the snapshot) starts at a transaction's first read
      }
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  private streamsOfTopic(topic: string): (number | undefined)[] {
    let streams = this.streams.get(topic);
    if (streams) return streams;
    const rows = this.streamsOf.all(topic) as { partition: number; stream: number }[];
    const stored = this.meta.get(topic) as number | undefined;
    // The service stores a topic's count before its first row; rows without one: as many as they name.
    const count = stored ?? Math.max(1, ...rows.map((r) => r.partition + 1));
    streams = Array.from({ length: count }, (_, p) => rows.find((r) => r.partition === p)?.stream);
    this.streams.set(topic, streams);
    return streams;
  }

  private streamOf(topic: string, partition: number): number | undefined {
    return this.streamsOfTopic(topic)[partition];
  }

  async partitions(topic: Topic): Promise<number> {
    return this.streamsOfTopic(topic).length;
  }

  async endOffsets(topic: Topic): Promise<Map<number, number>> {
    return new Map(this.streamsOfTopic(topic).map((stream, p) => [p, stream === undefined ? 0 : ((this.streamEnd.get({ stream }) as number | undefined) ?? 0)]));
  }

  /** The first offset of each partition's oldest row (retention deletes rows from the start), or its end when it has none. */
  async lowOffsets(topic: Topic): Promise<Map<number, number>> {
    const ends = await this.endOffsets(topic);
    return new Map(this.streamsOfTopic(topic).map((stream, p) => [p, stream === undefined ? 0 : ((this.streamLow.get({ stream }) as number | undefined) ?? ends.get(p) ?? 0)]));
  }

  async read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    const stream = this.streamOf(topic, partition);
    return stream === undefined || maxRecords <= 0 ? [] : readStream(this.select, topic, partition, stream, fromOffset, maxRecords);
  }

  async scan(topic: Topic, partition: number, fromOffset: number, maxRecords: number, visit: RecordVisitor): Promise<ScanResult> {
    const result: ScanResult = { count: 0, next: fromOffset, lastTimestamp: -Infinity };
    const stream = this.streamOf(topic, partition);
    return stream === undefined || maxRecords <= 0 ? result : scanStream(this.select, stream, fromOffset, maxRecords, visit, result);
  }

  /** Records with their links (EmbeddedLog.readChained). */
  readChained(topic: Topic, partition: number, fromOffset: number, maxRecords: number): ChainedRecord[] {
    const stream = this.streamOf(topic, partition);
    return stream === undefined ? [] : this.chains.read(topic, partition, stream, fromOffset, maxRecords);
  }

  chainHeads(): ChainHead[] {
    return this.chains.heads();
  }

  async append(_topic: Topic, _records: AppendRecord[]): Promise<LogPosition[]> {
    throw new Error('the embedded log is open read-only here (a command-line tool beside the service): nothing is appended');
  }

  consume(_options: ConsumeOptions): Subscription {
    throw new Error('the embedded log is open read-only here (a command-line tool): read it, do not consume it');
  }

  async close(): Promise<void> {
    if (!this.db.open) return;
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.db.close();
  }
}

/** The tables and columns this version reads, or a LogLayoutError that says what to do (the service migrates older layouts as it starts). */
function checkLayout(db: Database.Database, path: string): void {
  const columns = (table: string): string[] => db.prepare(`SELECT name FROM pragma_table_info('${table}')`).pluck().all() as string[];
  const older = (what: string): LogLayoutError =>
    new LogLayoutError(`${path} is in the layout of an older version (${what}); the service migrates it as it starts: start it on this DATA_DIR once (or on a copy, to keep this file as it is), then run this again`);
  if (db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_records'`).get()) throw older('one row per record, table log_records');
  const segments = columns('log_segments');
  if (segments.length === 0 || columns('log_streams').length === 0 || columns('log_meta').length === 0) {
    throw new LogLayoutError(`${path} holds no log (no log_segments, log_streams or log_meta table); is it the service's data directory?`);
  }
  if (!segments.includes('id')) throw older('segments keyed by topic, partition and offset');
  if (!segments.includes('chain')) throw older('segments without their hash chain');
}
