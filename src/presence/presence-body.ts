import type { Limits } from '../limits.js';
import type { MessageData } from '../domain/message.js';
import { checkMessageSize, clientIdField, dataField, encodingField, extrasField, idField } from '../messages/message.js';

export type PresenceBodyLimits = Pick<Limits, 'maxDataDepth' | 'maxMessageSize'>;

/** The fields of one presence message a client sends, checked; absent fields are left out. */
export interface PresenceFields {
  /** the id the client gave (an SDK's automatic re-enter gives the member's own) */
  id?: string;
  clientId: string;
  data?: MessageData;
  encoding?: string;
  extras?: Record<string, unknown>;
}

/**
 * The fields of one presence message (realtime PRESENCE, the sandbox's presence fixtures), by the
 * rules of a message's fields (spec: PresenceMessage, "same as on Message": src/messages/message.ts).
 * Whose the member is, is the caller's rule: `memberOf` gets the clientId the message gives, its
 * shape already checked, and answers the member's clientId or throws.
 */
export function presenceFields(item: Record<string, unknown>, limits: PresenceBodyLimits, where: string, memberOf: (given: string | undefined) => string): PresenceFields {
  const clientId = memberOf(clientIdField(item.clientId, where));
  const id = idField(item.id, where);
  const fields: PresenceFields = id === undefined ? { clientId } : { id, clientId };
  const data = dataField(item.data, limits, where);
  if (data !== undefined) fields.data = data;
  const encoding = encodingField(item.encoding, data, where);
  if (encoding !== undefined) fields.encoding = encoding;
  const extras = extrasField(item.extras, limits, where);
  if (extras !== undefined) fields.extras = extras;
  checkMessageSize({ id: id ?? '', timestamp: 0, ...fields }, limits, where);
  return fields;
}
