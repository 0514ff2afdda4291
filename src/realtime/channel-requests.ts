import { ServiceError } from '../errors.js';
import { allowedOn } from '../auth/channel-access.js';
import type { Capability } from '../auth/capability.js';
import type { Limits } from '../limits.js';
import { parsePublishBody, type Publisher } from '../messages/message.js';
import type { StoredMessage } from '../domain/message.js';
import { MODES } from '../domain/modes.js';
import { Flag, serviceError, type ProtocolMessage, type WireError } from './protocol.js';
import type { Rewind } from './rewind.js';
import { channelParamsOf, type ChannelParams } from './channel-params.js';
import { qualifiedName, type QualifiedName } from '../channels/channel-qualifier.js';
import { compileFilter, type MessageFilter } from './message-filter.js';

// What a client's ATTACH and MESSAGE frames ask, checked: functions of the frame and the
// credentials alone (the Connection acts on them).

/**
 * Modes a capability allows on a channel, within the requested ones (all four when none asked).
 * Receiving presence (the set, its changes) is `subscribe`'s, as GET presence is; `presence` alone
 * enters, updates and leaves (its own members' events still come back: delivery.ts). A derived
 * (filtered) channel is subscribe-only, as the platform's.
 */
export function modesFor(capability: Capability, channel: string, requested: number | undefined, derived = false): number {
  let granted = 0;
  if (allowedOn(capability, channel, 'subscribe')) granted |= Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE;
  if (allowedOn(capability, channel, 'publish')) granted |= Flag.PUBLISH;
  if (allowedOn(capability, channel, 'presence')) granted |= Flag.PRESENCE;
  if (derived) granted &= Flag.SUBSCRIBE;
  const asked = requested === undefined ? MODES : requested & MODES;
  return granted & (asked === 0 ? MODES : asked);
}

/** The modes a capability grants an ATTACH, or why it refuses it (40160). */
export function attachGrant(capability: Capability, pm: ProtocolMessage, request: AttachRequest): { modes: number; refusal?: WireError } {
  const base = request.channel.base;
  const modes = modesFor(capability, base, typeof pm.flags === 'number' ? pm.flags : undefined, request.filter !== undefined);
  if (modes === 0) {
    const derived = request.filter !== undefined ? ' (a derived channel takes only subscribe)' : '';
    return { modes, refusal: serviceError('capabilityDenied', `the credentials allow no operation on channel "${base}"${derived}`) };
  }
  if (request.params.occupancy && !allowedOn(capability, base, 'channel-metadata')) {
    return { modes: 0, refusal: serviceError('capabilityDenied', `the occupancy param needs the channel-metadata capability on channel "${base}"`) };
  }
  return { modes };
}

/** What an ATTACH asks beside its modes (§4). */
export interface AttachRequest {
  /** The channel's name as the client gave it, and what it refers to. */
  channel: QualifiedName;
  /** A derived channel's filter. */
  filter: MessageFilter | undefined;
  /** The params asked, checked; `granted` is what ATTACHED echoes. */
  params: ChannelParams;
  /** The position to go on from (a resume). */
  serial: string | undefined;
  /** The `rewind` param, on a clean attach only: a re-attach (ATTACH_RESUME, or a channelSerial) is not rewound again. */
  rewind: Rewind | undefined;
}

/**
 * An ATTACH's channel, filter, params, position and rewind; throws a ServiceError for a name,
 * filter or param that is not one (the attach fails with it: §4.4).
 */
export function attachRequestOf(pm: ProtocolMessage): AttachRequest {
  if (typeof pm.channel !== 'string') throw new ServiceError('invalidChannelName', 'the ProtocolMessage names no channel');
  const channel = qualifiedName(pm.channel);
  const filter = channel.filter === undefined ? undefined : compileFilter(channel.filter);
  const params = channelParamsOf(pm.params, channel.params);
  const serial = typeof pm.channelSerial === 'string' ? pm.channelSerial : undefined;
  const clean = serial === undefined && !(typeof pm.flags === 'number' && pm.flags & Flag.ATTACH_RESUME);
  return { channel, filter, params, serial, rewind: clean ? params.rewind : undefined };
}

/**
 * The channel a MESSAGE or PRESENCE acts on: the one its name refers to. A derived channel takes
 * neither (the platform's rule: derived channels are subscribe-only).
 */
export function targetChannelOf(pm: ProtocolMessage, what: 'publish' | 'enter presence'): string {
  if (typeof pm.channel !== 'string') throw new ServiceError('invalidChannelName', 'the ProtocolMessage names no channel');
  const channel = qualifiedName(pm.channel);
  if (channel.filter !== undefined) throw new ServiceError('capabilityDenied', `cannot ${what} on a derived (filtered) channel: it is subscribe-only; use "${channel.base}"`);
  return channel.base;
}

/**
 * A MESSAGE's messages, checked as REST's publish body is. Ids the client left out are
 * `connectionId:msgSerial:index`, as the platform assigns them: a MESSAGE the SDK sends again after
 * a resume has the same ids, so the idempotent-publish rule drops the repeat wherever it lands.
 */
export function publishedMessages(pm: ProtocolMessage, connectionId: string, msgSerial: number, publisher: Publisher, limits: Limits): StoredMessage[] {
  if (!Array.isArray(pm.messages) || pm.messages.length === 0) throw new ServiceError('invalidRequestBody', 'a MESSAGE needs a non-empty messages array');
  const raw = pm.messages.map((m, index) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return m;
    const item = { ...(m as Record<string, unknown>) };
    delete item.connectionKey;
    if (item.id === undefined || item.id === null) item.id = `${connectionId}:${msgSerial}:${index}`;
    return item;
  });
  const messages = parsePublishBody(raw, limits, publisher);
  for (const m of messages) m.connectionId = connectionId;
  return messages;
}
