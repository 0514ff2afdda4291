import type { LogPosition, LogRecord } from './port.js';

/**
 * How far a consumer has applied a topic, and a wait for an append to be applied: read-your-writes
 * through the log. A writer appends, then waits here until its own consumer has applied the
 * record, so what it answers is what every instance will hold, in log order (applying a change
 * locally as well would let the consumer's later replay of an older event undo a newer one for a while).
 */
export class AppliedPositions {
  /** next offset to apply, per partition */
  private readonly next = new Map<number, number>();
  private waiters: { positions: LogPosition[]; resolve: () => void }[] = [];

  /** Called by the consumer after it applied a batch (records of one partition, in order). */
  applied(records: LogRecord[]): void {
    if (records.length === 0) return;
    const last = records[records.length - 1];
    if ((this.next.get(last.partition) ?? 0) <= last.offset) this.next.set(last.partition, last.offset + 1);
    if (this.waiters.length === 0) return;
    const waiting: typeof this.waiters = [];
    for (const w of this.waiters) (this.covers(w.positions) ? w.resolve() : waiting.push(w));
    this.waiters = waiting;
  }

  covers(positions: LogPosition[]): boolean {
    return positions.every((p) => (this.next.get(p.partition) ?? 0) > p.offset);
  }

  /** Resolves true once every position is applied, false after `timeoutMs` (the record stays on the log). */
  wait(positions: LogPosition[], timeoutMs: number): Promise<boolean> {
    if (this.covers(positions)) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const waiter = {
        positions,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      timer.unref?.();
      this.waiters.push(waiter);
    });
  }
}
