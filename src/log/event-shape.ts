import { decodeEvent } from './event-codec.js';
import type { LogEvent } from '../domain/events.js';

// What a record read from the log must be before a consumer is handed it: one of the service's
// events (src/domain/events.ts). On Kafka anyone who may write to a topic can put anything there
// (another producer, a tool, a newer version of the service): bytes that are not MessagePack, a
// value cut short, a value of another shape. A consumer handed one threw on it, and the log hands a
// failed batch again for ever: the projection stalled behind it, and reads waiting for its
// positions (read-your-writes) with it. Such a record is left out by every consumer instead
// (src/log/kafka/kafka-subscription.ts; README: Records that are not the service's).

/** Why a record is left out: not MessagePack at all, not an event's shape, or an event type this version does not know. */
export type UnreadableReason = 'undecodable' | 'shape' | 'unknown-type';

export interface Unreadable {
  reason: UnreadableReason;
  /** What was wrong, for the log line (bounded: never the value itself). */
  detail: string;
  /** `unknown-type`: the type (64 characters at most), which a newer version of the service may write. */
  type?: string;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Per event type, the fields its consumers read without looking first (a projection dereferences
 * them): a record lacking one, or holding one of another kind, is not the event it says it is.
 * Fields a consumer tests before use, and those added by later versions (older records lack
 * them), are not required.
 */
const REQUIRED: Record<string, (e: Record<string, unknown>) => string | undefined> = {
  'messages.published': (e) => app(e) ?? channel(e) ?? messages(e.messages),
  'channel.used': (e) => app(e) ?? channel(e),
  'presence.changed': (e) => app(e) ?? channel(e) ?? presence(e.event),
  'app.created': (e) => appDefinition(e.app),
  'app.deleted': (e) => app(e),
  'key.created': (e) => app(e) ?? (isKey(e.key) ? undefined : 'key is not a key definition (keyName, keySecret, capability)'),
  'key.updated': (e) => app(e) ?? field(e, 'keyName'),
  'key.revoked': (e) => app(e) ?? field(e, 'keyName'),
  'rule.created': (e) => app(e) ?? (isRule(e.rule) ? undefined : 'rule is not a webhook rule (id, source, target)'),
  'rule.deleted': (e) => app(e) ?? field(e, 'ruleId'),
  'tokens.revoked': (e) => app(e) ?? field(e, 'keyName') ?? (Array.isArray(e.targets) && e.targets.every(isString) ? undefined : 'targets is not a list of strings'),
  'usage.reported': (e) => app(e) ?? counters(e),
  'stats.fixture': (e) => app(e) ?? counters(e),
  'connection.opened': (e) => app(e) ?? field(e, 'connectionId'),
  'connection.closed': (e) => app(e) ?? field(e, 'connectionId'),
  'instance.alive': (e) => field(e, 'instanceId'),
  'channel.attached': (e) => app(e) ?? channel(e) ?? field(e, 'connectionId'),
  'channel.detached': (e) => app(e) ?? channel(e) ?? field(e, 'connectionId'),
  'channel.activated': (e) => app(e) ?? channel(e),
  'instance.started': (e) => field(e, 'instanceId'),
  'instance.gone': (e) => field(e, 'instanceId'),
};

function field(e: Record<string, unknown>, name: string): string | undefined {
  return isString(e[name]) ? undefined : `${name} is not a string`;
}
const app = (e: Record<string, unknown>): string | undefined => field(e, 'appId');
const channel = (e: Record<string, unknown>): string | undefined => field(e, 'channel');

// An app's definition is read wherever the app is used (its keys by every request's credentials,
// its namespaces by every publish's persistence): a key or namespace that is not one threw there.
const isKey = (k: unknown): boolean => isObject(k) && isString(k.keyName) && isString(k.keySecret) && isString(k.capability);
const isRule = (r: unknown): boolean => isObject(r) && isString(r.id) && isObject(r.source) && isObject(r.target);

function appDefinition(a: unknown): string | undefined {
  if (!isObject(a) || !isString(a.appId)) return 'app is not an app definition (appId)';
  if (!Array.isArray(a.keys) || !a.keys.every(isKey)) return 'app.keys is not a list of keys (keyName, keySecret, capability)';
  if (!Array.isArray(a.namespaces) || !a.namespaces.every((n) => isObject(n) && isString(n.id))) return 'app.namespaces is not a list of namespaces (id)';
  if (a.rules !== undefined && !(Array.isArray(a.rules) && a.rules.every(isRule))) return 'app.rules is not a list of webhook rules';
  return undefined;
}

function messages(value: unknown): string | undefined {
  if (!Array.isArray(value)) return 'messages is not a list';
  for (const m of value) {
    if (!isObject(m) || !isString(m.id) || typeof m.timestamp !== 'number') return 'a message is not one (id, timestamp)';
  }
  return undefined;
}

function presence(value: unknown): string | undefined {
  return isObject(value) && isString(value.action) && isString(value.id) && typeof value.timestamp === 'number' ? undefined : 'event is not a presence event (action, id, timestamp)';
}

function counters(e: Record<string, unknown>): string | undefined {
  if (typeof e.intervalStart !== 'number') return 'intervalStart is not a number';
  if (!isObject(e.counters)) return 'counters is not a map';
  for (const k in e.counters) if (typeof e.counters[k] !== 'number') return 'a counter is not a number';
  return undefined;
}

/**
 * Levels of lists and maps a record may nest: the service writes some 40 at most (the event, its
 * messages, a message, its extras, and the 32 levels message data and extras may hold: Limits
 * maxDataDepth). The decoder reads any depth, but the consumers write what they read again
 * (JSON.stringify, MessagePack: the history rows, a realtime delivery, the replay's lines), and
 * those recurse: a record nested 15,000 deep made them throw RangeError (the stack), so a
 * projection handed it failed its batch for ever, as an undecodable record did before.
 */
export const RECORD_MAX_DEPTH = 512;

/** Whether the decoded `value` nests more than `max` levels of lists and maps (a walk with a stack of its own: no recursion). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: unknown[] = [value];
  const depths: number[] = [0];
  while (stack.length > 0) {
    const v = stack.pop();
    const depth = depths.pop()!;
    if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) continue;
    if (depth >= max) return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const item = v[i];
        if (typeof item === 'object' && item !== null) {
          stack.push(item);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const k in v) {
        const item = (v as Record<string, unknown>)[k];
        if (typeof item === 'object' && item !== null) {
          stack.push(item);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}

/** Why the record whose value this is cannot be handed to a consumer; undefined: it can (decoded now, kept on the value: decodeEvent). */
export function unreadable(value: Uint8Array): Unreadable | undefined {
  let event: unknown;
  try {
    event = decodeEvent(value);
  } catch (err) {
    return { reason: 'undecodable', detail: `not MessagePack: ${String((err as Error)?.message ?? err).slice(0, 200)}` };
  }
  if (!isObject(event)) return { reason: 'shape', detail: `a ${event === null ? 'null' : Array.isArray(event) ? 'list' : typeof event}, not an event` };
  const type = event.type;
  if (!isString(type)) return { reason: 'shape', detail: 'no event type' };
  const check = Object.hasOwn(REQUIRED, type) ? REQUIRED[type] : undefined;
  if (!check) return { reason: 'unknown-type', type: type.slice(0, 64), detail: `event type ${JSON.stringify(type.slice(0, 64))} is not one this version knows` };
  const wrong = check(event);
  if (wrong !== undefined) return { reason: 'shape', detail: `${type}: ${wrong}` };
  if (nestsDeeperThan(event, RECORD_MAX_DEPTH)) return { reason: 'shape', detail: `${type}: nests deeper than ${RECORD_MAX_DEPTH} levels of lists and maps` };
  return undefined;
}

/** Whether `type` is an event type this version writes (and its consumers read). */
export function isKnownEventType(type: string): boolean {
  return Object.hasOwn(REQUIRED, type);
}

/**
 * The event a record read with Log.read holds, or undefined when it is not one of the service's
 * (left out by consumers already, and logged there): what the readers of a range (a resume's
 * backlog, stats stand-ins, presence catch-up) use, so that such a record fails none of them.
 */
export function eventOf(value: Uint8Array): LogEvent | undefined {
  return unreadable(value) ? undefined : decodeEvent(value);
}
