// A topic's one consumer shared by the projections that read it (ProjectionRunner, shareConsumers):
// each projection is handed the records from its own position on, a failed batch is retried for the
// projections that have not applied it, and readers besides the projections join and leave it.
import type { Checkpoint, ConsumeOptions, LogRecord, Subscription } from '../src/log/port.js';

export interface FeedReader {
  name: string;
  from: Checkpoint;
  handle: (records: LogRecord[]) => void | Promise<void>;
  shared?: ConsumeOptions['shared'];
  /** Told of its failed batch instead of the feed's onFailed (a reader that joined: ConsumeOptions.onError). */
  onError?: (err: unknown) => void;
  lost?: ConsumeOptions['lost'];
}

/** `left`: a reader that joined and was stopped; it is given nothing more. */
type Reader = FeedReader & { next: Map<number, number>; left?: boolean };

/**
 * One consumer's records handed to several projections, each from its own position on: the
 * consumer starts at the earliest of them, and a projection is given only the records of a batch
 * at or after its own position. A batch is retried until every projection has applied it; one that
 * applied it already is not given it again. Projections sharing the partitions among the instances
 * are asked, at each hand-over, where each partition starts for them, and told of those taken away.
 * Readers besides the projections (realtime delivery, connection events) join a running feed of a
 * whole topic and leave it (join).
 */
export class TopicFeed {
  subscription!: Subscription;
  private readers: Reader[];
  private readonly failures = new WeakSet<object>();
  private stopping: Promise<void> | undefined;
  /** Batches being handed out right now (one at a time per partition). */
  private handing = 0;

  constructor(
    readers: FeedReader[],
    private readonly onFailed: (name: string, err: unknown) => void,
  ) {
    this.readers = readers.map((r) => ({ ...r, next: r.shared ? new Map() : new Map(r.from) }));
  }

  /** Per partition, the earliest position of the projections (a partition one of them lacks: from 0). */
  from(): Checkpoint {
    return earliest(this.readers.map((r) => r.next));
  }

  /** Partitions handed to this instance: each projection says where they start for it; the consumer starts at the earliest. */
  async handOver(partitions: number[]): Promise<Checkpoint> {
    const froms: Checkpoint[] = [];
    for (const reader of this.readers) froms.push(new Map(await reader.shared!.from(partitions)));
    this.readers.forEach((reader, i) => {
      for (const p of partitions) reader.next.set(p, froms[i].get(p) ?? 0);
    });
    return earliest(froms, partitions);
  }

  revoke(partitions: number[]): void {
    for (const reader of this.readers) {
      for (const p of partitions) reader.next.delete(p);
      reader.shared!.revoked?.(partitions);
    }
  }

  /** Whether the feed's consumer was stopped (a reader may not join it any more). */
  get stopped(): boolean {
    return this.stopping !== undefined;
  }

  /**
   * Adds a reader from `from` on, or from where the consumer is on a partition it has handed on
   * past that. Pushed onto the readers in place: a batch being handed out right now reaches it too
   * (the consumer's position is that batch's start until the batch is applied), so it misses nothing
   * after its start.
   */
  join(name: string, from: Checkpoint, handle: FeedReader['handle'], onError?: (err: unknown) => void, lost?: ConsumeOptions['lost']): Subscription {
    const next = new Map(from);
    for (const [p, offset] of this.subscription.positions()) next.set(p, Math.max(offset, next.get(p) ?? 0));
    const reader: Reader = { name, from, handle, onError, lost, next };
    this.readers.push(reader);
    return {
      caughtUp: this.subscription.caughtUp,
      reading: this.subscription.reading,
      positions: () => {
        const at = new Map(reader.next);
        for (const [p, offset] of this.subscription.positions()) if (offset > (at.get(p) ?? 0)) at.set(p, offset);
        return at;
      },
      highWatermarks: () => this.subscription.highWatermarks(),
      stop: async () => {
        reader.left = true;
      },
    };
  }

  async handle(records: LogRecord[]): Promise<void> {
    const partition = records[0].partition;
    // Readers that left go only while no batch is handed out: a loop below walks the array, and a
    // reader joining meanwhile is pushed onto the one it walks.
    if (this.handing === 0 && this.readers.some((r) => r.left)) this.readers = this.readers.filter((r) => !r.left);
    this.handing++;
    try {
      for (const reader of this.readers) {
        if (reader.left) continue;
        const at = reader.next.get(partition) ?? 0;
        const own = records[0].offset >= at ? records : records.filter((r) => r.offset >= at);
        if (own.length === 0) continue;
        try {
          await reader.handle(own);
        } catch (err) {
          if (reader.onError) reader.onError(err);
          else this.onFailed(reader.name, err);
          if (typeof err === 'object' && err !== null) this.failures.add(err);
          throw err;
        }
        reader.next.set(partition, own[own.length - 1].offset + 1);
      }
    } finally {
      this.handing--;
    }
  }

  /** The log deleted records of `partition` before `next`: each reader still short of it goes on from there, told (ConsumeOptions.lost). */
  lost(partition: number, next: number): void {
    for (const reader of this.readers) {
      if (reader.left || (reader.shared && !reader.next.has(partition)) || (reader.next.get(partition) ?? 0) >= next) continue;
      reader.next.set(partition, next);
      reader.lost?.(partition, next);
    }
  }

  /** Whether the feed reported this failure already (under a projection's name). */
  reported(err: unknown): boolean {
    return typeof err === 'object' && err !== null && this.failures.has(err);
  }

  /**
   * A projection's view: its own positions (of the partitions the consumer holds), the consumer's
   * ends; stopping it stops the consumer (once).
   */
  reader(name: string): Subscription {
    const reader = this.readers.find((r) => r.name === name)!;
    return {
      caughtUp: this.subscription.caughtUp,
      reading: this.subscription.reading,
      positions: () => {
        const consumer = this.subscription.positions();
        const held = [...consumer.keys()];
        const partitions = reader.shared ? held : new Set([...held, ...reader.next.keys()]);
        // The consumer moves on once every reader applied a batch, and past the records the log left
        // out (not the service's: src/log/event-shape.ts), which no reader is given: a reader is
        // where it is, or where the consumer is, whichever is further.
        return new Map([...partitions].map((p) => [p, Math.max(reader.next.get(p) ?? 0, consumer.get(p) ?? 0)]));
      },
      starting: () => this.subscription.starting?.() ?? [],
      highWatermarks: () => this.subscription.highWatermarks(),
      stop: () => (this.stopping ??= this.subscription.stop()),
    };
  }
}

/** Per partition, the earliest of the checkpoints; a partition one of them lacks starts at 0. */
function earliest(checkpoints: Checkpoint[], partitions: Iterable<number> = checkpoints[0]?.keys() ?? []): Checkpoint {
  const from = new Map<number, number>();
  for (const p of partitions) {
    let min = Infinity;
    for (const c of checkpoints) min = Math.min(min, c.get(p) ?? 0);
    if (min !== Infinity) from.set(p, min);
  }
  return from;
}
