// What clients may add to the `apps` topic. That topic is kept whole (retention never deletes it)
// and read again at every start after its snapshot, so each record there is for good: a token
// revocation that changes what is revoked (nearly every call: a later issuedBefore), a key change,
// a webhook rule created or deleted, a sandbox app created. Each app has a budget of such events,
// a token bucket of APP_EVENTS_BURST refilled at APP_EVENTS_PER_MINUTE; the sandbox's app
// creations (POST /apps needs no credentials) share one. Above it: 42910 (429), nothing appended,
// retry later (README: Resource limits). Per instance: with several instances behind a balancer,
// one client reaches each one's budget.
import { ServiceError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';

export type AppEventsLimits = Pick<Limits, 'appEventsPerMinute' | 'appEventsBurst'>;

/** The budget the sandbox's app creations share (not an app id: those have no colon). */
export const SANDBOX_BUDGET = 'sandbox:';

/** Past this many budgets held, the full ones (which a new one equals) are let go. */
const MAX_BUDGETS = 10_000;

interface Bucket {
  tokens: number;
  refilledAt: number;
}

export class AppEventsBudget {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limits: AppEventsLimits,
    private readonly clock: Clock,
  ) {}

  /** Takes one event from `budget`'s bucket (an app id, or SANDBOX_BUDGET), or throws 42910 naming `what`. */
  take(budget: string, what: string): void {
    const { appEventsPerMinute: perMinute, appEventsBurst: burst } = this.limits;
    const now = this.clock.now();
    let bucket = this.buckets.get(budget);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUDGETS) this.forgetFull(now);
      bucket = { tokens: burst, refilledAt: now };
      this.buckets.set(budget, bucket);
    }
    this.refill(bucket, now);
    if (bucket.tokens < 1) {
      const waitS = Math.ceil(((1 - bucket.tokens) * 60) / perMinute);
      const whose = budget === SANDBOX_BUDGET ? 'the sandbox' : `app ${budget}`;
      throw new ServiceError(
        'rateLimited',
        `${whose} made more changes that are kept on the log for good (token revocations, key and webhook rule changes, sandbox apps) than its budget allows: ${burst} at once, then ${perMinute} a minute (APP_EVENTS_BURST, APP_EVENTS_PER_MINUTE); ${what} was not made; retry in ${waitS} s`,
      );
    }
    bucket.tokens -= 1;
  }

  private refill(bucket: Bucket, now: number): void {
    const { appEventsPerMinute: perMinute, appEventsBurst: burst } = this.limits;
    bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.refilledAt) * perMinute) / 60_000);
    bucket.refilledAt = now;
  }

  private forgetFull(now: number): void {
    for (const [budget, bucket] of this.buckets) {
      this.refill(bucket, now);
      if (bucket.tokens >= this.limits.appEventsBurst) this.buckets.delete(budget);
    }
  }
}
