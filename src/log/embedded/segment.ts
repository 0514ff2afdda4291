import type { AppendRecord } from '../port.js';

/** A row of log_segments, before its records are packed: the consecutive records of one append in one partition. */
export interface Segment {
  /** the topic's partition as numbered in log_streams (the row's id range) */
  stream: number;
  partition: number;
  firstOffset: number;
  count: number;
  /** newest timestamp among the records (retention) */
  lastTs: number;
  records: AppendRecord[];
}

/** The records of a packed segment: MessagePack, an array of [key, timestamp, value] in offset order. */
export type SegmentRecords = [string, number, Uint8Array][];

/** Bytes of one packed record: array header, str 32 key, uint 64 timestamp, bin 32 value (see packSegmentInto). */
const packedRecord = (keyBytes: number, valueBytes: number): number => 1 + 5 + keyBytes + 9 + 5 + valueBytes;

/** Bytes a packed segment of these records takes at most (a key's UTF-8 is at most 3 bytes a UTF-16 unit). */
export function packedBound(records: AppendRecord[]): number {
  let size = 5;
  for (const r of records) size += packedRecord(3 * r.key.length, r.value.byteLength);
  return size;
}

/**
 * Writes a segment's MessagePack (SegmentRecords) at `at` and returns where it ends: the values
 * are already encoded, so this is a copy of each with a few bytes of framing. Always the 32-bit
 * forms (array 32, str 32, uint 64, bin 32), which every MessagePack decoder reads. `out` must
 * have packedBound(records) bytes from `at`.
 */
export function packSegmentInto(records: AppendRecord[], out: Buffer, at: number): number {
  let pos = at;
  out[pos++] = 0xdd;
  pos = out.writeUInt32BE(records.length, pos);
  for (const r of records) {
    if (!Number.isSafeInteger(r.timestamp) || r.timestamp < 0) throw new Error(`log timestamp ${r.timestamp} is not a whole number of ms`);
    out[pos++] = 0x93;
    out[pos++] = 0xdb;
    // The key's UTF-8, then its length in front of it.
    const keyBytes = out.write(r.key, pos + 4, 'utf8');
    out.writeUInt32BE(keyBytes, pos);
    pos += 4 + keyBytes;
    out[pos++] = 0xcf;
    pos = out.writeUInt32BE(Math.floor(r.timestamp / 0x1_0000_0000), pos);
    pos = out.writeUInt32BE(r.timestamp >>> 0, pos);
    out[pos++] = 0xc6;
    pos = out.writeUInt32BE(r.value.byteLength, pos);
    out.set(r.value, pos);
    pos += r.value.byteLength;
  }
  return pos;
}

/** A packed segment in an ArrayBuffer of its own, exactly its size (so it can be moved to another thread). */
export function packSegment(records: AppendRecord[]): Uint8Array {
  let size = 5;
  for (const r of records) size += packedRecord(Buffer.byteLength(r.key), r.value.byteLength);
  const out = Buffer.allocUnsafeSlow(size);
  packSegmentInto(records, out, 0);
  return new Uint8Array(out.buffer, 0, size);
}
