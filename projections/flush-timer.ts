/**
 * When a projection writes what it applied to its store: at most `intervalMs` after the first
 * change since its last write, one write at a time. A failed write is reported and tried again at
 * the next tick (a failed write changes nothing, checkpoint included). One implementation for
 * every projection with a store (history, presence history, stats); the projection runner
 * (projections/runner.ts) gives each its interval and its error report.
 */
export class FlushTimer {
  private timer: NodeJS.Timeout | undefined;
  private cancelled = false;

  constructor(
    private readonly intervalMs: number,
    private readonly flush: () => Promise<void>,
    private readonly onError?: (err: unknown) => void,
  ) {}

  /** A write within the interval, unless one is scheduled already. */
  schedule(): void {
    if (this.timer || this.cancelled) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush().catch((err) => {
        this.onError?.(err);
        this.schedule();
      });
    }, this.intervalMs);
  }

  /**
   * No write scheduled any more, for good (close() writes what is left itself): a write in flight
   * that fails after it schedules none (before, it did, after the close, against a closed store).
   */
  cancel(): void {
    this.cancelled = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
