// The state the channels projection keeps of one channel, and the shapes it answers with
// (spec: ChannelDetails, Occupancy): beside the projection so that its snapshot
// (channels-snapshot.ts) and its readers need not import the projection.
import type { StoredMessage } from '../../src/domain/message.js';
import { Mode } from '../../src/domain/modes.js';

/** spec: Occupancy. */
export interface OccupancyMetrics {
  connections: number;
  publishers: number;
  subscribers: number;
  presenceConnections: number;
  presenceMembers: number;
  presenceSubscribers: number;
}

/** spec: ChannelDetails (the lifecycle events add `name` and `region`, as the platform's do). */
export interface ChannelDetails {
  channelId: string;
  name?: string;
  region?: string;
  status: { isActive: boolean; occupancy: { metrics: OccupancyMetrics } };
}

/** An attachment as the log records it (channel.attached): where it is held, with what modes. */
export interface LoggedAttachment {
  instanceId: string;
  modes: number;
}

/** One channel in use, or in use not long ago. */
export interface ChannelState {
  appId: string;
  channel: string;
  /** The record time of its last use, and that record's position. */
  lastUse: number;
  /** The position of the record that began the current period of activity: names the period. */
  period: string;
  openedAt: number;
  /** by connectionId: change it through setAttachment and deleteAttachment, which keep `tally` */
  attachments: Map<string, LoggedAttachment>;
  /** The attachments counted by mode, kept as they change (made at the first read): metricsOf costs no walk of them. */
  tally?: Tally;
  /** memberKey -> connectionId */
  members: Map<string, string>;
  /** The last change of occupancy not yet announced: its position and record time. */
  occupancyCause?: string;
  occupancyChangedAt: number;
  occupancyAnnouncedAt: number;
  /** The bucket of `due` it is in, if any: one at a time, however often it is used. */
  dueBucket?: number;
}

/** Held by attachments or present members: active whatever its last use. */
export const occupied = (s: ChannelState): boolean => s.attachments.size > 0 || s.members.size > 0;

/** The activity rule (README: Channel activity): occupied, or used less than `idleMs` before `at`. */
export const activeAt = (s: ChannelState, at: number, idleMs: number): boolean => occupied(s) || at - s.lastUse < idleMs;

/** A lifecycle message to append to LIFECYCLE_CHANNEL of an app. */
export interface Announcement {
  appId: string;
  message: StoredMessage;
}

/** The projection's key of a channel (its own; the log's is channelKey, src/log/partitioner.ts). */
export const stateKey = (appId: string, channel: string): string => `${appId}\u0000${channel}`;

export const emptyMetrics = (): OccupancyMetrics => ({ connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceMembers: 0, presenceSubscribers: 0 });

/** The attachments' part of the occupancy. */
type Tally = Omit<OccupancyMetrics, 'presenceMembers'>;

function count(t: Tally, modes: number, by: 1 | -1): void {
  t.connections += by;
  if (modes & Mode.PUBLISH) t.publishers += by;
  if (modes & Mode.SUBSCRIBE) t.subscribers += by;
  if (modes & Mode.PRESENCE) t.presenceConnections += by;
  if (modes & Mode.PRESENCE_SUBSCRIBE) t.presenceSubscribers += by;
}

export function setAttachment(s: ChannelState, connectionId: string, a: LoggedAttachment): void {
  const before = s.attachments.get(connectionId);
  s.attachments.set(connectionId, a);
  if (!s.tally) return;
  if (before) count(s.tally, before.modes, -1);
  count(s.tally, a.modes, 1);
}

/** Whether the connection was attached. */
export function deleteAttachment(s: ChannelState, connectionId: string): boolean {
  const before = s.attachments.get(connectionId);
  if (!before) return false;
  s.attachments.delete(connectionId);
  if (s.tally) count(s.tally, before.modes, -1);
  return true;
}

/**
 * spec: Occupancy. From the tally, not a walk of the attachments: a channel with 20,000 of them
 * made each read (a GET /channels?by=value page of 200 such channels: 215 ms of the event loop, and
 * as much again for the lifecycle and in-band occupancy reads) cost them all.
 */
export function metricsOf(s: ChannelState): OccupancyMetrics {
  if (!s.tally) {
    const t: Tally = { connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceSubscribers: 0 };
    for (const a of s.attachments.values()) count(t, a.modes, 1);
    s.tally = t;
  }
  const { connections, publishers, subscribers, presenceConnections, presenceSubscribers } = s.tally;
  return { connections, publishers, subscribers, presenceConnections, presenceMembers: s.members.size, presenceSubscribers };
}

export function channelIdOf(m: StoredMessage): string | undefined {
  if (typeof m.data !== 'string') return undefined;
  try {
    const details = JSON.parse(m.data) as { channelId?: unknown };
    return typeof details.channelId === 'string' ? details.channelId : undefined;
  } catch {
    return undefined;
  }
}
