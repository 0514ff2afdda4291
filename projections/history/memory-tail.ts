import type { HistoryEntry, HistoryQuery } from './history-entry.js';

interface ChannelTail {
  entries: HistoryEntry[];
  /** client-supplied message id -> timestamp, for idempotent publishing */
  ids: Map<string, number>;
}

/**
 * The last few minutes of every channel, in memory (spec: Limits, history without persistence).
 * Entries arrive in serial order per channel, so each channel is an append-only array; channels
 * are found through app then channel name, with no key string built per call.
 */
export class MemoryTail {
  private readonly apps = new Map<string, Map<string, ChannelTail>>();
  private size = 0;

  constructor(readonly windowMs: number) {}

  private channel(appId: string, channel: string): ChannelTail | undefined {
    return this.apps.get(appId)?.get(channel);
  }

  /** Adds an entry; `indexId` records its id for idempotent publishing (client-supplied ids). */
  add(entry: HistoryEntry, indexId = false): void {
    let channels = this.apps.get(entry.appId);
    if (!channels) this.apps.set(entry.appId, (channels = new Map()));
    let tail = channels.get(entry.channel);
    if (!tail) channels.set(entry.channel, (tail = { entries: [], ids: new Map() }));
    const last = tail.entries[tail.entries.length - 1];
    if (last && last.serial >= entry.serial) return; // replayed: already here
    tail.entries.push(entry);
    if (indexId) tail.ids.set(entry.message.id, entry.message.timestamp);
    this.size++;
  }

  /** Timestamp of a message with this (client-supplied) id on the channel, if one is in the tail. */
  idSeenAt(appId: string, channel: string, id: string): number | undefined {
    return this.channel(appId, channel)?.ids.get(id);
  }

  query(q: HistoryQuery): HistoryEntry[] {
    const list = this.channel(q.appId, q.channel)?.entries;
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
    for (const [appId, channels] of this.apps) {
      for (const [name, tail] of channels) {
        const list = tail.entries;
        let n = 0;
        while (n < list.length && list[n].message.timestamp < cutoff) n++;
        if (n === 0) continue;
        if (tail.ids.size > 0) for (let i = 0; i < n; i++) tail.ids.delete(list[i].message.id);
        if (n === list.length) channels.delete(name);
        else list.splice(0, n);
        removed += n;
      }
      if (channels.size === 0) this.apps.delete(appId);
    }
    this.size -= removed;
    return removed;
  }

  get count(): number {
    return this.size;
  }
}
