// What a stats record changes (its app and sample interval), and the intervals a run of records
// falls in: the stats reader's (projections/stats/stats-reader.ts) touches, and a start's gap.
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';
import { eventOf } from '../../src/log/event-shape.js';
import { readPublished, type PublishedSummary } from '../../src/log/published-summary.js';
import { intervalOf } from '../../src/domain/stats-sample.js';

/** Past this many records, a gap's time range is taken from its first and last records' timestamps (widened by GAP_MARGIN_MS), not from every record. */
export const GAP_READ_ALL = 10_000;
/** How far a record's timestamp may be out of order in its partition (instances' clocks): a gap's range read from its ends is widened by this. */
export const GAP_MARGIN_MS = 60_000;

/** What one record changes: the app and sample interval of its row (none for events stats does not count). */
export function touchOf(record: LogRecord, published: PublishedSummary): { appId: string; interval: number } | undefined {
  if (readPublished(record.value, 0, record.value.length, published)) return { appId: published.appId, interval: intervalOf(record.timestamp) };
  const event = eventOf(record.value); // undefined: not the service's (src/log/event-shape.ts)
  switch (event?.type) {
    case 'messages.published':
    case 'channel.used':
    case 'presence.changed':
    case 'connection.opened':
      return { appId: event.appId, interval: intervalOf(record.timestamp) };
    case 'usage.reported':
    case 'stats.fixture':
      return { appId: event.appId, interval: intervalOf(event.intervalStart) };
    default:
      return undefined;
  }
}


/**
 * The first and last sample intervals of the records of a partition in [gap.from, gap.to): of
 * every record where the gap is small or its touches are not by record time (usage reports and
 * fixtures name their interval); else of its first and last records' timestamps, widened by
 * GAP_MARGIN_MS. Undefined: no record stats counts.
 */
export async function gapIntervals(
  read: (topic: Topic, partition: number, from: number, max: number) => Promise<LogRecord[]>,
  topic: Topic,
  partition: number,
  gap: { from: number; to: number },
  published: PublishedSummary,
): Promise<[number, number] | undefined> {
  let from = Infinity;
  let to = -Infinity;
  const widen = (interval: number): void => {
    from = Math.min(from, interval);
    to = Math.max(to, interval);
  };
  if (gap.to - gap.from <= GAP_READ_ALL || topic === Topics.usage) {
    for (let next = gap.from; next < gap.to; ) {
      const records = await read(topic, partition, next, Math.min(GAP_READ_ALL, gap.to - next));
      if (records.length === 0) break;
      for (const record of records) {
        if (record.offset >= gap.to) break;
        const touch = touchOf(record, published);
        if (touch) widen(touch.interval);
      }
      next = records[records.length - 1].offset + 1;
    }
  } else {
    const [first] = await read(topic, partition, gap.from, 1);
    const [last] = await read(topic, partition, gap.to - 1, 1);
    for (const record of [first, last]) {
      if (!record) continue;
      widen(intervalOf(record.timestamp - GAP_MARGIN_MS));
      widen(intervalOf(record.timestamp + GAP_MARGIN_MS));
    }
  }
  return from === Infinity ? undefined : [from, to];
}
