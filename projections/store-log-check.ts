import { Topics, type Checkpoint, type Log, type LogRecord, type Topic } from '../src/log/port.js';
import type { HistoryStore, LogMark } from './history/history-store.js';
import type { StatsStore } from './stats/stats-store.js';
import { withTimeout } from './snapshot-marks.js';

// Whether the stores' checkpoints (the offsets of the log they have read) are of this log: a Kafka
// cluster made again behind the same KAFKA_BROKERS (topics deleted and made anew, offsets from 0
// again), or log.db restored from an older backup, holds other records at those offsets, or none
// yet. Read from there on, the new log's first records were skipped without a word. Snapshots are
// checked the same way (snapshot-marks.ts) and, being copies, are dropped; the stores hold what
// the log no longer does (history kept longer than the log), keyed by the old log's offsets (a
// history row's serial is its record's offset), so they are not re-read into: the start refuses,
// saying what to do (README: A log made again).

/** What one store says it has read of a topic: its checkpoint, and for history the records it marked (offset after, timestamp). */
export interface StorePositions {
  store: string;
  topic: Topic;
  checkpoint: Checkpoint;
  marks?: readonly LogMark[];
}

/** The start refused: the stores name positions of another log. */
export class LogResetError extends Error {
  override readonly name = 'LogResetError';
}

/** How long the read of a mark's record may take (a Kafka reader's first read joins a group: about 3 s). */
const MARK_READ_MS = 30_000;

/**
 * Why the stores' positions are not of this log, or undefined. Checkpoints are to be loaded before
 * this is called: the log's ends are read after them, so a writer of another instance moving on
 * meanwhile is never taken for a reset. Per store and topic: a checkpoint past the partition's end
 * (or of a partition the topic does not have) is of another log; so is a marked record (history's
 * newest mark) whose offset holds a record of another time. A record gone (retention) or a read
 * that fails says nothing (`unchecked` is told).
 */
export async function resetSince(
  log: Pick<Log, 'endOffsets'> & Partial<Pick<Log, 'read'>>,
  positions: readonly StorePositions[],
  unchecked: (err: unknown, store: string) => void = () => {},
): Promise<string | undefined> {
  const ends = new Map<Topic, Map<number, number>>();
  for (const { store, topic, checkpoint, marks } of positions) {
    if (![...checkpoint.values()].some((next) => next > 0)) continue;
    let end = ends.get(topic);
    if (!end) ends.set(topic, (end = await log.endOffsets(topic)));
    for (const [partition, next] of checkpoint) {
      if (next <= 0) continue;
      const last = end.get(partition);
      if (last === undefined) return `the ${store} store has read partition ${partition} of ${topic} up to offset ${next}, and the log has no such partition`;
      if (next > last) return `the ${store} store has read ${topic}/${partition} up to offset ${next}, past the log's end (${last})`;
    }
    const mark = newestMark(marks ?? [], end);
    if (!mark || !log.read) continue;
    let record: LogRecord | undefined;
    try {
      record = (await withTimeout(log.read(topic, mark.partition, mark.offset - 1, 1), MARK_READ_MS))[0];
    } catch (err) {
      unchecked(err, store);
      continue;
    }
    if (record?.offset === mark.offset - 1 && record.timestamp !== mark.timestamp) {
      return `the ${store} store read ${topic}/${mark.partition} offset ${mark.offset - 1} as a record of ${new Date(mark.timestamp).toISOString()}, and the log holds one of ${new Date(record.timestamp).toISOString()} there`;
    }
  }
  return undefined;
}

/** The mark furthest into the log that it still reaches (a reset log is reset on every partition: one tells). */
function newestMark(marks: readonly LogMark[], end: Map<number, number>): LogMark | undefined {
  let best: LogMark | undefined;
  for (const m of marks) {
    if (m.offset <= 0 || m.offset > (end.get(m.partition) ?? 0)) continue;
    if (!best || m.offset > best.offset) best = m;
  }
  return best;
}

/** The message a start refused over `reason` ends with: what a user does about it. */
export function logResetMessage(reason: string, where: { log: string; stores: string }): LogResetError {
  return new LogResetError(
    `${reason}: the log (${where.log}) was made again or replaced since the stores (${where.stores}) read it, and its new records would be skipped. ` +
      'Restore the log the stores read, or give the service stores of their own for the new log (a new ClickHouse database in CLICKHOUSE_URL, or the tables dropped; README: A log made again)',
  );
}

/** What the stores say they have read: history's and presence history's checkpoints and marks, stats' checkpoint of each of its topics. */
export async function storePositions(
  stores: { history: HistoryStore; presenceHistory: HistoryStore; stats: Pick<StatsStore, 'init' | 'loadCheckpoint'> },
  statsTopics: readonly Topic[],
): Promise<StorePositions[]> {
  const positions: StorePositions[] = [];
  for (const [store, s, topic] of [['history', stores.history, Topics.messages], ['presence history', stores.presenceHistory, Topics.presence]] as const) {
    await s.init();
    positions.push({ store, topic, checkpoint: await s.loadCheckpoint(), marks: await s.loadMarks() });
  }
  await stores.stats.init();
  for (const topic of statsTopics) {
    const stats = await stores.stats.loadCheckpoint(topic);
    positions.push({ store: 'stats', topic, checkpoint: new Map([...stats].map(([p, c]) => [p, Math.max(c.from, c.applied ?? 0)])) });
  }
  return positions;
}
