// A consumer of the embedded log (EmbeddedLog.consume): a pump over the log's partitions. It
// delivers what they hold past its positions, batch by batch, then waits for the next commit,
// which runs it again. A handler that returns nothing is run synchronously, right after the commit;
// one that returns a promise holds the pump until it settles. A failed batch is retried after a pause.
import type { ConsumeOptions, LogRecord, Subscription } from '../port.js';

/** What a pump asks of the log it reads. */
export interface PumpHost {
  /** The topic's end offsets, by partition. */
  ends(topic: string): number[];
  /** Up to a batch of records of a partition from `fromOffset` (synchronous: the log is local). */
  read(topic: string, partition: number, fromOffset: number): LogRecord[];
  /** Lets the log drop from memory what every reader has read of a partition. */
  release(topic: string, partition: number): void;
  isClosed(): boolean;
  /** Records [from, to) of a partition were deleted (retention) before this consumer read them (LostRecords). */
  lost(topic: string, partition: number, from: number, to: number): void;
  /**
   * Counts `positions` among the topic's readers (what release() keeps) and runs `pump` after
   * each commit to the topic; the answer takes them out again, the pump first.
   */
  register(topic: string, positions: number[], pump: () => void): { pump(): void; reader(): void };
}

/** Pause before a failed batch is tried again. */
const RETRY_MS = 200;

export function pumpedSubscription(host: PumpHost, options: ConsumeOptions): Subscription {
  const { topic } = options;
  const ends = host.ends(topic);
  const positions = ends.map((_, p) => options.from.get(p) ?? 0);
  const startEnds = [...ends];
  let stopped = false;
  /** delivering, or waiting for a batch's promise or a retry: a commit's wake-up leaves it alone */
  let busy = false;
  let pending: Promise<void> | undefined;
  let settle: (() => void) | undefined;
  let reportedCaughtUp = false;
  let markCaughtUp!: () => void;
  const caughtUp = new Promise<void>((resolve) => (markCaughtUp = resolve));

  const done = (p: number, records: LogRecord[]): void => {
    positions[p] = records[records.length - 1].offset + 1;
    host.release(topic, p);
  };
  const retryLater = (err: unknown): void => {
    options.onError?.(err);
    pending = new Promise<void>((resolve) => {
      settle = resolve;
      setTimeout(resolve, RETRY_MS);
    }).then(resume);
  };
  const resume = (): void => {
    pending = undefined;
    settle = undefined;
    busy = false;
    pump();
  };
  const pump = (): void => {
    if (busy || stopped || host.isClosed()) return;
    busy = true;
    for (let delivered = true; delivered && !stopped && !host.isClosed(); ) {
      delivered = false;
      for (let p = 0; p < positions.length && !stopped && !host.isClosed(); p++) {
        let records: LogRecord[];
        let result: Promise<void> | void;
        try {
          // A read from SQLite can fail too; it must not fail the append whose commit woke this.
          records = host.read(topic, p, positions[p]);
          if (records.length === 0) continue;
          // Retention deleted the oldest segments before this consumer read them (a store's
          // checkpoint older than LOG_RETENTION_HOURS at a start): it goes on from the first kept.
          if (records[0].offset > positions[p]) {
            host.lost(topic, p, positions[p], records[0].offset);
            positions[p] = records[0].offset;
            options.lost?.(p, positions[p]);
          }
          result = options.handle(records);
        } catch (err) {
          retryLater(err);
          return;
        }
        if (result !== undefined) {
          pending = result.then(
            () => {
              done(p, records);
              resume();
            },
            retryLater,
          );
          return;
        }
        done(p, records);
        delivered = true;
      }
    }
    busy = false;
    if (!reportedCaughtUp && positions.every((pos, p) => pos >= startEnds[p])) {
      reportedCaughtUp = true;
      markCaughtUp();
    }
  };
  const registered = host.register(topic, positions, pump);
  pump();

  return {
    caughtUp,
    highWatermarks: () => new Map(host.ends(topic).map((end, p) => [p, end])),
    positions: () => new Map(positions.map((offset, p) => [p, offset])),
    stop: async () => {
      stopped = true;
      registered.pump();
      settle?.();
      while (pending) await pending;
      registered.reader();
      markCaughtUp();
    },
  };
}
