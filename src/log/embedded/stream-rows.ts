// The embedded log's streams as rows of log_segments (the layout: embedded-log.ts), read: the SQL of
// a stream's ids and the loops that turn its rows into records, shared by the log (EmbeddedLog) and
// the command-line tools' read-only view of it (EmbeddedLogReader).
import type Database from '../../stores/sqlite/driver.mjs';
import type { LogRecord, RecordVisitor, ScanResult } from '../port.js';
import { unpackValue } from '../../codec/msgpack.js';
import { scanSegment, type SegmentRecords } from './segment.js';
import { recordBytes } from './recent-windows.js';

/** A segment's row id is (stream << STREAM_SHIFT) + first_offset: 2^44 offsets per partition; streams up to 2^19. */
export const STREAM_SHIFT = 44;

/** The ids of stream @stream, from the one of offset @from (CAST: numbers are bound as REAL). */
export const STREAM_FROM = `(@stream << ${STREAM_SHIFT}) + CAST(@from AS INTEGER)`;
export const STREAM_START = `(@stream << ${STREAM_SHIFT})`;
export const STREAM_END = `((@stream + 1) << ${STREAM_SHIFT})`;

/** A stream's rows from the segment that holds offset @from (the newest starting at or before it) onwards. */
export const fromSegment = (columns: string): string =>
  `SELECT ${columns} FROM log_segments WHERE id >= COALESCE(
     (SELECT MAX(id) FROM log_segments WHERE id >= ${STREAM_START} AND id <= ${STREAM_FROM}), ${STREAM_START})
   AND id < ${STREAM_END} ORDER BY id`;

/** A stream's end offset (the offset after its newest row's last record); no row when it has none. */
export const STREAM_END_OFFSET = `SELECT first_offset + count FROM log_segments WHERE id >= ${STREAM_START} AND id < ${STREAM_END} ORDER BY id DESC LIMIT 1`;

/** A stream's first offset (its oldest row's first); no row when it has none. */
export const STREAM_LOW_OFFSET = `SELECT first_offset FROM log_segments WHERE id >= ${STREAM_START} AND id < ${STREAM_END} ORDER BY id LIMIT 1`;

interface SegmentRow {
  first_offset: number;
  records: Buffer;
}

/**
 * Up to maxRecords records of a stream from fromOffset, ending at the first that reaches maxBytes;
 * `select`: fromSegment('first_offset, records').
 */
export function readStream(select: Database.Statement, topic: string, partition: number, stream: number, fromOffset: number, maxRecords: number, maxBytes = Infinity): LogRecord[] {
  const out: LogRecord[] = [];
  if (maxRecords <= 0) return out;
  let bytes = 0;
  for (const row of select.iterate({ stream, from: fromOffset }) as IterableIterator<SegmentRow>) {
    const records = unpackValue(row.records) as SegmentRecords;
    for (let i = Math.max(0, fromOffset - row.first_offset); i < records.length; i++) {
      const [key, timestamp, value] = records[i];
      const record: LogRecord = { topic, partition, offset: row.first_offset + i, key, timestamp, value };
      out.push(record);
      if (out.length === maxRecords || (bytes += recordBytes(record)) >= maxBytes) return out;
    }
  }
  return out;
}

/** Visits up to maxRecords records of a stream from fromOffset where they lie (Log.scan), adding to `result`. */
export function scanStream(select: Database.Statement, stream: number, fromOffset: number, maxRecords: number, visit: RecordVisitor, result: ScanResult): ScanResult {
  for (const row of select.iterate({ stream, from: fromOffset }) as IterableIterator<SegmentRow>) {
    const done = scanSegment(row.records, row.first_offset, fromOffset, maxRecords - result.count, visit, result);
    if (done) break;
  }
  return result;
}
