import type { LogPosition, LogRecord } from './port.js';

/** The next offset per partition: everything before it is included. */
export type Positions = ReadonlyMap<number, number>;

interface Waiter {
  topic: string;
  target: Positions;
  resolve: (reached: boolean) => void;
}

/** The positions that include `positions`: each partition's highest offset, plus one. */
export function positionsAfter(positions: readonly LogPosition[]): Map<number, number> {
  const after = new Map<number, number>();
  for (const { partition, offset } of positions) after.set(partition, Math.max(after.get(partition) ?? 0, offset + 1));
  return after;
}

/**
 * What a projection has applied of each topic, per partition, in this process, and waits for it to
 * reach given positions: how a read on an instance comes to reflect the writes that instance
 * acknowledged (src/log/own-writes.ts). The projection calls advance() after each batch it applied.
 */
export class AppliedPositions {
  private readonly next = new Map<string, Map<number, number>>();
  private readonly waiters = new Set<Waiter>();

  /** After a batch (one partition, in offset order) is applied: its records are included. */
  advance(records: readonly LogRecord[]): void {
    const last = records[records.length - 1];
    if (!last) return;
    let partitions = this.next.get(last.topic);
    if (!partitions) this.next.set(last.topic, (partitions = new Map()));
    if ((partitions.get(last.partition) ?? 0) > last.offset) return;
    partitions.set(last.partition, last.offset + 1);
    for (const w of this.waiters) {
      if (w.topic === last.topic && this.reached(w.topic, w.target)) {
        this.waiters.delete(w);
        w.resolve(true);
      }
    }
  }

  /**
   * Positions included without being applied in this process: what a restored snapshot holds
   * (its consumer starts after them, so a partition that gets nothing new would never advance).
   */
  include(topic: string, positions: Positions): void {
    let partitions = this.next.get(topic);
    if (!partitions) this.next.set(topic, (partitions = new Map()));
    for (const [partition, offset] of positions) if ((partitions.get(partition) ?? 0) < offset) partitions.set(partition, offset);
    for (const w of this.waiters) {
      if (w.topic === topic && this.reached(w.topic, w.target)) {
        this.waiters.delete(w);
        w.resolve(true);
      }
    }
  }

  /** The log deleted `partition`'s records before `next` (ConsumeOptions.lost): they count as applied. */
  lost(topic: string, partition: number, next: number): void {
    this.include(topic, new Map([[partition, next]]));
  }

  /** The next offset of one partition included (0: none yet). */
  nextOf(topic: string, partition: number): number {
    return this.next.get(topic)?.get(partition) ?? 0;
  }

  /** What is included of `topic`: the next offset per partition. */
  of(topic: string): Map<number, number> {
    return new Map(this.next.get(topic));
  }

  /** Whether every partition of `target` is applied up to its position. */
  reached(topic: string, target: Positions): boolean {
    const partitions = this.next.get(topic);
    for (const [partition, offset] of target) if ((partitions?.get(partition) ?? 0) < offset) return false;
    return true;
  }

  /** Records of `target` not applied yet (what a wait that timed out reports). */
  behind(topic: string, target: Positions): number {
    const partitions = this.next.get(topic);
    let n = 0;
    for (const [partition, offset] of target) n += Math.max(0, offset - (partitions?.get(partition) ?? 0));
    return n;
  }

  /** Resolves true once `target` is reached, or false after `timeoutMs`. */
  until(topic: string, target: Positions, timeoutMs: number): Promise<boolean> {
    if (this.reached(topic, target)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        resolve(false);
      }, timeoutMs);
      const waiter: Waiter = {
        topic,
        target,
        resolve: (reached) => {
          clearTimeout(timer);
          resolve(reached);
        },
      };
      this.waiters.add(waiter);
    });
  }
}
