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
  /** by connectionId */
  attachments: Map<string, LoggedAttachment>;
  /** memberKey -> connectionId */
  members: Map<string, string>;
  /** The last change of occupancy not yet announced: its position and record time. */
  occupancyCause?: string;
  occupancyChangedAt: number;
  occupancyAnnouncedAt: number;
  /** The bucket of `due` it is in, if any: one at a time, however often it is used. */
  dueBucket?: number;
}

/** A lifecycle message to append to LIFECYCLE_CHANNEL of an app. */
export interface Announcement {
  appId: string;
  message: StoredMessage;
}

/** The projection's key of a channel (its own; the log's is channelKey, src/log/partitioner.ts). */
export const stateKey = (appId: string, channel: string): string => `${appId}\u0000${channel}`;

export const emptyMetrics = (): OccupancyMetrics => ({ connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceMembers: 0, presenceSubscribers: 0 });

export function metricsOf(s: ChannelState): OccupancyMetrics {
  const m = emptyMetrics();
  for (const a of s.attachments.values()) {
    m.connections++;
    if (a.modes & Mode.PUBLISH) m.publishers++;
    if (a.modes & Mode.SUBSCRIBE) m.subscribers++;
    if (a.modes & Mode.PRESENCE) m.presenceConnections++;
    if (a.modes & Mode.PRESENCE_SUBSCRIBE) m.presenceSubscribers++;
  }
  m.presenceMembers = s.members.size;
  return m;
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
