// The Kafka log's producers' queues (src/log/kafka/kafka-log.ts): an append's records go to the
// producer owning their partition (`partition % producers`), in shares of at most
// MAX_REQUEST_BYTES, and each producer sends its queued shares one request at a time, as many as fit
// together. So a key's records land in call order, the producers' requests are in flight together,
// and no request carries more for a partition than the broker takes in one record batch.
import { LogClosedError, PartialAppendError, type AppendRecord, type LogPosition } from '../port.js';
import { partitionFor } from '../partitioner.js';

/**
 * A producer's request holds at most this many bytes of keys and values (a share of an append
 * holds at most this, or one larger record; queued shares go together up to it), so a partition's
 * record batch stays under the broker's message.max.bytes (1 MiB by default) whatever the group
 * commit gathered.
 */
const MAX_REQUEST_BYTES = 512 * 1024;

/** One append's records for one producer, waiting for their request. */
interface Share {
  records: { record: AppendRecord; partition: number }[];
  bytes: number;
  deadline: { passed: boolean };
  done: { resolve(base: Map<number, number>): void; reject(err: unknown): void };
}

/** A producer's queue for one topic; busy while a request of it is in flight (or it lingers before the next). */
interface Lane {
  queue: Share[];
  busy: boolean;
  /** Records in `queue`. */
  records: number;
  /** Set while the producer lingers (ProduceLanesOptions.lingerMs): ends the wait early. */
  wake?: () => void;
}

/**
 * Linger (Kafka's `linger.ms`, for back-to-back requests only): a producer whose request just
 * settled while its queue holds fewer than `lingerRecords` records (none, too) waits up to
 * `lingerMs` for more before it sends the next, so that under load each request carries more
 * records. A producer that got nothing meanwhile is idle again, and an append that finds it idle
 * goes at once: a lone publish does not wait.
 */
export interface Linger {
  lingerMs: number;
  lingerRecords: number;
}

/** One request: records and the partitions they go to; resolves with each partition's base offset. */
export type Produce = (kafkaTopic: string, lane: number, messages: { record: AppendRecord; partition: number }[]) => Promise<Map<number, number>>;

export class ProduceLanes {
  /** Per topic, each producer's shares waiting for its request in flight to settle. */
  private readonly lanes = new Map<string, Lane[]>();

  constructor(
    private readonly producers: number,
    private readonly produce: Produce,
    private readonly isClosed: () => boolean,
    private readonly linger: Linger = { lingerMs: 0, lingerRecords: 0 },
  ) {}

  /**
   * An append that timed out (`deadline` passed): its shares not sent yet leave their queues now,
   * rejected with `err`, rather than when a request in flight before them settles (a broker that
   * takes the connection and never answers holds it for minutes of kafkajs' retries), so their
   * records are not held meanwhile.
   */
  expire(kafkaTopic: string, deadline: { passed: boolean }, err: Error): void {
    for (const lane of this.lanes.get(kafkaTopic) ?? []) {
      if (!lane.queue.some((share) => share.deadline === deadline)) continue;
      lane.queue = lane.queue.filter((share) => {
        if (share.deadline !== deadline) return true;
        lane.records -= share.records.length;
        share.done.reject(err);
        return false;
      });
    }
  }

  /** Shares waiting in the producers' queues of a topic (not the requests in flight). */
  queued(kafkaTopic: string): number {
    return (this.lanes.get(kafkaTopic) ?? []).reduce((n, lane) => n + lane.queue.length, 0);
  }

  /**
   * Appends `records` to a topic of `partitions` partitions; positions in call order. A share that
   * fails fails its own records (PartialAppendError when others of the append were written).
   */
  async append(kafkaTopic: string, partitions: number, records: AppendRecord[], deadline: { passed: boolean }): Promise<LogPosition[]> {
    let lanes = this.lanes.get(kafkaTopic);
    if (!lanes) this.lanes.set(kafkaTopic, (lanes = Array.from({ length: this.producers }, () => ({ queue: [], busy: false, records: 0 }))));
    // Per producer, shares of at most MAX_REQUEST_BYTES (but for a larger single record): a group
    // commit's append holds many clients' records, and one request over the broker's
    // message.max.bytes for a partition would fail them all. Each share gets its own base offsets.
    const shares = new Map<number, Share[]>();
    const counts = new Map<Share, Map<number, number>>();
    const placed = records.map((record) => {
      const partition = partitionFor(record.key, partitions);
      const lane = partition % lanes.length;
      const bytes = record.value.byteLength + record.key.length;
      let list = shares.get(lane);
      if (!list) shares.set(lane, (list = []));
      let share = list[list.length - 1];
      if (!share || share.bytes + bytes > MAX_REQUEST_BYTES) {
        list.push((share = { records: [], bytes: 0, deadline, done: undefined! }));
        counts.set(share, new Map());
      }
      const inShare = counts.get(share)!;
      const index = inShare.get(partition) ?? 0;
      inShare.set(partition, index + 1);
      share.records.push({ record, partition });
      share.bytes += bytes;
      return { share, partition, index };
    });
    const bases = new Map<Share, Map<number, number>>();
    let failure: unknown;
    await Promise.all(
      [...shares].flatMap(([lane, list]) =>
        list.map((share) =>
          new Promise<Map<number, number>>((resolve, reject) => {
            share.done = { resolve, reject };
            const own = lanes[lane];
            own.queue.push(share);
            own.records += share.records.length;
            if (!own.busy) void this.drain(kafkaTopic, lane, own);
            else if (own.wake && own.records >= this.linger.lingerRecords) own.wake();
          }).then(
            (base) => void bases.set(share, base),
            (err: unknown) => void (failure ??= err),
          ),
        ),
      ),
    );
    const positions = placed.map(({ share, partition, index }) => {
      const first = bases.get(share)?.get(partition);
      return first === undefined ? undefined : { partition, offset: first + index };
    });
    if (failure === undefined) return positions as LogPosition[];
    if (bases.size === 0) throw failure;
    const written = positions.filter((p) => p !== undefined).length;
    throw new PartialAppendError(`Kafka wrote ${written} of ${records.length} records of the append: ${(failure as Error).message}`, positions, { cause: failure });
  }

  /** Sends a producer's queued shares, as many as fit in one request at a time, until none is left. */
  private async drain(kafkaTopic: string, laneIndex: number, lane: Lane): Promise<void> {
    lane.busy = true;
    try {
      let backToBack = false;
      for (;;) {
        // After a request, even with nothing queued yet: the next append of a busy service is on its way.
        if (backToBack && this.linger.lingerMs > 0 && lane.records < this.linger.lingerRecords) await this.lingerOn(lane);
        if (lane.queue.length === 0) break;
        backToBack = true;
        if (this.isClosed()) {
          for (const share of lane.queue.splice(0)) share.done.reject(new LogClosedError());
          lane.records = 0;
          break;
        }
        const shares: Share[] = [];
        let bytes = 0;
        while (lane.queue.length > 0 && (shares.length === 0 || bytes + lane.queue[0].bytes <= MAX_REQUEST_BYTES)) {
          const share = lane.queue.shift()!;
          lane.records -= share.records.length;
          if (share.deadline.passed) {
            share.done.reject(new Error('not sent: the append had timed out while an earlier one was in flight'));
            continue;
          }
          shares.push(share);
          bytes += share.bytes;
        }
        if (shares.length === 0) continue;
        try {
          const base = await this.produce(kafkaTopic, laneIndex, shares.flatMap((share) => share.records));
          // Shares lie one after the other in each partition's record batch.
          const next = new Map(base);
          for (const share of shares) {
            const own = new Map<number, number>();
            for (const { partition } of share.records) {
              if (!own.has(partition)) own.set(partition, next.get(partition)!);
              next.set(partition, next.get(partition)! + 1);
            }
            share.done.resolve(own);
          }
        } catch (err) {
          for (const share of shares) share.done.reject(err);
        }
      }
    } finally {
      lane.busy = false;
    }
  }

  /** Waits up to lingerMs, or until the lane's queue holds lingerRecords records. */
  private lingerOn(lane: Lane): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => lane.wake?.(), this.linger.lingerMs);
      lane.wake = () => {
        clearTimeout(timer);
        lane.wake = undefined;
        resolve();
      };
    });
  }
}
