import { ServiceError } from '../errors.js';
import { pairDigest } from '../recent-keys.js';

export interface NonceLimits {
  maxTokenNonces: number;
  maxTokenNoncesPerApp: number;
}

/**
 * Token request nonces used within the replay window, bounded in memory: at most
 * `maxTokenNonces` in all and `maxTokenNoncesPerApp` per app. When either is reached a new nonce
 * is refused (42910) rather than let through unchecked: replay protection never silently stops.
 *
 * Insertion order is expiry order (an entry is never forgotten before the one inserted before
 * it), so forgetting walks from the oldest and stops at the first entry still needed. Nonces are
 * kept as a fixed-size digest, so a long nonce costs no more than a short one.
 */
export class NonceCache {
  /** `appId\0digest(keyName, nonce)` -> when it may be forgotten (ms since the epoch) */
  private readonly entries = new Map<string, number>();
  private readonly perApp = new Map<string, number>();
  private lastForgetAt = 0;

  constructor(private readonly limits: NonceLimits) {}

  get size(): number {
    return this.entries.size;
  }

  /** How many nonces an app holds now. */
  heldBy(appId: string): number {
    return this.perApp.get(appId) ?? 0;
  }

  /**
   * Remembers a nonce until at least `forgetAt`. Returns false if it is remembered already (a
   * replay); throws 42910 if it is new and there is no room for it.
   */
  remember(appId: string, keyName: string, nonce: string, forgetAt: number, now: number): boolean {
    this.forgetExpired(now);
    const digest = pairDigest(keyName, nonce);
    const id = `${appId}\u0000${digest}`;
    if (this.entries.has(id)) return false;
    if (this.entries.size >= this.limits.maxTokenNonces) {
      throw new ServiceError('rateLimited', 'too many signed token requests in the last minutes across the service; retry later');
    }
    const held = this.heldBy(appId);
    if (held >= this.limits.maxTokenNoncesPerApp) {
      throw new ServiceError('rateLimited', `this app has made ${held} signed token requests within the replay window, the most it may; retry later`);
    }
    // A forget time earlier than the last one's waits for it, so insertion order stays expiry order.
    this.lastForgetAt = Math.max(this.lastForgetAt, forgetAt);
    this.entries.set(id, this.lastForgetAt);
    this.perApp.set(appId, held + 1);
    return true;
  }

  private forgetExpired(now: number): void {
    for (const [id, forgetAt] of this.entries) {
      if (forgetAt > now) return;
      this.entries.delete(id);
      const appId = id.slice(0, id.lastIndexOf('\u0000'));
      const held = this.perApp.get(appId)! - 1;
      if (held === 0) this.perApp.delete(appId);
      else this.perApp.set(appId, held);
    }
  }
}
