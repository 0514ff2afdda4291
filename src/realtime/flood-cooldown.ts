import { pairDigest, RecentKeys } from '../recent-keys.js';
import type { Credentials } from '../auth/credentials.js';

/**
 * Where a connection comes from, as far as the service knows (issue 22): the key its credentials
 * are of (a token's: the key that issued it), the address its socket came from, and the clientId
 * when a token fixes it. A clientId asked for with a key, or under a wildcard token, is the
 * client's own choice, so it is left out: a flooder picking a new one each time would otherwise be
 * a new origin each time. A fixed size (24 characters), however long the parts.
 */
export function originOf(identity: { credentials: Credentials; address?: string }): string {
  const { credentials, address } = identity;
  const fixedClientId = credentials.method === 'token' && credentials.clientId !== undefined && credentials.clientId !== '*' ? credentials.clientId : '';
  return pairDigest(`${credentials.keyName}\u0000${address ?? ''}`, fixedClientId);
}

/**
 * Origins recently sent away for flooding (over their inbound budget), for REALTIME_FLOOD_COOLDOWN_MS
 * after the last time: a connection made from one meanwhile starts with a tenth of the inbound
 * burst (inbound-budget.ts) instead of all of it, refilling at the normal rate. A flooder that
 * reconnects each time it is cut got its burst admitted on every new connection (200 frames, 4 MiB
 * at the defaults: over-limit publishes each published); now some 20 frames. Nothing is refused:
 * neighbours on the same key and address connect as before, and a client sending at most its rate
 * never notices (the bucket refills as fast as ever); one sending more than a tenth of the burst
 * at once on a new connection meanwhile (many ATTACHes at connect) is sent away once, and resumes. What a connection resumed keeps its own
 * budget (refilled since its cut): resuming gains nothing either.
 *
 * Bounded: at most `maxOrigins` remembered (the oldest generation goes whole when the newer is
 * half full, recent-keys.ts); one pushed out early only gets its full burst back. Each instance
 * keeps its own: a flooder spread over instances is cooled on each one it was cut by.
 */
export class FloodCooldown {
  private readonly cut: RecentKeys<number>;

  constructor(
    private readonly cooldownMs: number,
    maxOrigins: number,
    private readonly now: () => number,
  ) {
    this.cut = new RecentKeys(maxOrigins, Math.max(1, cooldownMs), now);
  }

  /** A connection from `origin` was sent away over its inbound budget. */
  cutOff(origin: string): void {
    if (this.cooldownMs > 0) this.cut.set(origin, this.now());
  }

  /** Whether a connection from `origin` starts cooled down (one from there was cut within the cool-down). */
  cooling(origin: string): boolean {
    const at = this.cut.get(origin);
    return at !== undefined && this.now() - at < this.cooldownMs;
  }

  /** Origins remembered (some maybe past their cool-down): bounded by maxOrigins. */
  get size(): number {
    return this.cut.size;
  }
}
