// The embedded log's hash chains as stored (chain.mjs; the chain column of log_segments), read for
// audits: each partition's newest link (a checkpoint's heads) and records with their links.
import type Database from '../../stores/sqlite/driver.mjs';
import type { LogRecord } from '../port.js';
import { unpackValue } from '../../codec/msgpack.js';
import { lastLink, LINK_BYTES } from './chain.mjs';
import type { SegmentRecords } from './segment.js';

/** The newest link of a topic partition's hash chain (chain.mjs) and the offset of its record. */
export interface ChainHead {
  topic: string;
  partition: number;
  offset: number;
  link: Buffer;
}

/** A record as stored, with its place in the chain: its link, and for a row's first record the link before it. */
export interface ChainedRecord extends LogRecord {
  /** absent: appended before the log kept a chain */
  link?: Buffer;
  prev?: Buffer;
  /** its row's records do not decode (the file was written by something else): key, time and value are empty */
  unreadable?: true;
}

export class ChainReader {
  private readonly select: Database.Statement;
  private readonly streams: Database.Statement;
  private readonly last: Database.Statement;

  /** `selectFrom`: the rows of stream @stream from the one holding offset @from, with first_offset, records and chain. */
  constructor(db: Database.Database, selectFrom: string, streamShift: number) {
    this.select = db.prepare(selectFrom);
    this.streams = db.prepare('SELECT stream, topic, partition FROM log_streams ORDER BY topic, partition');
    this.last = db.prepare(
      `SELECT first_offset + count - 1 AS offset, chain FROM log_segments WHERE id >= (@stream << ${streamShift}) AND id < ((@stream + 1) << ${streamShift}) ORDER BY id DESC LIMIT 1`,
    );
  }

  /** Each topic partition's chain head, as committed (rows written before chains have none). */
  heads(): ChainHead[] {
    const heads: ChainHead[] = [];
    for (const { stream, topic, partition } of this.streams.all() as { stream: number; topic: string; partition: number }[]) {
      const row = this.last.get({ stream }) as { offset: number; chain: Buffer | null } | undefined;
      const link = lastLink(row?.chain);
      if (row && link) heads.push({ topic, partition, offset: row.offset, link });
    }
    return heads;
  }

  /** Records of `stream` (the topic's partition) from fromOffset on, with their links; a row's first carries `prev` too. */
  read(topic: string, partition: number, stream: number, fromOffset: number, maxRecords: number): ChainedRecord[] {
    const out: ChainedRecord[] = [];
    if (maxRecords <= 0) return out;
    for (const row of this.select.iterate({ stream, from: fromOffset }) as IterableIterator<{ first_offset: number; count: number; records: Buffer; chain: Buffer | null }>) {
      const records = decodeRow(row.records);
      if (!records) {
        // An audit reads on: each of its offsets is a record whose content is gone.
        for (let offset = Math.max(fromOffset, row.first_offset); offset < row.first_offset + Math.max(1, row.count); offset++) {
          out.push({ topic, partition, offset, key: '', timestamp: 0, value: new Uint8Array(0), unreadable: true });
          if (out.length === maxRecords) return out;
        }
        continue;
      }
      const chain = row.chain;
      for (let i = Math.max(0, fromOffset - row.first_offset); i < records.length; i++) {
        const [key, timestamp, value] = records[i];
        const record: ChainedRecord = { topic, partition, offset: row.first_offset + i, key, timestamp, value };
        if (chain && chain.length === (records.length + 1) * LINK_BYTES) {
          record.link = chain.subarray((i + 1) * LINK_BYTES, (i + 2) * LINK_BYTES);
          if (i === 0) record.prev = chain.subarray(0, LINK_BYTES);
        }
        out.push(record);
        if (out.length === maxRecords) return out;
      }
    }
    return out;
  }
}

/** A row's records, or undefined when its bytes are not a segment. */
function decodeRow(bytes: Buffer): SegmentRecords | undefined {
  try {
    const records = unpackValue(bytes) as SegmentRecords;
    return Array.isArray(records) && records.every((r) => Array.isArray(r) && typeof r[0] === 'string' && typeof r[1] === 'number' && r[2] instanceof Uint8Array) ? records : undefined;
  } catch {
    return undefined;
  }
}
