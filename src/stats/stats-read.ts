import { bucketEnd, bucketStart, type StatsBucket, type Unit } from '../domain/stats-sample.js';
import type { StatsQuery } from '../domain/stats-sample.js';

/** What GET /stats reads: the stats projection's query, over whichever store holds it. */
export interface StatsReader {
  query(q: StatsQuery): Promise<StatsBucket[]>;
  /** The app's oldest sample's interval (see pageOfBuckets). */
  oldest(appId: string): Promise<number | undefined>;
  /** Resolves once query() includes everything this instance appended (README: Consistency of reads); rejects with 50003 past the limit. */
  ownWrites(): Promise<void>;
}

/** One page of a stats read: the range (ms, already rounded to samples), its unit and its order. */
export interface StatsPageQuery {
  appId: string;
  unit: Unit;
  /** start of the range; 0 when the request names none */
  start: number;
  end: number;
  limit: number;
  direction: 'forwards' | 'backwards';
  /** the start of the last bucket of the page before (the `next` link's cursor) */
  cursor?: number;
}

export interface StatsPage {
  /** buckets in the order asked */
  buckets: StatsBucket[];
  /** the cursor of the next page, when there is one */
  next?: number;
}

/** A page of buckets, in the order asked, and the cursor of the page after it (spec: Retrieve usage statistics). */
export async function readStatsPage(stats: StatsReader, q: StatsPageQuery): Promise<StatsPage> {
  let from = q.start;
  let to = q.end;
  if (q.cursor !== undefined) {
    if (q.direction === 'backwards') to = Math.min(to, q.cursor - 1);
    else from = Math.max(from, bucketEnd(q.cursor, q.unit));
  }
  const buckets = from > to ? [] : await pageOfBuckets(stats, { appId: q.appId, unit: q.unit, start: from, end: to }, q.direction, q.limit + 1);
  if (q.direction === 'backwards') buckets.reverse();
  const page = buckets.slice(0, q.limit);
  return buckets.length > q.limit ? { buckets: page, next: page[page.length - 1].start } : { buckets: page };
}

const UNIT_MS: Record<Unit, number> = { minute: 60_000, hour: 3600_000, day: 86_400_000, month: 31 * 86_400_000 };

/**
 * At least `wanted` buckets from the end of the range where the page starts (or all there are),
 * oldest first. Asks the store for a window just wide enough for a full page and widens it only
 * when buckets without data leave the page short, so a page of minutes does not read 30 days.
 */
async function pageOfBuckets(stats: StatsReader, asked: StatsQuery, direction: 'forwards' | 'backwards', wanted: number): Promise<StatsBucket[]> {
  // Nothing is older than the app's oldest sample: without this bound, a page of data younger
  // than the page (a new app, a fresh service) widened its window a dozen times back to 1970,
  // each query reading every sample again (12 queries per GET /stats?unit=minute). Backwards, it
  // is asked only when the first window is short (a page of an app with data enough is one read);
  // forwards, first (the page starts at the range's start, often the epoch).
  let oldestAsked = false;
  let q = asked;
  const bound = async (): Promise<boolean> => {
    oldestAsked = true;
    const oldest = await stats.oldest(asked.appId);
    if (oldest === undefined) return false;
    q = { ...q, start: Math.max(q.start, oldest) };
    return q.start <= q.end;
  };
  if (direction === 'forwards' && !(await bound())) return [];
  let span = wanted * UNIT_MS[q.unit];
  for (;;) {
    const window: StatsQuery =
      // Backwards, the window starts at a bucket's start, so its first bucket is whole (a page in one query).
      direction === 'backwards' ? { ...q, start: Math.max(q.start, bucketStart(q.end - span, q.unit)) } : { ...q, end: Math.min(q.end, q.start + span) };
    const whole = window.start === q.start && window.end === q.end;
    const buckets = await stats.query(window);
    // A window edge may cut a bucket; it is complete once the window moves past it.
    const complete = direction === 'backwards' ? buckets.filter((b) => whole || b.start >= window.start) : buckets.filter((b) => whole || bucketEnd(b.start, q.unit) <= window.end + 1);
    if (whole || complete.length >= wanted) return direction === 'backwards' ? complete.slice(-wanted) : complete.slice(0, wanted);
    if (!oldestAsked) {
      if (!(await bound())) return [];
      // The window reached back past the oldest sample: it held every bucket there is.
      if (q.start >= window.start) return complete.slice(-wanted);
    }
    span *= 4;
  }
}
