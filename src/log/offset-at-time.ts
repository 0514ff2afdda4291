import type { Log, Topic } from './port.js';

/**
 * The first offset of a partition whose record is at or after `timestamp`, found by bisecting the
 * partition with reads of one record (some log2(n) of them): a bounded way to start a partition
 * "two minutes ago" without reading it from its first offset. Kafka's ListOffsets by timestamp
 * would do it in one call, but the local mock broker answers it with the end offset
 * (ARCHITECTURE.md), so this asks only for reads. Record times are those of their appends, so in a
 * partition they are in order but for clock differences between instances: callers ask for a
 * time early enough to cover them. An offset that holds no record (not written, deleted) counts
 * as a late one, which makes the answer earlier, never later.
 */
export async function offsetAtTime(log: Pick<Log, 'read' | 'endOffsets'>, topic: Topic, partition: number, timestamp: number): Promise<number> {
  const end = (await log.endOffsets(topic)).get(partition) ?? 0;
  const first = (await log.read(topic, partition, 0, 1))[0];
  if (!first) return end;
  let lo = first.offset;
  let hi = end;
  while (lo < hi) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const record = (await log.read(topic, partition, mid, 1))[0];
    if (record && record.offset < hi && record.timestamp < timestamp) lo = record.offset + 1;
    else hi = mid;
  }
  return lo;
}
