import { ServiceError } from '../errors.js';
import { checkChannelName } from '../channels/channel-name.js';
import { allowedOn } from '../auth/channel-access.js';
import type { Capability } from '../auth/capability.js';
import type { Limits } from '../limits.js';
import { parsePublishBody } from '../messages/message.js';
import type { StoredMessage } from '../domain/message.js';
import { MODES } from '../domain/modes.js';
import { Flag, type ProtocolMessage } from './protocol.js';
import { parseRewind, type Rewind } from './rewind.js';

// What a client's ATTACH and MESSAGE frames ask, checked: functions of the frame and the
// credentials alone (the Connection acts on them).

/** The channel a ProtocolMessage names, checked. */
export function channelOf(pm: ProtocolMessage): string {
  if (typeof pm.channel !== 'string') throw new ServiceError('invalidChannelName', 'the ProtocolMessage names no channel');
  return checkChannelName(pm.channel);
}

/** Modes a capability allows on a channel, within the requested ones (all four when none asked). */
export function modesFor(capability: Capability, channel: string, requested: number | undefined): number {
  let granted = 0;
  if (allowedOn(capability, channel, 'subscribe')) granted |= Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE;
  if (allowedOn(capability, channel, 'publish')) granted |= Flag.PUBLISH;
  if (allowedOn(capability, channel, 'presence')) granted |= Flag.PRESENCE | Flag.PRESENCE_SUBSCRIBE;
  const asked = requested === undefined ? MODES : requested & MODES;
  return granted & (asked === 0 ? MODES : asked);
}

/** What an ATTACH asks beside its channel and modes (§4). */
export interface AttachRequest {
  params: Record<string, string> | undefined;
  /** The position to go on from (a resume). */
  serial: string | undefined;
  /** The `rewind` param, on a clean attach only: a re-attach (ATTACH_RESUME, or a channelSerial) is not rewound again. */
  rewind: Rewind | undefined;
}

/** An ATTACH's params, position and rewind; throws a ServiceError for a `rewind` that is not one. */
export function attachRequestOf(pm: ProtocolMessage): AttachRequest {
  const params = pm.params && typeof pm.params === 'object' ? pm.params : undefined;
  const serial = typeof pm.channelSerial === 'string' ? pm.channelSerial : undefined;
  const rewind = parseRewind(params && Object.hasOwn(params, 'rewind') ? (params as Record<string, unknown>).rewind : undefined);
  const clean = serial === undefined && !(typeof pm.flags === 'number' && pm.flags & Flag.ATTACH_RESUME);
  return { params, serial, rewind: clean ? rewind : undefined };
}

/**
 * A MESSAGE's messages, checked as REST's publish body is. Ids the client left out are
 * `connectionId:msgSerial:index`, as the platform assigns them: a MESSAGE the SDK sends again after
 * a resume has the same ids, so the idempotent-publish rule drops the repeat wherever it lands.
 */
export function publishedMessages(pm: ProtocolMessage, connectionId: string, msgSerial: number, clientId: string | undefined, limits: Limits): StoredMessage[] {
  if (!Array.isArray(pm.messages) || pm.messages.length === 0) throw new ServiceError('invalidRequestBody', 'a MESSAGE needs a non-empty messages array');
  const raw = pm.messages.map((m, index) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return m;
    const item = { ...(m as Record<string, unknown>) };
    delete item.connectionKey;
    if (item.id === undefined || item.id === null) item.id = `${connectionId}:${msgSerial}:${index}`;
    return item;
  });
  const messages = parsePublishBody(raw, limits, clientId);
  for (const m of messages) m.connectionId = connectionId;
  return messages;
}
