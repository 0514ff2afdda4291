import type { ChannelState } from './channel-state.js';

/** A channel whose occupancy changed. */
export interface ChangedChannel {
  appId: string;
  channel: string;
}

/**
 * The channels whose occupancy a batch of records changed, told to listeners once the batch is
 * applied (in-band occupancy, src/realtime/occupancy.ts, reads the figures then). Nothing is
 * kept while no one listens.
 */
export class OccupancyChanges {
  private readonly listeners = new Set<(changed: ChangedChannel[]) => void>();
  private batch = new Map<ChannelState, ChangedChannel>();

  changed(s: ChannelState): void {
    if (this.listeners.size > 0 && !this.batch.has(s)) this.batch.set(s, { appId: s.appId, channel: s.channel });
  }

  /** Tells the listeners of the batch's changes. */
  flush(): void {
    if (this.batch.size === 0) return;
    const changed = [...this.batch.values()];
    this.batch = new Map();
    for (const listener of this.listeners) listener(changed);
  }

  /** Returns the listener's removal. */
  subscribe(listener: (changed: ChangedChannel[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
