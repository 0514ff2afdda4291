import { Topics, type Checkpoint, type LogRecord, type Topic } from '../../src/log/port.js';
import type { SnapshotPositions, SnapshotStore } from '../snapshots.js';
import { decodeChannels, encodeChannels, type ChannelsSnapshot } from './channels-snapshot.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { isMetachannel, LIFECYCLE_CHANNEL } from '../../src/domain/channel.js';
import { ChannelIndex } from './channel-index.js';
import { cursorOf, longNameHash, nameOfCursor } from './channel-cursor.js';
import { StatusActivations } from './status-activations.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';
import { AppliedPositions } from '../../src/log/applied-positions.js';
import { activeAt, deleteAttachment, emptyMetrics, metricsOf, setAttachment, stateKey, type Announcement, type ChannelDetails, type ChannelState, type LoggedAttachment, type OccupancyMetrics } from './channel-state.js';
import { LifecycleEvents } from './lifecycle-events.js';
import { OccupancyChanges } from './occupancy-changes.js';

export interface ChannelsOptions {
  /** A channel stays active this long after its last use (CHANNEL_IDLE_MS). */
  idleMs: number;
  /**
   * Events are announced only when what caused them is younger than this (the idempotent-publish
   * window, HISTORY_TAIL_MS): a replay announces again only what the window can recognise as a repeat.
   */
  windowMs: number;
  /** At most one `channel.occupancy` per channel this often (CHANNEL_OCCUPANCY_THROTTLE_MS). */
  occupancyThrottleMs: number;
  /** The region named in regional events. */
  region: string;
  /** Channels status requests keep active on this instance, all apps (CHANNEL_STATUS_ACTIVATIONS). */
  maxStatusActivations?: number;
}

const memberKey = (clientId: string | undefined, connectionId: string): string => `${clientId ?? ''}\u0000${connectionId}`;
const positionOf = (r: LogRecord): string => `${r.topic}:${r.partition}:${r.offset}`;
/**
 * Channel activity, occupancy and lifecycle (ARCHITECTURE: lifecycle), a projection of the
 * `messages`, `presence` and `connections` topics. The rule (README: Channel activity): a channel
 * is active while it has attached realtime connections or present members, and for `idleMs` after
 * its last use (a message published, a presence change, an attach or detach), all judged by
 * record times, so a restart and a rebuild from the log agree. A `GET /channels/<id>` activates
 * the channel too, on the instance that answered it and in memory only (status-activations.ts):
 * a read writes nothing, so it has no lifecycle events. `channel.activated` records, which
 * status requests appended before, are still read as uses.
 *
 * Lifecycle events are messages on `[meta]channel.lifecycle` whose ids derive from the record
 * that caused them: a period of activity is named by the record that began it, and its
 * `channel.opened`, `channel.region.active`, `channel.region.inactive` and `channel.closed` carry
 * that name; a `channel.occupancy` the record of the change it reports. What has been announced
 * is itself read back from the log (the metachannel's messages), so after a crash the projection
 * announces what is missing and nothing twice: a repeat has the id of a message the
 * idempotent-publish window still holds. Which are due is lifecycle-events.ts's to say.
 */
export class ChannelsProjection {
  static readonly handles = ['messages.published', 'presence.changed', 'channel.attached', 'channel.detached', 'channel.activated', 'connection.closed', 'instance.started', 'instance.gone'] as const;
  private readonly channels = new Map<string, ChannelState>();
  /** How many of `channels` each app has (the admission of new channels counts them: src/channels/channel-admission.ts). */
  private readonly heldByApp = new Map<string, number>();
  private readonly index = new Map<string, ChannelIndex>();
  /** What has been announced, and which channels to look at next. */
  private readonly lifecycle: LifecycleEvents;
  /** The channels each connection is attached to (a connection's end visits only those). */
  private readonly byConnection = new Map<string, Set<string>>();
  /** Channels status requests activated here: not of the log (see above). */
  private readonly requested: StatusActivations;
  /** Channels whose occupancy each batch changed, for in-band occupancy (occupancy-changes.ts). */
  readonly occupancyChanges = new OccupancyChanges();
  /** What the projection has applied of each topic (reads wait on it: src/log/own-writes.ts). */
  readonly progress = new AppliedPositions();
  /** What the state includes, per topic and partition (restored with a snapshot, unlike progress). */
  private readonly applied = new Map<string, Checkpoint>();

  constructor(private readonly options: ChannelsOptions) {
    this.requested = new StatusActivations(options.idleMs, options.maxStatusActivations ?? DEFAULT_LIMITS.maxStatusActivations);
    this.lifecycle = new LifecycleEvents(options, this.channels, (s, now) => this.release(s, now));
  }

  canHandle(event: LogEvent): boolean {
    return (ChannelsProjection.handles as readonly string[]).includes(event.type);
  }

  /** The log deleted records before `next` that this projection had yet to apply (ConsumeOptions.lost): they count as applied. */
  lost(topic: string, partition: number, next: number): void {
    let applied = this.applied.get(topic);
    if (!applied) this.applied.set(topic, (applied = new Map()));
    if ((applied.get(partition) ?? 0) < next) applied.set(partition, next);
    this.progress.lost(topic, partition, next);
  }

  apply(records: LogRecord[]): void {
    for (const r of records) {
      const event = decodeEvent(r.value);
      if (this.canHandle(event)) this.evolve(event, r);
    }
    this.progress.advance(records);
    this.occupancyChanges.flush();
    const last = records[records.length - 1];
    if (last) {
      let applied = this.applied.get(last.topic);
      if (!applied) this.applied.set(last.topic, (applied = new Map()));
      applied.set(last.partition, last.offset + 1);
    }
  }

  // ---- snapshots (projections/snapshots.ts)

  static readonly snapshotName = 'channels';
  /** The state's shape (ChannelsSnapshot): a snapshot of another version is not used. */
  static readonly snapshotVersion = 1;

  /**
   * Where each topic's consumer starts: after the restored snapshot, or else messages from
   * `messagesFrom` (the tail window, where history starts) and presence and connections from 0.
   * Messages resume from the later of the two: what lies before the window a full replay does
   * not read either.
   */
  async start(snapshots: SnapshotStore | undefined, messagesFrom: Checkpoint): Promise<Map<Topic, Checkpoint>> {
    const snapshot = await snapshots?.load<ChannelsSnapshot>(ChannelsProjection.snapshotName, ChannelsProjection.snapshotVersion);
    if (!snapshot) return new Map([[Topics.messages, new Map(messagesFrom)], [Topics.presence, new Map()], [Topics.connections, new Map()]]);
    this.restore(snapshot.state);
    const from = new Map<Topic, Checkpoint>();
    for (const topic of [Topics.messages, Topics.presence, Topics.connections]) {
      const at = new Map(snapshot.positions.get(topic));
      this.applied.set(topic, new Map(at));
      this.progress.include(topic, at);
      if (topic === Topics.messages) for (const [p, o] of messagesFrom) at.set(p, Math.max(o, at.get(p) ?? 0));
      from.set(topic, at);
    }
    return from;
  }

  /**
   * The state the log made, and the positions it reflects. Not in it: status requests' activations
   * (in memory only, as across a restart without snapshots) and what announce() is due to look at,
   * which a restore recomputes by looking at every channel once.
   */
  snapshot(): { positions: SnapshotPositions; state: ChannelsSnapshot } {
    const positions: SnapshotPositions = new Map();
    for (const topic of [Topics.messages, Topics.presence, Topics.connections]) positions.set(topic, new Map(this.applied.get(topic)));
    return { positions, state: encodeChannels(this.channels.values(), this.lifecycle.announcedOpen()) };
  }

  private restore(state: ChannelsSnapshot): void {
    for (const s of decodeChannels(state)) {
      const key = stateKey(s.appId, s.channel);
      if (!this.channels.has(key)) this.heldByApp.set(s.appId, (this.heldByApp.get(s.appId) ?? 0) + 1);
      this.channels.set(key, s);
      this.indexOf(s.appId).add(s.channel);
      for (const connectionId of s.attachments.keys()) {
        let held = this.byConnection.get(connectionId);
        if (!held) this.byConnection.set(connectionId, (held = new Set()));
        held.add(key);
      }
      this.lifecycle.touch(key);
    }
    this.lifecycle.restore(state.announced);
  }

  evolve(event: LogEvent, record: LogRecord): void {
    switch (event.type) {
      case 'messages.published':
        if (event.channel === LIFECYCLE_CHANNEL) return this.lifecycle.readBack(event.appId, event.messages);
        if (!isMetachannel(event.channel)) this.use(event.appId, event.channel, record);
        return;
      case 'channel.activated':
        if (!isMetachannel(event.channel)) this.use(event.appId, event.channel, record);
        return;
      case 'presence.changed': {
        if (isMetachannel(event.channel)) return;
        const s = this.use(event.appId, event.channel, record);
        const e = event.event;
        const before = s.members.size;
        if (e.action === 'enter' || e.action === 'update') s.members.set(memberKey(e.clientId, e.connectionId), e.connectionId);
        else if (e.action === 'leave') s.members.delete(memberKey(e.clientId, e.connectionId));
        else if (e.action === 'drop') for (const [k, c] of s.members) if (c === e.connectionId) s.members.delete(k);
        if (s.members.size !== before) this.occupancyChanged(s, record);
        return;
      }
      case 'channel.attached': {
        if (isMetachannel(event.channel)) return;
        const s = this.use(event.appId, event.channel, record);
        setAttachment(s, event.connectionId, { instanceId: event.instanceId, modes: event.modes });
        let held = this.byConnection.get(event.connectionId);
        if (!held) this.byConnection.set(event.connectionId, (held = new Set()));
        held.add(stateKey(event.appId, event.channel));
        this.occupancyChanged(s, record);
        return;
      }
      case 'channel.detached': {
        if (isMetachannel(event.channel)) return;
        const s = this.use(event.appId, event.channel, record);
        if (deleteAttachment(s, event.connectionId)) this.occupancyChanged(s, record);
        this.forgetAttachment(event.connectionId, stateKey(event.appId, event.channel));
        return;
      }
      case 'connection.closed': {
        const keys = this.byConnection.get(event.connectionId);
        if (!keys) return;
        const states = [...keys].map((k) => this.channels.get(k)).filter((c): c is ChannelState => c !== undefined);
        return this.endAttachments(record, (connectionId) => connectionId === event.connectionId, states);
      }
      case 'instance.started':
        // The embedded mode's start (one instance, a new pid each run) ends every earlier attachment.
        return this.endAttachments(record, (_c, a) => event.endsAll === true || a.instanceId === event.instanceId);
      case 'instance.gone':
        return this.endAttachments(record, (_c, a) => a.instanceId === event.instanceId);
      default:
        return;
    }
  }

  private forgetAttachment(connectionId: string, key: string): void {
    const held = this.byConnection.get(connectionId);
    held?.delete(key);
    if (held?.size === 0) this.byConnection.delete(connectionId);
  }

  /** Ends the attachments `ends` picks, on `among` (default: every channel: a restart, a dead instance). */
  private endAttachments(record: LogRecord, ends: (connectionId: string, a: LoggedAttachment) => boolean, among: Iterable<ChannelState> = [...this.channels.values()]): void {
    for (const s of among) {
      let changed = false;
      for (const [c, a] of s.attachments) {
        if (!ends(c, a)) continue;
        // A use while the channel is still held, as a detach is: the period its attachments held
        // open goes on, where a use after the delete began another once the idle time had passed.
        if (!changed) this.use(s.appId, s.channel, record);
        changed = true;
        deleteAttachment(s, c);
        this.forgetAttachment(c, stateKey(s.appId, s.channel));
      }
      if (changed) this.occupancyChanged(s, record);
    }
  }

  /** A use of the channel at the record's time: it begins a period of activity if it had none. */
  private use(appId: string, channel: string, record: LogRecord): ChannelState {
    const key = stateKey(appId, channel);
    this.lifecycle.touch(key);
    let s = this.channels.get(key);
    if (!s) {
      s = { appId, channel, lastUse: record.timestamp, period: positionOf(record), openedAt: record.timestamp, attachments: new Map(), tally: { connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceSubscribers: 0 }, members: new Map(), occupancyChangedAt: 0, occupancyAnnouncedAt: 0 };
      this.channels.set(key, s);
      this.heldByApp.set(appId, (this.heldByApp.get(appId) ?? 0) + 1);
      this.indexOf(appId).add(channel);
      this.onHeld?.(appId, channel);
      return s;
    }
    if (!activeAt(s, record.timestamp, this.options.idleMs)) {
      s.period = positionOf(record);
      s.openedAt = record.timestamp;
    }
    s.lastUse = Math.max(s.lastUse, record.timestamp);
    return s;
  }

  private occupancyChanged(s: ChannelState, record: LogRecord): void {
    s.occupancyCause = positionOf(record);
    s.occupancyChangedAt = record.timestamp;
    this.occupancyChanges.changed(s);
  }

  private indexOf(appId: string): ChannelIndex {
    let index = this.index.get(appId);
    if (!index) this.index.set(appId, (index = new ChannelIndex(longNameHash)));
    return index;
  }

  /**
   * spec: Channel status: the request activates the channel, for the idle time, here only and
   * without writing anything (a read must not grow the disk).
   */
  activate(appId: string, channel: string, now: number): void {
    if (isMetachannel(channel)) return;
    this.indexOf(appId).add(channel);
    for (const [a, c] of this.requested.add(appId, channel, now)) this.unindexIfUnused(a, c, now);
  }

  /** Takes a channel out of its app's names once neither the log nor a status request keeps it. */
  private unindexIfUnused(appId: string, channel: string, now: number): void {
    if (!this.channels.has(stateKey(appId, channel)) && !this.requested.isActive(appId, channel, now)) this.index.get(appId)?.remove(channel);
  }

  // ---- queries

  isActive(appId: string, channel: string, now: number): boolean {
    const s = this.channels.get(stateKey(appId, channel));
    return (s !== undefined && activeAt(s, now, this.options.idleMs)) || this.requested.isActive(appId, channel, now);
  }

  metrics(appId: string, channel: string): OccupancyMetrics {
    const s = this.channels.get(stateKey(appId, channel));
    return s ? metricsOf(s) : emptyMetrics();
  }

  /** spec: ChannelDetails, as GET /channels/<id> and GET /channels?by=value answer it. */
  details(appId: string, channel: string, now: number): ChannelDetails {
    return { channelId: channel, status: { isActive: this.isActive(appId, channel, now), occupancy: { metrics: this.metrics(appId, channel) } } };
  }

  /**
   * Active channels of an app in name order, after `after` (exclusive), starting with `prefix`:
   * following the last name returned visits every channel active throughout exactly once.
   */
  list(appId: string, q: { prefix: string; after?: string; limit: number }, now: number): { channels: string[]; more: boolean } {
    const index = this.index.get(appId);
    if (!index) return { channels: [], more: false };
    const after = q.after === undefined ? undefined : nameOfCursor(index, q.after);
    const found: string[] = [];
    let more = false;
    index.scan(q.prefix, after, (channel) => {
      if (!this.isActive(appId, channel, now)) return true;
      if (found.length === q.limit) {
        more = true;
        return false;
      }
      found.push(channel);
      return true;
    });
    return { channels: found, more };
  }

  /** The cursor that continues after `channel` (channel-cursor.ts). */
  static cursorOf(channel: string): string {
    return cursorOf(channel);
  }

  /**
   * Whether the log keeps the channel in use: active, or idle and not yet swept (a status
   * request's activation is not counted: it is bounded on its own, CHANNEL_STATUS_ACTIVATIONS).
   */
  holds(appId: string, channel: string): boolean {
    return this.channels.has(stateKey(appId, channel));
  }

  /** Told of each channel the log begins to keep in use (the admission of new channels counts it from then on). */
  onHeld: ((appId: string, channel: string) => void) | undefined;

  /** How many channels holds() answers true for: of one app, or of every app. */
  heldCount(appId?: string): number {
    return appId === undefined ? this.channels.size : (this.heldByApp.get(appId) ?? 0);
  }

  /** How many channels the projection holds (active, or idle and not yet swept), and status requests keep active. */
  get size(): number {
    return this.channels.size + this.requested.size;
  }

  // ---- lifecycle

  /**
   * The lifecycle messages now due, in order per channel, and channels no longer active swept
   * away. Call it only once every topic has caught up: before that the projection does not know
   * the whole of a channel's state. What it returns counts as announced; `failed` puts it back.
   */
  announce(now: number): Announcement[] {
    for (const [appId, channel] of this.requested.expire(now)) this.unindexIfUnused(appId, channel, now);
    return this.lifecycle.announce(now);
  }

  /** Announcements that could not be appended: due again at the next call. */
  failed(announcements: Announcement[], now: number): void {
    this.lifecycle.failed(announcements, now);
  }

  /** Lets go of a channel no longer active (announce() found it so, and announced its end). */
  private release(s: ChannelState, now: number): void {
    this.channels.delete(stateKey(s.appId, s.channel));
    const held = (this.heldByApp.get(s.appId) ?? 1) - 1;
    if (held > 0) this.heldByApp.set(s.appId, held);
    else this.heldByApp.delete(s.appId);
    this.unindexIfUnused(s.appId, s.channel, now);
  }
}
