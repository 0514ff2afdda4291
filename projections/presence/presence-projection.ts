import type { Checkpoint, LogRecord } from '../../src/log/port.js';
import type { LogEvent, PresenceChanged } from '../../src/domain/events.js';
import { appIdOfKey, channelKey, partitionFor } from '../../src/log/partitioner.js';
import type { StoredMessage } from '../../src/domain/message.js';
import type { PresenceEvent } from '../../src/domain/presence-event.js';
import { HistoryProjection, type ChannelEntries, type HistoryOptions } from '../history/history-projection.js';
import type { HistoryEntry, HistoryQuery } from '../history/history-entry.js';
import type { AppliedPositions } from '../../src/log/applied-positions.js';
import { Topics } from '../../src/log/port.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import { atOrBefore, type SnapshotPositions, type SnapshotStore } from '../snapshots.js';
import { ConnectionMemberKeys, memberPage, SortedMemberKeys } from './sorted-member-keys.js';
import { lowerBound, upperBound } from '../sorted-strings.js';

/** Presence action codes (spec: PresenceMessage). */
export const PresenceAction = { absent: 0, present: 1, enter: 2, leave: 3, update: 4 } as const;

/** A member now present, unique by (clientId, connectionId). */
export interface PresenceMember {
  id: string;
  clientId?: string;
  connectionId: string;
  /** The instance whose realtime gateway holds the member's connection (absent for fixtures). */
  instanceId?: string;
  timestamp: number;
  data?: StoredMessage['data'];
  encoding?: string;
  extras?: Record<string, unknown>;
}

/** A snapshot's state: every channel's members, by channel key. */
export interface PresenceSnapshot {
  channels: [channelKey: string, members: PresenceMember[]][];
  /** The newest record time it includes (a start decides by it whether presence history needs the records before). */
  newest: number;
}

export interface MembersQuery {
  appId: string;
  channel: string;
  clientId?: string;
  connectionId?: string;
  limit: number;
  /** continue after this member key (exclusive) */
  after?: string;
}

/** Told of a change as it is applied, with the presence messages it makes. */
export type PresenceApplied = (appId: string, channel: string, messages: StoredMessage[]) => void;

export interface PresenceOptions extends Omit<HistoryOptions, 'entriesOf'> {
  /**
   * Told when presence history falls behind the member set (its store maxUnstoredRows rows
   * behind): with where history stands, for a consumer of its own to feed applyHistory() from
   * there (a consumer started before is replaced); then with undefined once it caught up. Given,
   * apply() never refuses a batch for its history, so the member set does not wait for the store;
   * absent, it does (a writer's member set serves only its rows).
   */
  onHistoryBehind?: (from: Checkpoint | undefined) => void;
  /** Told of a subscriber's throw (onApplied): thrown into apply(), the batch was handed again for ever. */
  onSubscriberError?: (err: unknown, appId: string, channel: string) => void;
}

/** A channel's members as presence history last saw them (null: none). */
type MembersThen = Map<string, PresenceMember> | null;

const memberKey = (m: { clientId?: string; connectionId: string }): string => `${m.clientId ?? ''}\u0000${m.connectionId}`;

/**
 * The presence projection (ARCHITECTURE: presence): the current members of every channel, and
 * presence history through a HistoryProjection of its own. The member set is restored at start
 * from the newest usable snapshot (projections/snapshots.ts), or else rebuilt by replaying the
 * whole `presence` topic; the history store skips what it already holds.
 */
export class PresenceProjection {
  static readonly handles = ['presence.changed'] as const;
  readonly history: HistoryProjection;
  private readonly members = new Map<string, Map<string, PresenceMember>>();
  /** What the member set includes, per partition (not the history's checkpoint: that is the store's). */
  private readonly applied: Checkpoint = new Map();
  /** The newest record time the member set includes. */
  private newest = 0;
  /** Members present, all apps and per app (what the realtime limits on members read). */
  private total = 0;
  private readonly perApp = new Map<string, number>();
  /** The member keys of the sets read in order (query: REST pages), kept in order as members come and go. */
  private readonly order = new SortedMemberKeys();
  /** The same per connection, for the pages filtered by connectionId. */
  private readonly connectionOrder = new ConnectionMemberKeys();
  /** Subscribers to the changes as they are applied (onApplied). */
  private readonly appliedSubscribers = new Set<PresenceApplied>();
  /** The channels of each partition (a channel's events are all on one), and the batch's partition. */
  private readonly channelsIn = new Map<number, Set<string>>();
  private partition = -1;
  /**
   * Partitions whose history is behind the member set (onHistoryBehind), each with its channels' members where history
   * stands, for the channels the member set changed since (copied before the change): a history row depends on them.
   */
  private readonly historyBehind = new Map<number, Map<string, MembersThen>>();
  /** Whether evolve() applies to history's view of the members (applyHistory), not the member set. */
  private historyOnly = false;

  constructor(private readonly options: PresenceOptions) {
    this.history = new HistoryProjection({ ...options, entriesOf: (event) => this.evolve(event) });
  }

  /** Subscribes to every change as it is applied, with the presence messages it makes (the realtime gateway's delivery sends them), in log order, after the member set includes it; returns the unsubscribe. */
  onApplied(subscriber: PresenceApplied): () => void {
    this.appliedSubscribers.add(subscriber);
    return () => this.appliedSubscribers.delete(subscriber);
  }

  /** What the member set and presence history include, per partition (its history applies every record). */
  get progress(): AppliedPositions {
    return this.history.progress;
  }

  canHandle(event: LogEvent): event is PresenceChanged {
    return event.type === 'presence.changed';
  }

  /**
   * Where the presence consumer starts: after the restored snapshot, or at 0 (a full replay).
   * Presence history must lose nothing by it: the entries of the records a snapshot skips (a
   * leave's last data, a drop's members) come from the member set as it was then. So a snapshot
   * serves if it is no newer than where presence history resumes, or if every record it holds
   * is older than the history window and in the store already (a start long after the last
   * change); otherwise an older one does (SnapshotStore keeps several).
   */
  async start(snapshots?: SnapshotStore): Promise<Checkpoint> {
    const historyFrom = await this.history.start();
    const stored = new Map(this.history.applied());
    const horizon = this.history.tail.horizon(this.options.clock.now());
    const snapshot = await snapshots?.load<PresenceSnapshot>(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, (s) => {
      const at = s.positions.get(Topics.presence) ?? new Map<number, number>();
      if (atOrBefore(at, historyFrom) || (s.state.newest < horizon && atOrBefore(at, stored))) return undefined;
      return { reason: 'newer than where presence history resumes (its window needs the member set as it was then); an older snapshot serves', warn: false };
    });
    if (!snapshot) return new Map();
    this.restore(snapshot.state);
    this.newest = snapshot.state.newest;
    const from = new Map(snapshot.positions.get(Topics.presence));
    for (const [p, o] of from) this.applied.set(p, o);
    this.history.progress.include(Topics.presence, from);
    return from;
  }

  apply(records: LogRecord[]): void {
    if (records.length === 0) return;
    const p = (this.partition = records[0].partition);
    if (this.historyBehind.has(p)) {
      this.applyMembers(records);
    } else {
      try {
        this.history.apply(records);
      } catch (err) {
        // Its store is behind: the member set goes on, its history follows on its own (applyHistory).
        if (!this.options.onHistoryBehind || !this.history.refusing) throw err;
        this.historyBehind.set(p, new Map());
        this.applyMembers(records);
        this.options.onHistoryBehind(new Map(this.history.applied()));
      }
    }
    const last = records[records.length - 1];
    if (last) {
      this.applied.set(last.partition, last.offset + 1);
      this.newest = Math.max(this.newest, last.timestamp);
    }
  }

  /** The member set alone (its history is behind): each record's event, in order. */
  private applyMembers(records: LogRecord[]): void {
    for (const record of records) this.evolve(decodeEvent(record.value));
  }

  /**
   * Presence history behind the member set, fed by a consumer of its own (onHistoryBehind): the
   * records the member set applied and history not yet, on history's view of the members. Throws,
   * applying nothing, while its store is still behind (the consumer delivers the batch again).
   * Once a partition's history reaches the member set, apply() feeds both again.
   */
  applyHistory(records: LogRecord[]): void {
    if (records.length === 0) return;
    const p = records[0].partition;
    if (!this.historyBehind.has(p)) return;
    const from = this.history.applied().get(p) ?? 0;
    const until = this.applied.get(p) ?? 0;
    const taken = records.filter((r) => r.offset >= from && r.offset < until);
    // A consumer replaced meanwhile may deliver past where history stands: its successor reads from there.
    if (taken.length > 0 && taken[0].offset === from) {
      this.partition = p;
      this.historyOnly = true;
      try {
        this.history.apply(taken);
      } finally {
        this.historyOnly = false;
      }
    }
    if ((this.history.applied().get(p) ?? 0) < until) return;
    this.historyBehind.delete(p);
    if (this.historyBehind.size === 0) this.options.onHistoryBehind?.(undefined);
  }

  /** Partitions whose presence history is behind the member set (GET /metrics; tests). */
  get historyBehindOn(): number[] {
    return [...this.historyBehind.keys()];
  }

  static readonly snapshotName = 'presence';
  /** The state's shape (PresenceSnapshot): a snapshot of another version is not used. */
  static readonly snapshotVersion = 1;

  /** The member set and the positions it reflects, for a snapshot (SnapshotSchedule). */
  snapshot(): { positions: SnapshotPositions; state: PresenceSnapshot } {
    const channels: PresenceSnapshot['channels'] = [];
    for (const [key, members] of this.members) channels.push([key, [...members.values()]]);
    return { positions: new Map([[Topics.presence, new Map(this.applied)]]), state: { channels, newest: this.newest } };
  }

  private restore(state: PresenceSnapshot): void {
    for (const [key, list] of state.channels) {
      const members = new Map<string, PresenceMember>();
      for (const m of list) members.set(memberKey(m), m);
      if (members.size === 0) continue;
      this.members.set(key, members);
      this.count(appIdOfKey(key), members.size);
    }
  }

  /**
   * Where partitions handed to a writer of presence history start (ConsumeOptions.shared). Its rows
   * depend on the member set (a leave's last data, a drop's members), so the writer needs the
   * members of the partitions' channels as they were where it starts. With `snapshots` (the
   * instance's own, of its reader's member set, which covers every partition): the members of the
   * handed partitions' channels from the newest snapshot at or before where their history resumes
   * (as start() picks one), and the partitions read from the snapshot's positions on, a bounded
   * read; without a usable one, from 0, the whole partition. Either way the rows the store holds
   * already are not written again (HistoryProjection.handOver).
   */
  async handOver(partitions: number[], snapshots?: { store: SnapshotStore; partitionCount: number }): Promise<Checkpoint> {
    const historyFrom = await this.history.handOver(partitions);
    // Whatever it held of them (it should hold nothing: revoke dropped it) is rebuilt.
    this.dropMembers(partitions);
    const whole: Checkpoint = new Map(partitions.map((p) => [p, 0]));
    if (!snapshots) return whole;
    // As at a start (start()): no newer than where its history resumes (the tail window, which
    // also tells repeats), or older than the window and no newer than the store's checkpoint.
    const stored = this.history.applied();
    const horizon = this.history.tail.horizon(this.options.clock.now());
    const snapshot = await snapshots.store.load<PresenceSnapshot>(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, (s) => {
      const at = s.positions.get(Topics.presence) ?? new Map<number, number>();
      const serves = (p: number): boolean => (at.get(p) ?? 0) <= (historyFrom.get(p) ?? 0) || (s.state.newest < horizon && (at.get(p) ?? 0) <= (stored.get(p) ?? 0));
      if (partitions.every(serves)) return undefined;
      return { reason: 'newer than where presence history resumes on a partition handed to the presence writer (its rows need the member set as it was there); an older snapshot serves', warn: false };
    });
    if (!snapshot) return whole;
    const handed = new Set(partitions);
    for (const [key, list] of snapshot.state.channels) {
      const partition = partitionFor(key, snapshots.partitionCount);
      if (!handed.has(partition) || list.length === 0) continue;
      this.members.set(key, new Map(list.map((m) => [memberKey(m), m])));
      this.count(appIdOfKey(key), list.length);
      let channels = this.channelsIn.get(partition);
      if (!channels) this.channelsIn.set(partition, (channels = new Set()));
      channels.add(key);
    }
    const at = snapshot.positions.get(Topics.presence);
    return new Map(partitions.map((p) => [p, at?.get(p) ?? 0]));
  }

  /** Partitions taken away from a writer: their rows held unwritten, and their channels' members, dropped. */
  revoke(partitions: number[]): void {
    this.history.revoke(partitions);
    this.dropMembers(partitions);
  }

  private dropMembers(partitions: number[]): void {
    for (const p of partitions) {
      this.historyBehind.delete(p);
      for (const key of this.channelsIn.get(p) ?? []) {
        const gone = this.members.get(key)?.size ?? 0;
        this.members.delete(key);
        this.count(appIdOfKey(key), -gone);
      }
      this.channelsIn.delete(p);
    }
  }

  /** Applies one event to the member set; returns what it adds to presence history. */
  private evolve(event: LogEvent): ChannelEntries | undefined {
    if (!this.canHandle(event)) return undefined;
    const key = channelKey(event.appId, event.channel);
    // History behind the member set: its view of the channel, taken from the member set before either changes it.
    const then = this.historyBehind.get(this.partition);
    if (then && !then.has(key)) {
      const now = this.members.get(key);
      then.set(key, now ? new Map(now) : null);
    }
    const live = !this.historyOnly;
    let members: Map<string, PresenceMember> | undefined;
    if (!live) {
      members = then!.get(key) ?? undefined;
      if (!members) then!.set(key, (members = new Map()));
    } else {
      members = this.members.get(key);
      if (!members) {
        this.members.set(key, (members = new Map()));
        let channels = this.channelsIn.get(this.partition);
        if (!channels) this.channelsIn.set(this.partition, (channels = new Set()));
        channels.add(key);
      }
    }
    const count = (delta: number): void => {
      if (live) this.count(event.appId, delta);
    };
    const e = event.event;
    const entry = (ev: PresenceEvent | PresenceMember, action: number, id = ev.id): StoredMessage => ({
      id,
      action,
      timestamp: e.timestamp,
      clientId: ev.clientId,
      connectionId: ev.connectionId,
      data: ev.data,
      encoding: ev.encoding,
      extras: ev.extras,
    });
    let messages: StoredMessage[];
    switch (e.action) {
      case 'enter':
      case 'update': {
        const member: PresenceMember = { id: e.id, clientId: e.clientId, connectionId: e.connectionId, timestamp: e.timestamp, data: e.data, encoding: e.encoding, extras: e.extras };
        if (e.instanceId !== undefined) member.instanceId = e.instanceId;
        const key = memberKey(member);
        const present = members.has(key);
        members.set(key, member);
        if (!present) {
          count(1);
          this.order.added(members, key);
          this.connectionOrder.added(members, key, member.connectionId);
        }
        // An enter of a member already present (same clientId and connection) is an update, as
        // the platform broadcasts it: subscribers see its new data, not a second arrival.
        messages = [entry(e, e.action === 'enter' && !present ? PresenceAction.enter : PresenceAction.update)];
        break;
      }
      case 'leave': {
        const existed = members.get(memberKey(e));
        // The leave of a member not present has no effect (REALTIME-PROTOCOL.md §5.2): no message
        // to subscribers, no row of presence history (its sender had its ACK).
        if (!existed) {
          messages = [];
          break;
        }
        count(-1);
        members.delete(memberKey(e));
        this.order.removed(members, memberKey(e));
        this.connectionOrder.removed(members, memberKey(e), e.connectionId);
        // A leave carries the member's last data when it sends none of its own.
        messages = [entry(e.data === undefined ? { ...existed, id: e.id } : e, PresenceAction.leave)];
        break;
      }
      case 'drop': {
        // An abrupt disconnect not resumed within the resume window: each of its members leaves.
        const gone = [...members.values()].filter((m) => m.connectionId === e.connectionId);
        for (const m of gone) {
          members.delete(memberKey(m));
          this.order.removed(members, memberKey(m));
          this.connectionOrder.removed(members, memberKey(m), m.connectionId);
        }
        count(-gone.length);
        messages = gone.map((m, i) => entry(m, PresenceAction.leave, `${e.id}:${i}`));
        break;
      }
      case 'held': {
        // A resume on another instance (or after a restart): that one holds the members now, so a
        // cleanup after the instance that held them before leaves them alone. Nobody is told.
        if (e.instanceId !== undefined) for (const m of members.values()) if (m.connectionId === e.connectionId) m.instanceId = e.instanceId;
        messages = [];
        break;
      }
      default:
        return undefined;
    }
    if (!live) return { appId: event.appId, channel: event.channel, messages };
    if (members.size === 0) {
      this.members.delete(key);
      this.channelsIn.get(this.partition)?.delete(key);
    }
    for (const subscriber of messages.length > 0 ? this.appliedSubscribers : []) {
      try {
        subscriber(event.appId, event.channel, messages);
      } catch (err) {
        this.options.onSubscriberError?.(err, event.appId, event.channel);
      }
    }
    return { appId: event.appId, channel: event.channel, messages };
  }

  /** Members present in all channels: of every app, or of one. */
  memberCount(appId?: string): number {
    return appId === undefined ? this.total : (this.perApp.get(appId) ?? 0);
  }

  private count(appId: string, delta: number): void {
    if (delta === 0) return;
    this.total += delta;
    const n = (this.perApp.get(appId) ?? 0) + delta;
    if (n === 0) this.perApp.delete(appId);
    else this.perApp.set(appId, n);
  }

  /** Current members, ordered by member key, with the spec's optional filters. */
  query(q: MembersQuery): { members: PresenceMember[]; next?: string } {
    const all = this.members.get(channelKey(q.appId, q.channel));
    if (!all) return { members: [] };
    if (q.clientId !== undefined && q.connectionId !== undefined) {
      // One member at most: looked up by its key (the gateway asks this for every re-entered member).
      const key = memberKey({ clientId: q.clientId, connectionId: q.connectionId });
      const member = all.get(key);
      return { members: member && member.clientId === q.clientId && q.limit > 0 && (q.after === undefined || key > q.after) ? [member] : [] };
    }
    // In member key order, kept beside the set (sorted-member-keys.ts): a page costs a search and its members.
    const keys = q.connectionId !== undefined && q.clientId === undefined ? this.connectionOrder.of(all, q.connectionId) : this.order.of(all);
    const matches = (m: PresenceMember): boolean => (q.clientId === undefined || m.clientId === q.clientId) && (q.connectionId === undefined || m.connectionId === q.connectionId);
    // A clientId's members are the run of keys that start with it (clientId, then connectionId):
    // a filtered page reads that run, not the whole set.
    const run = q.clientId === undefined ? undefined : memberKey({ clientId: q.clientId, connectionId: '' });
    const inRun = (k: string): boolean => run === undefined || k.startsWith(run);
    let from = q.after === undefined ? 0 : upperBound(keys, q.after);
    if (run !== undefined) from = Math.max(from, lowerBound(keys, run));
    const { page, more } = memberPage(all, keys, from, q.limit, matches, inRun);
    return { members: page, next: more && page.length > 0 ? memberKey(page[page.length - 1]) : undefined };
  }

  /**
   * The members present on a channel, not copied: read as they stand when read (a realtime SYNC
   * paced by its socket reads it page by page: those that enter meanwhile are read too, those that
   * leave are not). Undefined when none is.
   */
  presentSet(appId: string, channel: string): ReadonlyMap<string, PresenceMember> | undefined {
    return this.members.get(channelKey(appId, channel));
  }

  /**
   * The connections with members present whose instance matches `held` (the gateway's, to remove
   * members a dead instance left behind), one entry per channel and connection.
   */
  connectionsHeldBy(held: (instanceId: string) => boolean): { appId: string; channel: string; connectionId: string; instanceId: string }[] {
    const found = new Map<string, { appId: string; channel: string; connectionId: string; instanceId: string }>();
    for (const [key, members] of this.members) {
      // The first colon ends the appId (appIds have none: channelKey).
      const sep = key.indexOf(':');
      for (const m of members.values()) {
        if (m.instanceId === undefined || !held(m.instanceId)) continue;
        found.set(`${key}\u0000${m.connectionId}`, { appId: key.slice(0, sep), channel: key.slice(sep + 1), connectionId: m.connectionId, instanceId: m.instanceId });
      }
    }
    return [...found.values()];
  }

  /**
   * The channels of an app where a connection has members present (a resume on another instance
   * takes them over: the gateway's). A scan of every member set, bounded by the service's limit on
   * members (REALTIME_MAX_PRESENCE_MEMBERS); resumes from elsewhere are rare next to everything else.
   */
  channelsOfConnection(appId: string, connectionId: string): string[] {
    const prefix = channelKey(appId, '');
    const found: string[] = [];
    for (const [key, members] of this.members) {
      if (!key.startsWith(prefix)) continue;
      for (const m of members.values()) {
        if (m.connectionId !== connectionId) continue;
        found.push(key.slice(prefix.length));
        break;
      }
    }
    return found;
  }

  /**
   * Every connection with members present on an app's channels, once per channel (an app deleted:
   * its members leave). A scan of every member set, as channelsOfConnection; deleting an app is rare.
   */
  connectionsOfApp(appId: string): { channel: string; connectionId: string }[] {
    const prefix = channelKey(appId, '');
    const found: { channel: string; connectionId: string }[] = [];
    for (const [key, members] of this.members) {
      if (!key.startsWith(prefix)) continue;
      const channel = key.slice(prefix.length);
      for (const connectionId of new Set([...members.values()].map((m) => m.connectionId))) found.push({ channel, connectionId });
    }
    return found;
  }

  historyQuery(q: HistoryQuery): Promise<HistoryEntry[]> {
    return this.history.query(q);
  }

  close(): Promise<void> {
    return this.history.close();
  }
}
