import type { HistoryEntry, HistoryQuery } from './history-entry.js';

/**
 * The last few minutes of every channel, in memory (spec: Limits, history without persistence).
 * Entries arrive in serial order per channel, so each channel is an append-only array.
 */
export class MemoryTail {
  private readonly channels = new Map<string, HistoryEntry[]>();
  private readonly ids = new Map<string, Map<string, number>>();
  private size = 0;

  constructor(readonly windowMs: number) {}

  private static key(appId: string, channel: string): string {
    return `${appId}\u0000${channel}`;
  }

  add(entry: HistoryEntry): void {
    const key = MemoryTail.key(entry.appId, entry.channel);
    let list = this.channels.get(key);
    if (!list) {
      list = [];
      this.channels.set(key, list);
      this.ids.set(key, new Map());
    }
    const last = list[list.length - 1];
    if (last && last.serial >= entry.serial) return; // replayed: already here
    list.push(entry);
    this.ids.get(key)!.set(entry.message.id, entry.message.timestamp);
    this.size++;
  }

  /** Timestamp of a message with this id on the channel, if one is in the tail. */
  idSeenAt(appId: string, channel: string, id: string): number | undefined {
    return this.ids.get(MemoryTail.key(appId, channel))?.get(id);
  }

  query(q: HistoryQuery): HistoryEntry[] {
    const list = this.channels.get(MemoryTail.key(q.appId, q.channel));
    if (!list) return [];
    const out: HistoryEntry[] = [];
    if (q.direction === 'backwards') {
      for (let i = list.length - 1; i >= 0 && out.length < q.limit; i--) {
        const e = list[i];
        if (q.after !== undefined && e.serial >= q.after) continue;
        const ts = e.message.timestamp;
        if (ts > q.end) continue;
        if (ts < q.start) continue;
        out.push(e);
      }
    } else {
      for (let i = 0; i < list.length && out.length < q.limit; i++) {
        const e = list[i];
        if (q.after !== undefined && e.serial <= q.after) continue;
        const ts = e.message.timestamp;
        if (ts < q.start || ts > q.end) continue;
        out.push(e);
      }
    }
    return out;
  }

  /** Oldest timestamp the tail is complete from (entries older than this may be evicted). */
  horizon(now: number): number {
    return now - this.windowMs;
  }

  evict(now: number): number {
    const cutoff = this.horizon(now);
    let removed = 0;
    for (const [key, list] of this.channels) {
      let n = 0;
      while (n < list.length && list[n].message.timestamp < cutoff) n++;
      if (n === 0) continue;
      const ids = this.ids.get(key)!;
      for (let i = 0; i < n; i++) ids.delete(list[i].message.id);
      if (n === list.length) {
        this.channels.delete(key);
        this.ids.delete(key);
      } else {
        list.splice(0, n);
      }
      removed += n;
    }
    this.size -= removed;
    return removed;
  }

  get count(): number {
    return this.size;
  }
}
