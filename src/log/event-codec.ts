import { isProtoKeyRefusal, unpackOwnKeys } from '../codec/msgpack-own-keys.js';
import { MsgpackWriter, packValue, unpackValue } from '../codec/msgpack.js';
import type { StoredMessage } from '../domain/message.js';
import type { LogEvent, MessagesPublished } from '../domain/events.js';

// Events are MessagePack on the log: compact, and binary message data survives unchanged.

/**
 * The event a value holds, kept on the value itself: a value is decoded at most once however many
 * projections consume it, and a value this process encoded is never decoded at all (its event is
 * the one it was encoded from, which decodes to an equal object). Events are therefore shared:
 * projections must treat them as read-only.
 */
const EVENT = Symbol('decoded event');
type EventBytes = Uint8Array & { [EVENT]?: LogEvent };

export const encodeEvent = (event: LogEvent): Uint8Array => {
  const bytes: EventBytes = (event.type === 'messages.published' && encodePublished(event)) || packValue(event);
  bytes[EVENT] = event;
  return bytes;
};

// The publish event, written field by field (one per publish, so it is the hot one). Same bytes
// as packValue gives for the shapes the service builds (test/unit/log-events.test.ts); any other
// shape (a field it does not know, an undefined field) goes through packValue.
const writer = new MsgpackWriter();
// The messages last: what comes before them is the same for every publish of a channel by one key
// (and clientIds), which the audit replay's transcoder copies whole (src/audit/ndjson.ts's prefixes).
// Records written before kept clientIds and keyName after the messages; they decode the same.
const EVENT_FIELDS = ['type', 'appId', 'channel', 'transport', 'clientIds', 'keyName', 'messages'] as const;
/** Which of EVENT_FIELDS a publish event must have. */
const REQUIRED_FIELD = [true, true, true, true, false, false, true];
const MESSAGE_FIELDS = ['id', 'timestamp', 'name', 'data', 'encoding', 'clientId', 'connectionId', 'extras', 'action'] as const;

function definedFields(m: StoredMessage): number | undefined {
  let n = 0;
  if (m.id !== undefined) n++;
  if (m.timestamp !== undefined) n++;
  if (m.name !== undefined) n++;
  if (m.data !== undefined) n++;
  if (m.encoding !== undefined) n++;
  if (m.clientId !== undefined) n++;
  if (m.connectionId !== undefined) n++;
  if (m.extras !== undefined) n++;
  if (m.action !== undefined) n++;
  // Every own key must be one of the fields above, and defined, in that order (for...in: no
  // array of keys per message; a message is a plain object, so it enumerates its own keys only).
  let keys = 0;
  let at = 0;
  for (const k in m) {
    keys++;
    while (at < MESSAGE_FIELDS.length && MESSAGE_FIELDS[at] !== k) at++;
    if (at === MESSAGE_FIELDS.length) return undefined;
  }
  return keys === n ? n : undefined;
}

export function encodePublished(e: MessagesPublished): Uint8Array | undefined {
  // The four required fields, clientIds and keyName when defined, then the messages, in that order.
  const expected = 5 + (e.clientIds === undefined ? 0 : 1) + (e.keyName === undefined ? 0 : 1);
  let at = 0;
  let keys = 0;
  for (const k in e) {
    while (at < EVENT_FIELDS.length && EVENT_FIELDS[at] !== k) {
      if (REQUIRED_FIELD[at]) return undefined;
      at++;
    }
    if (at === EVENT_FIELDS.length) return undefined;
    at++;
    keys++;
  }
  if (keys !== expected) return undefined;
  if (typeof e.appId !== 'string' || typeof e.channel !== 'string' || typeof e.transport !== 'string' || !Array.isArray(e.messages)) return undefined;
  if (e.keyName !== undefined && typeof e.keyName !== 'string') return undefined;
  const counts: number[] = [];
  for (const m of e.messages) {
    const n = definedFields(m);
    if (n === undefined) return undefined;
    counts.push(n);
  }
  const w = writer.reset();
  w.map(expected).key('type').string(e.type).key('appId').string(e.appId).key('channel').string(e.channel);
  w.key('transport').string(e.transport);
  if (e.clientIds !== undefined) w.key('clientIds').value(e.clientIds);
  if (e.keyName !== undefined) w.key('keyName').string(e.keyName);
  w.key('messages').array(e.messages.length);
  e.messages.forEach((m, i) => {
    w.map(counts[i]);
    if (m.id !== undefined) w.key('id').string(m.id);
    if (m.timestamp !== undefined) w.key('timestamp').number(m.timestamp);
    if (m.name !== undefined) w.key('name').string(m.name);
    if (m.data !== undefined) w.key('data').value(m.data);
    if (m.encoding !== undefined) w.key('encoding').string(m.encoding);
    if (m.clientId !== undefined) w.key('clientId').string(m.clientId);
    if (m.connectionId !== undefined) w.key('connectionId').string(m.connectionId);
    if (m.extras !== undefined) w.key('extras').value(m.extras);
    if (m.action !== undefined) w.key('action').value(m.action);
  });
  return w.done();
}

export const decodeEvent = (value: Uint8Array): LogEvent => {
  const bytes = value as EventBytes;
  return (bytes[EVENT] ??= readEvent(value));
};

/**
 * A record's event. One holding a map key "__proto__" (realtime JSON frames let such keys in, ACKed,
 * until they were refused) is read with the key an own property, as JSON.parse reads it: the shared
 * decoder refuses it, and every projection retried the record for ever, so a service whose log held
 * one never started again.
 */
function readEvent(value: Uint8Array): LogEvent {
  try {
    return unpackValue(value) as LogEvent;
  } catch (err) {
    if (!isProtoKeyRefusal(err)) throw err;
    return unpackOwnKeys(value) as LogEvent;
  }
}

/** The event a value holds if it is already decoded (or was encoded here), without decoding it. */
export const decodedEvent = (value: Uint8Array): LogEvent | undefined => (value as EventBytes)[EVENT];

/** The MessagePack of a `channel.used` event up to its type: a map, `"type"`, `"channel.used"`. */
const CHANNEL_USED_HEAD = Uint8Array.from([0xa4, ...new TextEncoder().encode('type'), 0xac, ...new TextEncoder().encode('channel.used')]);

/**
 * Whether `value` is certainly a `channel.used` event, read from its first field without decoding
 * it (delivery sees one a channel per attached interval and decodes none); false when unsure.
 */
export function isChannelUsed(value: Uint8Array): boolean {
  const known = decodedEvent(value);
  if (known) return known.type === 'channel.used';
  if (value.length <= CHANNEL_USED_HEAD.length || (value[0] & 0xf0) !== 0x80) return false;
  for (let i = 0; i < CHANNEL_USED_HEAD.length; i++) if (value[i + 1] !== CHANNEL_USED_HEAD[i]) return false;
  return true;
}
