// The Kafka log's consumers leaving their groups as it closes (KafkaLog.closeAndLeave): a shared
// consumer stopped during a rebalance (its first join included) leaves only when the rebalance ends,
// after its stop returned (KafkaSubscription.stop). A process that exits sooner leaves its member in
// the group until the session timeout, and the other instances and the next start wait for it there.
import type { LoggerLike } from './kafka-logger.js';

/** One consumer: its topic, its name, and what settles once it has left its group. */
export interface Leaver {
  readonly kafkaTopic: string;
  readonly consumerName: string;
  left(): Promise<void>;
}

export interface Left {
  /** the consumers the log had at its close (running, or stopped and not yet out of their groups) */
  consumers: number;
  /** of them, those still in their groups when the wait's bound passed */
  stillInGroups: number;
}

const named = (leavers: Iterable<Leaver>): string[] => [...leavers].map((l) => `${l.kafkaTopic} ${l.consumerName}`);

export class GroupLeave {
  private readonly pending: Set<Leaver>;
  private readonly all: Promise<void>;

  constructor(private readonly leavers: Leaver[]) {
    this.pending = new Set(leavers);
    // left() never fails (a failed disconnect is logged where it happens); settled either way.
    const settle = (l: Leaver) => () => void this.pending.delete(l);
    this.all = Promise.all(leavers.map((l) => l.left().then(settle(l), settle(l)))).then(() => undefined);
  }

  /**
   * Resolves once every consumer has left its group, or once `withinMs` has passed; logs what it
   * waits for (the consumers not out yet) and how it ended.
   */
  async wait(withinMs: number, logger: LoggerLike | undefined): Promise<Left> {
    const waiting = named(this.pending);
    if (waiting.length > 0) {
      logger?.info({ consumers: waiting, withinMs: Number.isFinite(withinMs) ? Math.max(0, withinMs) : undefined }, 'closing the Kafka log: waiting for its consumers to leave their groups');
    }
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const bound = Number.isFinite(withinMs) ? [new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, withinMs))))] : [];
    await Promise.race([this.all, ...bound]);
    clearTimeout(timer);
    const still = named(this.pending);
    if (still.length > 0) {
      logger?.warn({ consumers: still, waitedMs: Date.now() - started }, 'closing the Kafka log: consumers still in their groups when the stop ran out of time; the broker drops them at their session timeout');
    } else if (waiting.length > 0) {
      logger?.info({ consumers: waiting.length, waitedMs: Date.now() - started }, 'closing the Kafka log: its consumers left their groups');
    }
    return { consumers: this.leavers.length, stillInGroups: still.length };
  }
}
