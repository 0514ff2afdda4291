/**
 * Presence members this instance let enter whose enter the presence projection has not applied
 * yet. The limits on members (per app, per service) count them with the projection's, so that
 * enters racing each other cannot pass a limit: 120 connections sending enters without waiting
 * once entered 1,200,000 members against a limit of 250,000 (issue 22), each frame checked against
 * a count the projection had not caught up with. A reservation ends when the projection applies
 * the member's change (settle), when its append fails (release), or after `maxAgeMs` (a change the
 * projection had no reason to report).
 */
export class PresenceReservations {
  /** By member (app, channel, clientId, connectionId): its app and when it was reserved, oldest first. */
  private readonly held = new Map<string, { appId: string; at: number }>();
  private readonly perApp = new Map<string, number>();

  constructor(private readonly maxAgeMs: number) {}

  /** Reserved members of all apps, or of one. */
  count(appId?: string): number {
    return appId === undefined ? this.held.size : (this.perApp.get(appId) ?? 0);
  }

  /** Reserves the members; returns the keys to release should the append fail. */
  reserve(appId: string, channel: string, connectionId: string, clientIds: Iterable<string>, now: number): string[] {
    const keys: string[] = [];
    for (const clientId of clientIds) {
      const key = memberOf(appId, channel, clientId, connectionId);
      if (this.held.has(key)) continue;
      this.held.set(key, { appId, at: now });
      this.perApp.set(appId, (this.perApp.get(appId) ?? 0) + 1);
      keys.push(key);
    }
    return keys;
  }

  /** The projection applied changes of these members: they count there now. */
  settle(appId: string, channel: string, members: Iterable<{ clientId?: string; connectionId?: string }>): void {
    if (this.held.size === 0) return;
    for (const m of members) this.release([memberOf(appId, channel, m.clientId ?? '', m.connectionId ?? '')]);
  }

  release(keys: Iterable<string>): void {
    for (const key of keys) {
      const r = this.held.get(key);
      if (!r) continue;
      this.held.delete(key);
      const n = (this.perApp.get(r.appId) ?? 1) - 1;
      if (n === 0) this.perApp.delete(r.appId);
      else this.perApp.set(r.appId, n);
    }
  }

  /** Ends reservations older than maxAgeMs (the oldest come first in the map). */
  expire(now: number): void {
    for (const [key, r] of this.held) {
      if (now - r.at < this.maxAgeMs) return;
      this.release([key]);
    }
  }
}

const memberOf = (appId: string, channel: string, clientId: string, connectionId: string): string => `${appId}\u0000${channel}\u0000${clientId}\u0000${connectionId}`;
