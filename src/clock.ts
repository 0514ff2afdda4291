/** The wall clock, passed as a dependency so tests can control time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** Never goes backwards, so timestamps assigned in append order are ordered too. */
export class MonotonicClock {
  private last = 0;
  constructor(private readonly clock: Clock = systemClock) {}
  next(): number {
    const now = this.clock.now();
    this.last = now > this.last ? now : this.last;
    return this.last;
  }
}
