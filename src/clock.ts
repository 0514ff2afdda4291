/** The wall clock, passed as a dependency so tests can control time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Never goes backwards, so timestamps assigned in append order are ordered too. A fence at T
 * makes every later timestamp greater than T: once a history query has resolved its end to T,
 * nothing appended afterwards can fall inside that query's window.
 */
export class MonotonicClock {
  private last = 0;
  private fenced = 0;
  constructor(private readonly clock: Clock = systemClock) {}

  next(): number {
    const now = this.clock.now();
    this.last = Math.max(now, this.last, this.fenced + 1);
    return this.last;
  }

  /** The newest instant that every later timestamp will exceed: now, fenced. */
  fence(): number {
    const t = Math.max(this.clock.now(), this.last);
    this.fenced = Math.max(this.fenced, t);
    return t;
  }
}
