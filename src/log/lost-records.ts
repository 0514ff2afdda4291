// Records a consumer of this process had yet to apply when the log deleted them (Kafka's retention,
// or a log that keeps only so much of a partition, as the local mock broker's 5 MiB): the consumer
// goes on from the partition's first record still held (its log start), and what was lost counts as
// applied (ConsumeOptions.lost: read-your-writes, GET /ready's lag, a stop's drain). Each range is
// logged once, by whichever consumer of this process meets it first, and every record is counted
// once (GET /metrics: cm_log_records_lost_total; README: Records the log deleted before they were applied).

/** The part of a pino logger this uses. */
interface ErrorLogger {
  error(obj: object, msg?: string): void;
}

/** Disjoint ranges [from, to) of one partition already told of, in order. */
type Ranges = [number, number][];

/** Ranges remembered per partition; the oldest are forgotten past it (a range met again is told of again). */
const REMEMBERED = 64;

export class LostRecords {
  /** Records lost so far, by topic (the service's name, not the Kafka topic). */
  private readonly counts = new Map<string, number>();
  /** By `<kafka topic>/<partition>`: the ranges told of. */
  private readonly told = new Map<string, Ranges>();

  constructor(private readonly logger: ErrorLogger | undefined) {}

  /**
   * Consumer `consumer` of `topic` (`logTopic` as the log names it) found records [from, to) of
   * `partition` gone: logs and counts the part not told of yet.
   */
  lost(topic: string, logTopic: string, partition: number, from: number, to: number, consumer: string): void {
    if (!(to > from)) return;
    const key = `${logTopic}/${partition}`;
    let ranges = this.told.get(key);
    if (!ranges) this.told.set(key, (ranges = []));
    const fresh = untold(ranges, from, to);
    if (fresh.length === 0) return;
    tell(ranges, from, to);
    if (ranges.length > REMEMBERED) ranges.splice(0, ranges.length - REMEMBERED);
    const records = fresh.reduce((n, [a, b]) => n + b - a, 0);
    this.counts.set(topic, (this.counts.get(topic) ?? 0) + records);
    for (const [a, b] of fresh) {
      this.logger?.error(
        { topic: logTopic, partition, from: a, to: b, records: b - a, consumer },
        'log records were deleted (retention) before this instance applied them: offsets [from, to) are lost to it, and its consumers go on from the first record the log still holds',
      );
    }
  }

  /** Records lost so far, by topic. */
  counted(): { topic: string; count: number }[] {
    return [...this.counts].map(([topic, count]) => ({ topic, count }));
  }
}

/** The parts of [from, to) outside `ranges`. */
function untold(ranges: Ranges, from: number, to: number): Ranges {
  const parts: Ranges = [];
  let at = from;
  for (const [a, b] of ranges) {
    if (b <= at) continue;
    if (a >= to) break;
    if (a > at) parts.push([at, a]);
    at = Math.max(at, b);
    if (at >= to) break;
  }
  if (at < to) parts.push([at, to]);
  return parts;
}

/** Adds [from, to) to `ranges`, merging what it touches. */
function tell(ranges: Ranges, from: number, to: number): void {
  let lo = from;
  let hi = to;
  const kept: Ranges = [];
  for (const [a, b] of ranges) {
    if (b < lo || a > hi) kept.push([a, b]);
    else {
      lo = Math.min(lo, a);
      hi = Math.max(hi, b);
    }
  }
  kept.push([lo, hi]);
  kept.sort((x, y) => x[0] - y[0]);
  ranges.splice(0, ranges.length, ...kept);
}
