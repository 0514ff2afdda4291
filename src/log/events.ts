import { packValue, unpackValue } from '../codec/msgpack.js';
import type { StoredMessage } from '../messages/message.js';
import type { PresenceEvent } from '../presence/presence-event.js';
import type { AppDefinition } from '../apps/app.js';

// Events are MessagePack on the log: compact, and binary message data survives unchanged.

/** One publish request to one channel: its messages are appended atomically, in order. */
export interface MessagesPublished {
  type: 'messages.published';
  appId: string;
  channel: string;
  transport: 'rest' | 'realtime';
  messages: StoredMessage[];
  /** Some ids were supplied by the client: only then can a message repeat an earlier one. */
  clientIds?: boolean;
}

export interface PresenceChanged {
  type: 'presence.changed';
  appId: string;
  channel: string;
  event: PresenceEvent;
}

export interface AppCreated {
  type: 'app.created';
  app: AppDefinition;
}

export interface AppDeleted {
  type: 'app.deleted';
  appId: string;
}

/**
 * Usage an instance counted during one 6-second interval (API and token requests, messages read
 * from history), appended every 6 seconds so that everything counted flows through the log.
 * Counters use the base keys of projections/stats/stats-sample.ts.
 */
export interface UsageReported {
  type: 'usage.reported';
  appId: string;
  intervalStart: number;
  instanceId: string;
  counters: Record<string, number>;
}

/** Sandbox stats fixtures (POST /stats), merged into an app's stats like any other usage. */
export interface StatsFixture {
  type: 'stats.fixture';
  appId: string;
  intervalStart: number;
  counters: Record<string, number>;
  channels?: number;
}

export type LogEvent = MessagesPublished | PresenceChanged | AppCreated | AppDeleted | UsageReported | StatsFixture;

/**
 * The event a value holds, kept on the value itself: a value is decoded at most once however many
 * projections consume it, and a value this process encoded is never decoded at all (its event is
 * the one it was encoded from, which decodes to an equal object). Events are therefore shared:
 * projections must treat them as read-only.
 */
const EVENT = Symbol('decoded event');
type EventBytes = Uint8Array & { [EVENT]?: LogEvent };

export const encodeEvent = (event: LogEvent): Uint8Array => {
  const bytes: EventBytes = packValue(event);
  bytes[EVENT] = event;
  return bytes;
};

export const decodeEvent = (value: Uint8Array): LogEvent => {
  const bytes = value as EventBytes;
  return (bytes[EVENT] ??= unpackValue(value) as LogEvent);
};

/** Log key that keeps one channel's events in one partition, in order. */
export const channelKey = (appId: string, channel: string): string => `${appId}:${channel}`;
