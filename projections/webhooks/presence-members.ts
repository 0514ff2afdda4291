// Who is present on each channel as a presence rule reads the log, so that its items carry the
// action the platform broadcasts: an enter by a member already present (the same clientId and
// connection) is sent as `update` (4), as the presence projection
// (projections/presence/presence-projection.ts) tells subscribers. The log records what the
// client asked (`enter`); whether it was a re-enter depends on what came before it on the channel.
import type { Checkpoint, Log, LogRecord, Topic } from '../../src/log/port.js';
import type { PresenceEvent } from '../../src/domain/presence-event.js';
import { eventOf } from '../../src/log/event-shape.js';
import { channelKey } from '../../src/log/partitioner.js';

const memberKey = (e: { clientId?: string; connectionId: string }): string => `${e.clientId ?? ''}\u0000${e.connectionId}`;

/** Records read at once while a rule catches up with who is present. */
const READ_PAGE = 1_000;

export class PresenceMembers {
  /** Per partition: the next offset applied, and per channel its members' keys. */
  private readonly partitions = new Map<number, { next: number; channels: Map<string, Set<string>> }>();

  private readonly keyPrefix: string;

  constructor(
    private readonly appId: string,
    private readonly matches: (channel: string) => boolean,
  ) {
    this.keyPrefix = channelKey(appId, '');
  }

  /**
   * Applies a change to the channel's members, returning whether the member was present before it
   * (an enter then is an update); `undo` is given what puts it back (a batch that fails is applied
   * again from the same state).
   */
  apply(partition: number, channel: string, e: PresenceEvent, undo?: (() => void)[]): boolean {
    let part = this.partitions.get(partition);
    if (!part) this.partitions.set(partition, (part = { next: 0, channels: new Map() }));
    let members = part.channels.get(channel);
    if (!members) part.channels.set(channel, (members = new Set()));
    const set = members;
    const key = memberKey(e);
    const present = set.has(key);
    if (e.action === 'enter' || e.action === 'update') {
      if (!present) {
        set.add(key);
        undo?.push(() => set.delete(key));
      }
    } else if (e.action === 'leave') {
      if (present) {
        set.delete(key);
        undo?.push(() => set.add(key));
      }
    } else if (e.action === 'drop') {
      const gone = [...set].filter((k) => k.endsWith(`\u0000${e.connectionId}`));
      for (const k of gone) set.delete(k);
      if (gone.length > 0) undo?.push(() => gone.forEach((k) => set.add(k)));
    }
    if (set.size === 0 && !undo) part.channels.delete(channel);
    return present;
  }

  /** A partition's batch was delivered up to `next`. */
  advance(partition: number, next: number): void {
    const part = this.partitions.get(partition);
    if (part) part.next = next;
    else this.partitions.set(partition, { next, channels: new Map() });
  }

  /**
   * Brings the partitions to `to` (where the rule's delivery starts on them) by reading the log
   * before it: from where they are, or from the beginning for one that would go back.
   */
  async catchUp(log: Log, topic: Topic, to: Checkpoint): Promise<void> {
    for (const [partition, end] of to) {
      let part = this.partitions.get(partition);
      if (!part || part.next > end) this.partitions.set(partition, (part = { next: 0, channels: new Map() }));
      while (part.next < end) {
        const records = await log.read(topic, partition, part.next, Math.min(READ_PAGE, end - part.next));
        if (records.length === 0) break;
        for (const r of records) if (r.offset < end) this.record(r);
        part.next = Math.min(end, records[records.length - 1].offset + 1);
        // A page at a time: the embedded log reads at once, and 200,000 records held the event loop (every app) for 0.5 s.
        await new Promise((resolve) => setImmediate(resolve));
      }
      part.next = end;
    }
  }

  private record(r: LogRecord): void {
    // Another app's record (keyed `<appId>:<channel>`: src/log/partitioner.ts) is not decoded.
    if (!r.key.startsWith(this.keyPrefix)) return;
    const event = eventOf(r.value); // undefined: not the service's (src/log/event-shape.ts)
    if (event?.type === 'presence.changed' && event.appId === this.appId && this.matches(event.channel)) this.apply(r.partition, event.channel, event.event);
  }
}
