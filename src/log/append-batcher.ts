import { PartialAppendError, type AppendRecord, type Log, type LogPosition, type Topic } from './port.js';
import { MonotonicClock } from '../clock.js';

export interface PendingRecord {
  key: string;
  /** Builds the value once the append timestamp is known, so timestamps follow log order. */
  build: (timestamp: number) => Uint8Array;
}

interface Waiting {
  records: PendingRecord[];
  resolve: (positions: LogPosition[]) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: every append made in the same event-loop turn shares one log append
 * (one SQLite transaction; for Kafka, one produce request per producer that owns some of its
 * partitions). While the log's limit of appends are in flight (Log.maxAppendsInFlight: 3 for the
 * embedded log, whose writer starts the next commit the moment one ends and commits appends that
 * queued up meanwhile together; KafkaLog's own) the next batch accumulates, so throughput grows
 * with concurrency instead of with fsyncs or round trips.
 */
/** Told of every log append the batcher makes: its topic, records, duration and failure (src/metrics). */
export interface AppendObserver {
  appended(topic: Topic, records: number, ms: number, error?: unknown): void;
}

export class AppendBatcher {
  private readonly queues = new Map<Topic, Waiting[]>();
  private readonly inFlight = new Map<Topic, number>();
  private scheduled = new Set<Topic>();
  /** first timestamp of each append in flight, oldest first */
  private readonly inFlightSince = new Map<Topic, number[]>();
  private readonly maxInFlight: number;

  constructor(
    private readonly log: Log,
    private readonly clock: MonotonicClock,
    private readonly maxBatch = 5000,
    private readonly observer?: AppendObserver,
  ) {
    this.maxInFlight = Math.max(1, log.maxAppendsInFlight ?? 1);
  }

  append(topic: Topic, records: PendingRecord[]): Promise<LogPosition[]> {
    return new Promise((resolve, reject) => {
      let queue = this.queues.get(topic);
      if (!queue) this.queues.set(topic, (queue = []));
      queue.push({ records, resolve, reject });
      this.schedule(topic);
    });
  }

  /** Timestamp of the oldest record being appended right now, if any. */
  oldestInFlight(topic: Topic): number | undefined {
    return this.inFlightSince.get(topic)?.[0];
  }

  private schedule(topic: Topic): void {
    if (this.scheduled.has(topic) || (this.inFlight.get(topic) ?? 0) >= this.maxInFlight) return;
    this.scheduled.add(topic);
    setImmediate(() => {
      this.scheduled.delete(topic);
      void this.flush(topic);
    });
  }

  private async flush(topic: Topic): Promise<void> {
    const queue = this.queues.get(topic);
    if (!queue || queue.length === 0) return;
    const batch: Waiting[] = [];
    let count = 0;
    while (queue.length > 0 && (count === 0 || count + queue[0].records.length <= this.maxBatch)) {
      const w = queue.shift()!;
      batch.push(w);
      count += w.records.length;
    }
    // A batch larger than maxBatch left some behind: they may go now if the log takes more.
    if (queue.length > 0) queueMicrotask(() => this.schedule(topic));
    this.inFlight.set(topic, (this.inFlight.get(topic) ?? 0) + 1);
    let since: number[] | undefined = this.inFlightSince.get(topic);
    if (!since) this.inFlightSince.set(topic, (since = []));
    let first: number | undefined;
    // A record that cannot be built (its event does not encode) fails its own append only: the
    // batch holds other clients' publishes, which must not notice it.
    const built: AppendRecord[] = [];
    const appended: Waiting[] = [];
    for (const w of batch) {
      const at = built.length;
      try {
        for (const r of w.records) {
          const timestamp = this.clock.next();
          built.push({ key: r.key, timestamp, value: r.build(timestamp) });
        }
      } catch (err) {
        built.length = at;
        w.reject(err);
        continue;
      }
      appended.push(w);
    }
    const started = performance.now();
    try {
      if (built.length > 0) since.push((first = built[0].timestamp));
      const positions = built.length > 0 ? await this.log.append(topic, built) : [];
      if (built.length > 0) this.observer?.appended(topic, built.length, performance.now() - started);
      let i = 0;
      for (const w of appended) {
        w.resolve(positions.slice(i, i + w.records.length));
        i += w.records.length;
      }
    } catch (err) {
      if (built.length > 0) this.observer?.appended(topic, built.length, performance.now() - started, err);
      // Some records written (a Kafka append over several partitions): a caller fails only when
      // one of its own records was not.
      const written = err instanceof PartialAppendError && err.positions.length === built.length ? err.positions : undefined;
      let i = 0;
      for (const w of appended) {
        const mine = written?.slice(i, i + w.records.length);
        i += w.records.length;
        if (mine?.every((p) => p !== undefined)) w.resolve(mine as LogPosition[]);
        else w.reject(err instanceof PartialAppendError && err.cause !== undefined ? err.cause : err);
      }
    } finally {
      this.inFlight.set(topic, this.inFlight.get(topic)! - 1);
      if (first !== undefined) since.splice(since.indexOf(first), 1);
      if (queue.length > 0) this.schedule(topic);
    }
  }
}
