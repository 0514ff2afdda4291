import { createHash } from 'node:crypto';
import type { Checkpoint, Log, LogRecord, Topic } from '../src/log/port.js';

// What tells a snapshot's log from a log reset or replaced since (README: A bounded start): the
// positions alone do not, once the new log has grown past them.

/**
 * The record a snapshot was taken after, on one partition of a topic (the one it read furthest):
 * its offset and a fingerprint of it. A log reset or replaced since (log.db restored from a backup,
 * a topic deleted and made again) that has grown past the snapshot's positions holds another
 * record there, and the snapshot is not used (README: A bounded start).
 */
export type SnapshotMark = [partition: number, offset: number, fingerprint: string];

type Reader = Partial<Pick<Log, 'read'>>;

/**
 * How long the read of a snapshot's mark may take: at a save, a broker that does not answer leaves
 * it out (a stop has SHUTDOWN_TIMEOUT_MS); at a start it refuses the snapshot (a full replay), so
 * that read waits as long as the log's reader does (its group join included).
 */
const MARK_READ_MS = 5_000;
const MARK_CHECK_MS = 30_000;

/** A record's fingerprint: its timestamp, key and value. */
function fingerprint(record: LogRecord): string {
  const hash = createHash('sha256');
  hash.update(`${record.timestamp}\n${record.key}\n`);
  hash.update(record.value);
  return hash.digest('hex').slice(0, 32);
}

/** `promise`, or a rejection once `ms` have passed without its answer (a mark's read: shared with store-log-check.ts). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * The record each topic's snapshot was taken after, on its partition read furthest (a reset or
 * replaced log is reset on every partition, so one per topic tells). A topic whose record cannot
 * be read now (a broker error, MARK_READ_MS) goes without, and so do the topics after it (`failed`
 * is told): its snapshot is not checked so. Undefined where the log cannot be read.
 */
export async function marksOf(log: Reader, positions: Map<Topic, Checkpoint>, failed: (err: unknown, topic: Topic) => void): Promise<Record<string, SnapshotMark> | undefined> {
  const read = log.read?.bind(log);
  if (!read) return undefined;
  const marks: Record<string, SnapshotMark> = {};
  for (const [topic, cp] of positions) {
    const furthest = [...cp].reduce<[number, number] | undefined>((best, at) => (at[1] > (best?.[1] ?? 0) ? at : best), undefined);
    if (!furthest) continue;
    const [partition, next] = furthest;
    try {
      const record = (await withTimeout(read(topic, partition, next - 1, 1), MARK_READ_MS))[0];
      if (record?.offset === next - 1) marks[topic] = [partition, next - 1, fingerprint(record)];
    } catch (err) {
      failed(err, topic);
      break; // the log does not answer: the other topics' reads would wait as long (a stop has SHUTDOWN_TIMEOUT_MS)
    }
  }
  return marks;
}

/**
 * Whether the log holds, where a snapshot's marks say it was taken after, the same records: a log
 * reset or replaced since that has grown past the snapshot holds others there. A record removed
 * since (retention) cannot be compared and is no reason; a read that fails is one (the full
 * replay is slower, never wrong).
 */
export async function otherLog(log: Reader, marks: Record<string, SnapshotMark> | undefined): Promise<{ reason: string } | undefined> {
  const read = log.read?.bind(log);
  if (!read || !marks) return undefined;
  for (const [topic, mark] of Object.entries(marks)) {
    if (!Array.isArray(mark) || !Number.isInteger(mark[0]) || !Number.isInteger(mark[1]) || typeof mark[2] !== 'string') return { reason: `its ${topic} mark is not readable: corrupt` };
    const [partition, offset, expected] = mark;
    let record: LogRecord | undefined;
    try {
      record = (await withTimeout(read(topic as Topic, partition, offset, 1), MARK_CHECK_MS))[0];
    } catch (err) {
      return { reason: `the ${topic} record it was taken after (${partition}:${offset}) could not be read to check it against (${(err as Error).message})` };
    }
    if (record?.offset !== offset) continue; // removed by retention since: nothing to compare
    if (fingerprint(record) !== expected) return { reason: `the ${topic} record it was taken after (${partition}:${offset}) is another one in this log: the log was reset or replaced since` };
  }
  return undefined;
}
