import type { MessageData } from './message.js';

/**
 * One change to a channel's presence set, as appended to the `presence` topic by whoever observes
 * it: the realtime gateway (its connections' enters, updates and leaves, and the drops of those
 * gone), the sandbox fixtures and tests. `drop` is an abrupt disconnect that was not resumed:
 * every member of that connection on the channel leaves. `held` says that another instance (or
 * this one after a restart) holds the connection now, resumed there: its members on the channel
 * stay, held by `instanceId`, and no one is told (nothing changed for the channel's subscribers).
 */
export interface PresenceEvent {
  action: 'enter' | 'update' | 'leave' | 'drop' | 'held';
  id: string;
  timestamp: number;
  clientId?: string;
  connectionId: string;
  /** The instance whose realtime gateway holds the connection (absent for fixtures). */
  instanceId?: string;
  data?: MessageData;
  encoding?: string;
  extras?: Record<string, unknown>;
}
