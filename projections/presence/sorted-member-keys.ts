// The member keys of a channel in order, for the pages of GET /channels/:id/presence (ordered by
// member key, `after` the last key of the page before). Kept per member set once a read asked for
// it, and kept in order as members come and go (a binary search and a splice per change), so a page
// costs a search, not a sort of the whole set: a set of 250,000 members took 300 to 450 ms to sort
// on the event loop, and any client that may read presence could ask for it again and again.
// Hand-written: no maintained library keeps a sorted array beside a Map for us at this cost.
import { compareStrings, lowerBound } from '../sorted-strings.js';

export class SortedMemberKeys {
  /** Per member set (the Map object: a set replaced, restored or dropped takes its order with it). */
  private readonly sorted = new WeakMap<Map<string, unknown>, string[]>();

  /** The keys of `members` in order (sorted once, then kept). */
  of(members: Map<string, unknown>): readonly string[] {
    let keys = this.sorted.get(members);
    if (!keys) {
      keys = [...members.keys()].sort(compareStrings);
      this.sorted.set(members, keys);
    }
    return keys;
  }

  /** `key` joined `members` (call after it was added; nothing to do for a set never read in order). */
  added(members: Map<string, unknown>, key: string): void {
    const keys = this.sorted.get(members);
    if (!keys) return;
    const at = lowerBound(keys, key);
    if (keys[at] !== key) keys.splice(at, 0, key);
  }

  /** `key` left `members`. */
  removed(members: Map<string, unknown>, key: string): void {
    const keys = this.sorted.get(members);
    if (!keys) return;
    const at = lowerBound(keys, key);
    if (keys[at] === key) keys.splice(at, 1);
  }
}

/**
 * The member keys of each connection of a channel in order, for the pages of GET
 * /channels/:id/presence?connectionId= (a connection's members are spread over the member key
 * order, which starts with the clientId). Kept like SortedMemberKeys: grouped once a read asked
 * for it, then kept in order as members come and go, so a filtered page does not scan the set.
 */
export class ConnectionMemberKeys {
  private readonly sorted = new WeakMap<Map<string, { connectionId: string }>, Map<string, string[]>>();

  /** The keys of the members of `connectionId` in `members`, in order. */
  of(members: Map<string, { connectionId: string }>, connectionId: string): readonly string[] {
    let byConnection = this.sorted.get(members);
    if (!byConnection) {
      byConnection = new Map();
      for (const [key, m] of members) {
        let keys = byConnection.get(m.connectionId);
        if (!keys) byConnection.set(m.connectionId, (keys = []));
        keys.push(key);
      }
      for (const keys of byConnection.values()) keys.sort(compareStrings);
      this.sorted.set(members, byConnection);
    }
    return byConnection.get(connectionId) ?? [];
  }

  /** `key`, a member of `connectionId`, joined `members` (call after it was added). */
  added(members: Map<string, { connectionId: string }>, key: string, connectionId: string): void {
    const byConnection = this.sorted.get(members);
    if (!byConnection) return;
    let keys = byConnection.get(connectionId);
    if (!keys) byConnection.set(connectionId, (keys = []));
    const at = lowerBound(keys, key);
    if (keys[at] !== key) keys.splice(at, 0, key);
  }

  /** `key`, a member of `connectionId`, left `members`. */
  removed(members: Map<string, { connectionId: string }>, key: string, connectionId: string): void {
    const keys = this.sorted.get(members)?.get(connectionId);
    if (!keys) return;
    const at = lowerBound(keys, key);
    if (keys[at] === key) keys.splice(at, 1);
    if (keys.length === 0) this.sorted.get(members)!.delete(connectionId);
  }
}

/**
 * A page of a member set in key order, from the key at `from`: up to `limit` members that match,
 * read while `inRun` holds for their keys, and whether one more matches after them.
 */
export function memberPage<M>(all: ReadonlyMap<string, M>, keys: readonly string[], from: number, limit: number, matches: (m: M) => boolean, inRun: (key: string) => boolean): { page: M[]; more: boolean } {
  const page: M[] = [];
  let i = from;
  for (; i < keys.length && page.length < limit && inRun(keys[i]); i++) {
    const m = all.get(keys[i])!;
    if (matches(m)) page.push(m);
  }
  let more = false;
  for (; i < keys.length && !more && inRun(keys[i]); i++) more = matches(all.get(keys[i])!);
  return { page, more };
}
