import type { LogEvent, TokensRevoked } from '../../src/domain/events.js';

/** What a revocation looks at in a token's credentials. */
export interface RevocableToken {
  keyName: string;
  method: 'basic' | 'token';
  /** When the token was issued (ms since the epoch). */
  issued?: number;
  clientId?: string;
  revocationKey?: string;
}

interface Entry {
  issuedBefore: number;
  appliesAt: number;
}

/** The targets a token answers to: `clientId:<id>` and `revocationKey:<key>`. */
export function targetsOf(token: RevocableToken): string[] {
  const targets: string[] = [];
  if (token.clientId !== undefined) targets.push(`clientId:${token.clientId}`);
  if (token.revocationKey !== undefined) targets.push(`revocationKey:${token.revocationKey}`);
  return targets;
}

/**
 * The token revocations projection (spec of the platform's revokeTokens): from `tokens.revoked`
 * events on the `apps` topic, per key and target, the revocations that can still reach a valid
 * token. Read by authentication on every request made with a token, so a lookup is two map reads
 * for a key with no revocations.
 *
 * Replay-safe: applying an event twice (the instance that appended it applies it at once, then
 * consumes it from the log) changes nothing, and the order of two events for one target does not
 * matter (an entry another covers, issued-before no later and applying no earlier, is dropped).
 * A revocation whose issuedBefore is older than the longest token life can reach no valid token
 * and is dropped (`prune`), which changes no answer.
 */
export class RevocationRegistry {
  static readonly handles = ['tokens.revoked'] as const;
  /** keyName -> target -> entries, none covering another */
  private readonly byKey = new Map<string, Map<string, Entry[]>>();
  private readonly countByApp = new Map<string, number>();
  private readonly appOfKey = new Map<string, string>();
  private total = 0;
  /** When the revocations applied since the last takeApplied apply (ms) */
  private readonly applying = new Set<number>();

  /** `maxTokenTtlMs`: the longest life a token can have, after which a revocation reaches nothing. */
  constructor(private readonly maxTokenTtlMs: number) {}

  canHandle(event: LogEvent): event is TokensRevoked {
    return event.type === 'tokens.revoked';
  }

  /** Applies a revocation; returns whether it changed anything (false for a repeat). */
  evolve(event: TokensRevoked): boolean {
    let byTarget = this.byKey.get(event.keyName);
    if (!byTarget) this.byKey.set(event.keyName, (byTarget = new Map()));
    this.appOfKey.set(event.keyName, event.appId);
    let changed = false;
    for (const target of event.targets) {
      const kept = this.after(event, target);
      if (!kept) continue;
      this.adjust(event.appId, kept.length - (byTarget.get(target)?.length ?? 0));
      byTarget.set(target, kept);
      changed = true;
    }
    if (changed) this.applying.add(event.appliesAt);
    return changed;
  }

  /**
   * Whether a revocation has come to apply since the last call (at `now` or before): the realtime
   * connections it reaches are to be disconnected then. Revocations replayed at a start count too,
   * so an instance started during a revocation's margin disconnects at its end as well.
   */
  takeApplied(now: number): boolean {
    let any = false;
    for (const at of this.applying) {
      if (at > now) continue;
      this.applying.delete(at);
      any = true;
    }
    return any;
  }

  /** How many more revocations the registry would hold after `event` (0 for a repeat, negative when it replaces several). */
  growth(event: TokensRevoked): number {
    const byTarget = this.byKey.get(event.keyName);
    let n = 0;
    for (const target of new Set(event.targets)) {
      const kept = this.after(event, target);
      if (kept) n += kept.length - (byTarget?.get(target)?.length ?? 0);
    }
    return n;
  }

  /** Whether applying `event` would change anything (a repeat, or one an earlier revocation covers, would not). */
  changes(event: TokensRevoked): boolean {
    return [...new Set(event.targets)].some((target) => this.after(event, target) !== undefined);
  }

  /** A target's entries once `event` is applied, or undefined when it changes nothing. */
  private after(event: TokensRevoked, target: string): Entry[] | undefined {
    const entries = this.byKey.get(event.keyName)?.get(target) ?? [];
    const next: Entry = { issuedBefore: event.issuedBefore, appliesAt: event.appliesAt };
    if (entries.some((e) => covers(e, next))) return undefined;
    return [...entries.filter((e) => !covers(next, e)), next];
  }

  /** Whether a token is refused: a revocation of one of its targets applies at `now` and reaches its issue time. */
  isRevoked(token: RevocableToken, now: number): boolean {
    return this.matches(token, (e) => now >= e.appliesAt);
  }

  /** Whether a revocation reaches the token, now or once it applies (realtime connections get a hint before). */
  isRevokedOrPending(token: RevocableToken): boolean {
    return this.matches(token, () => true);
  }

  private matches(token: RevocableToken, applies: (e: Entry) => boolean): boolean {
    if (token.method !== 'token' || token.issued === undefined) return false;
    const byTarget = this.byKey.get(token.keyName);
    if (!byTarget) return false;
    for (const target of targetsOf(token)) {
      for (const e of byTarget.get(target) ?? []) if (token.issued < e.issuedBefore && applies(e)) return true;
    }
    return false;
  }

  /** Revocations held: all apps, and one app's. */
  held(appId?: string): number {
    return appId === undefined ? this.total : (this.countByApp.get(appId) ?? 0);
  }

  /**
   * Drops the revocations no valid token can be reached by any more, and folds a target's
   * revocations that apply already into one (the latest issuedBefore): neither changes an answer
   * from `now` on, and together they bound what a target holds.
   */
  prune(now: number): void {
    const horizon = now - this.maxTokenTtlMs;
    for (const [keyName, byTarget] of this.byKey) {
      const appId = this.appOfKey.get(keyName)!;
      for (const [target, entries] of byTarget) {
        const applied = entries.filter((e) => e.appliesAt <= now);
        const pending = entries.filter((e) => e.appliesAt > now);
        const folded = applied.length > 1 ? [{ issuedBefore: Math.max(...applied.map((e) => e.issuedBefore)), appliesAt: Math.min(...applied.map((e) => e.appliesAt)) }] : applied;
        const kept = [...folded, ...pending].filter((e) => e.issuedBefore > horizon);
        if (kept.length === entries.length) continue;
        this.adjust(appId, kept.length - entries.length);
        if (kept.length === 0) byTarget.delete(target);
        else byTarget.set(target, kept);
      }
      if (byTarget.size === 0) {
        this.byKey.delete(keyName);
        this.appOfKey.delete(keyName);
      }
    }
  }

  /** What it holds, for a snapshot (projections/snapshots.ts). */
  snapshot(): RevocationsSnapshot {
    return [...this.byKey].map(([keyName, byTarget]) => [keyName, this.appOfKey.get(keyName)!, [...byTarget].map(([target, entries]) => [target, entries.map((e) => [e.issuedBefore, e.appliesAt])])]);
  }

  /**
   * Takes a snapshot's revocations in, as applying them would: each comes to apply again
   * (takeApplied), as revocations replayed at a start do.
   */
  restore(state: RevocationsSnapshot): void {
    for (const [keyName, appId, targets] of state) {
      for (const [target, entries] of targets) {
        for (const [issuedBefore, appliesAt] of entries) this.evolve({ type: 'tokens.revoked', appId, keyName, targets: [target], issuedBefore, appliesAt });
      }
    }
  }

  private adjust(appId: string, delta: number): void {
    if (delta === 0) return;
    this.total += delta;
    const n = (this.countByApp.get(appId) ?? 0) + delta;
    if (n === 0) this.countByApp.delete(appId);
    else this.countByApp.set(appId, n);
  }
}

/** The registry's state in a snapshot: per key, its app and its targets' entries as [issuedBefore, appliesAt]. */
export type RevocationsSnapshot = [keyName: string, appId: string, targets: [target: string, entries: [number, number][]][]][];

/** `a` reaches every token `b` reaches, from no later. */
const covers = (a: Entry, b: Entry): boolean => a.issuedBefore >= b.issuedBefore && a.appliesAt <= b.appliesAt;
