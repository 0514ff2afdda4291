import { decode, encode } from '@msgpack/msgpack';
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

export type LogEvent = MessagesPublished | PresenceChanged | AppCreated | AppDeleted;

export const encodeEvent = (event: LogEvent): Uint8Array => encode(event, { ignoreUndefined: true });

export const decodeEvent = (value: Uint8Array): LogEvent => decode(value) as LogEvent;

/** Log key that keeps one channel's events in one partition, in order. */
export const channelKey = (appId: string, channel: string): string => `${appId}:${channel}`;
