import { unpackValue } from '../../codec/msgpack.js';
import type { AppendRecord, RecordKeyBytes, RecordVisitor, ScanResult } from '../port.js';

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

/** Hands `visit` the record at offset, its value bytes[start, end), and counts it in `result`. */
export function visitRecord(visit: RecordVisitor, result: ScanResult, offset: number, timestamp: number, bytes: Uint8Array, start: number, end: number, key: RecordKeyBytes): void {
  visit(offset, timestamp, bytes, start, end, key);
  result.count++;
  result.next = offset + 1;
  result.lastTimestamp = timestamp;
}

/**
 * Visits the records of a packed segment whose first record is `firstOffset`, from `fromOffset`
 * on, at most `max` of them, where they lie (a rebuild's read: no decoded key, no record object);
 * adds to `result` and returns whether `max` were visited. Reads the 32-bit framing packSegmentInto
 * writes; a segment in any other MessagePack form is decoded instead, from the record where the
 * framing stops matching.
 */
export function scanSegment(b: Uint8Array, firstOffset: number, fromOffset: number, max: number, visit: RecordVisitor, result: ScanResult): boolean {
  if (max <= 0) return true;
  const u32 = (p: number): number => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
  if (b.length < 5 || b[0] !== 0xdd) return scanDecoded(b, firstOffset, fromOffset, max, visit, result);
  const n = u32(1);
  let pos = 5;
  let visited = 0;
  // One key object for the segment, moved from record to record (the visitor must not keep it).
  const key: RecordKeyBytes = { keyBytes: b, start: 0, end: 0 };
  for (let i = 0; i < n; i++) {
    const offset = firstOffset + i;
    // array of 3, str 32 key, uint 64 timestamp, bin 32 value; -1 where the framing is another
    const keyEnd = pos + 6 <= b.length && b[pos] === 0x93 && b[pos + 1] === 0xdb ? pos + 6 + u32(pos + 2) : -1;
    const start = keyEnd + 14;
    const end = keyEnd >= 0 && start <= b.length && b[keyEnd] === 0xcf && b[keyEnd + 9] === 0xc6 ? start + u32(keyEnd + 10) : -1;
    if (end < 0 || end > b.length) return scanDecoded(b, firstOffset, Math.max(offset, fromOffset), max - visited, visit, result);
    const keyStart = pos + 6;
    pos = end;
    if (offset < fromOffset) continue;
    key.keyBytes = b;
    key.start = keyStart;
    key.end = keyEnd;
    visitRecord(visit, result, offset, u32(keyEnd + 1) * 0x1_0000_0000 + u32(keyEnd + 5), b, start, end, key);
    if (++visited === max) return true;
  }
  return false;
}

/** scanSegment by the general decoder, from offset `from` on. */
function scanDecoded(b: Uint8Array, firstOffset: number, from: number, max: number, visit: RecordVisitor, result: ScanResult): boolean {
  const records = unpackValue(b) as SegmentRecords;
  let visited = 0;
  for (let i = Math.max(0, from - firstOffset); i < records.length; i++) {
    const [key, timestamp, value] = records[i];
    visitRecord(visit, result, firstOffset + i, timestamp, value, 0, value.length, keyBytesOf(key));
    if (++visited === max) return true;
  }
  return false;
}

const NO_BYTES = new Uint8Array(0);

/** A key decoded (a segment in another form, the in-memory window), as a visitor is given it. */
export const keyBytesOf = (text: string): RecordKeyBytes => ({ keyBytes: NO_BYTES, start: 0, end: 0, text });
