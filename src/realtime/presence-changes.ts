import { ServiceError } from '../errors.js';
import type { Limits } from '../limits.js';
import { presenceFields } from '../presence/presence-body.js';
import type { PresenceChange } from '../presence/presence-producer.js';
import type { RealtimeSettings } from './settings.js';
import type { Credentials } from '../auth/credentials.js';
import type { ProtocolMessage } from './protocol.js';

const PRESENCE_ACTIONS: Record<number, PresenceChange['action'] | undefined> = { 2: 'enter', 3: 'leave', 4: 'update' };

/** Who sends a PRESENCE: the connection, and whose members it may change. */
export interface PresenceSender {
  connectionId: string;
  instanceId: string;
  msgSerial: number;
  clientId: string | undefined;
  method: Credentials['method'];
}

/**
 * Whose presence an item changes: the connection's identity (`own`), or the one it names if the
 * connection may act for anyone (a key, or a token for clientId `*`; an anonymous token may not).
 */
export function presenceClientIdOf(given: unknown, index: number, own: string | undefined, method: Credentials['method']): string {
  const anyone = own === '*' || (own === undefined && method === 'basic');
  if (given !== undefined && given !== null) {
    if (typeof given !== 'string' || given.length === 0 || given === '*') {
      throw new ServiceError('invalidClientId', `presence message ${index}: clientId must be a non-empty string other than "*"`);
    }
    if (!anyone && given !== own) {
      throw new ServiceError('invalidClientId', `presence message ${index}: clientId "${given}" is not this connection's, whose clientId ${own === undefined ? 'has no clientId' : `is "${own}"`}`);
    }
    return given;
  }
  if (own === undefined || own === '*') {
    throw new ServiceError('presenceWithoutClientId', 'cannot enter presence without a clientId: connect with one, or use enterClient');
  }
  return own;
}

/**
 * A PRESENCE's items, checked (the frame's own limits, then each item). At most as many as a
 * connection may hold members (maxMembersPerConnection), not a publish's MAX_MESSAGES_PER_PUBLISH:
 * the SDK sends every change queued while its channel attaches in one frame, however many (ably-js
 * RealtimePresence.onAttached), and the frame's bytes and width bound the rest.
 */
export function presenceItemsOf(pm: ProtocolMessage, maxItems: number): unknown[] {
  if (!Array.isArray(pm.presence) || pm.presence.length === 0) throw new ServiceError('invalidRequestBody', 'a PRESENCE needs a non-empty presence array');
  if (pm.presence.length > maxItems) throw new ServiceError('tooManyMessages', `a PRESENCE may hold at most ${maxItems} changes (REALTIME_MAX_MEMBERS_PER_CONNECTION)`);
  return pm.presence;
}

/** One item of a PRESENCE frame, checked, as the change it asks for. */
export function presenceChangeOf(value: unknown, index: number, sender: PresenceSender, limits: Limits): PresenceChange & { id: string; clientId: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ServiceError('invalidRequestBody', `presence message ${index} is not an object`);
  const item = value as Record<string, unknown>;
  // Only a number indexes the table: an object as a key throws when made a string, and
  // "__proto__" or "constructor" found Object.prototype's own members.
  const action = typeof item.action === 'number' ? PRESENCE_ACTIONS[item.action] : undefined;
  if (!action) throw new ServiceError('invalidRequestBody', `presence message ${index}: action must be 2 (enter), 3 (leave) or 4 (update)`);
  // The fields by the rules of a message's (src/presence/presence-body.ts); whose member it is, by the sender's.
  const where = `presence message ${index}`;
  const { id = `${sender.connectionId}:${sender.msgSerial}:${index}`, clientId, ...fields } = presenceFields(item, limits, where, (given) =>
    presenceClientIdOf(given, index, sender.clientId, sender.method),
  );
  const change: PresenceChange & { id: string; clientId: string } = { action, id, clientId, connectionId: sender.connectionId, instanceId: sender.instanceId, ...fields };
  return change;
}

/**
 * The members one connection entered, by channel, and how many in all: bounded by
 * maxMembersPerConnection (91003) and the channels they are on by maxChannelsPerConnection
 * (90010), since each costs memory in the presence projection as long as the connection lives.
 * Channels whose members the gateway made leave (a detach, a drop, the connection ended) are out
 * of `held` and stop counting.
 */
export class EnteredMembers {
  private readonly entered = new Map<string, Set<string>>();
  private count = 0;

  constructor(
    private readonly settings: RealtimeSettings,
    /** The channels where the connection still holds members. */
    private readonly held: ReadonlySet<string>,
    /** Members present (and reserved), of every app or of one. */
    private readonly present: (appId?: string) => number,
  ) {}

  /** Counts `changes` on `channel`, throwing over a limit; returns the clientIds that join. */
  admit(appId: string, channel: string, changes: PresenceChange[]): Set<string> {
    const { maxMembersPerConnection, maxChannelsPerConnection, maxPresenceMembers, maxPresenceMembersPerApp } = this.settings;
    for (const [channelHeld, clientIds] of this.entered) {
      if (this.held.has(channelHeld)) continue;
      this.count -= clientIds.size;
      this.entered.delete(channelHeld);
    }
    const clientIds = this.entered.get(channel) ?? new Set<string>();
    const joining = new Set(changes.filter((c) => c.action !== 'leave' && !clientIds.has(c.clientId ?? '')).map((c) => c.clientId ?? ''));
    if (joining.size > 0 && clientIds.size === 0 && this.entered.size >= maxChannelsPerConnection) {
      throw new ServiceError('tooManyChannels', `a connection may hold presence members on at most ${maxChannelsPerConnection} channels`);
    }
    if (this.count + joining.size > maxMembersPerConnection) {
      throw new ServiceError('tooManyPresenceMembers', `a connection may hold at most ${maxMembersPerConnection} presence members; this one holds ${this.count}`);
    }
    // Every instance holds every member in its presence projection: bounded for the service, and
    // per app so that one app's members cannot refuse another's. The counts include the members
    // entered here and not yet applied (reserved), so racing enters cannot pass a limit.
    if (joining.size > 0 && this.present() + joining.size > maxPresenceMembers) {
      throw new ServiceError('tooManyPresenceMembers', `the service holds its maximum of ${maxPresenceMembers} presence members; retry once some have left`);
    }
    if (joining.size > 0 && this.present(appId) + joining.size > maxPresenceMembersPerApp) {
      throw new ServiceError('tooManyPresenceMembers', `this app has its maximum of ${maxPresenceMembersPerApp} presence members; retry once some have left`);
    }
    for (const { action, clientId = '' } of changes) {
      if (action === 'leave') {
        if (clientIds.delete(clientId)) this.count--;
      } else if (!clientIds.has(clientId)) {
        clientIds.add(clientId);
        this.count++;
      }
    }
    if (clientIds.size > 0) this.entered.set(channel, clientIds);
    else this.entered.delete(channel);
    return joining;
  }
}
