import type { LogRecord } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import { messageToWire } from '../codec/message-wire.js';
import type { PresenceEvent } from '../domain/presence-event.js';
import { LIFECYCLE_CHANNEL } from '../domain/channel.js';
import { channelFilterRegExp, type WebhookRule } from './rules.js';
import { packValue } from '../codec/msgpack.js';

/**
 * One item of the platform's webhook envelope (`{"items": [...]}`): what happened (`source`,
 * `name`), when, and `data` with the channel and its messages or presence messages. `id` is the
 * record's log position (`<topic>:<partition>:<offset>`), the same on every delivery of it, so a
 * receiver can drop repeats (delivery is at least once).
 */
export interface WebhookItem {
  webhookId: string;
  id: string;
  source: WebhookRule['source']['type'];
  serial: string;
  timestamp: number;
  name: string;
  data: Record<string, unknown>;
}

/** The platform's presence actions on the wire (a drop: each member of the connection leaves). */
const PRESENCE_ACTION = { enter: 2, leave: 3, update: 4, drop: 3 } as const;

const presenceToWire = (e: PresenceEvent, reEnter: boolean, format: string): Record<string, unknown> => {
  const wire = messageToWire({ id: e.id, timestamp: e.timestamp, clientId: e.clientId, connectionId: e.connectionId, data: e.data, encoding: e.encoding, extras: e.extras }, format);
  return { ...wire, action: reEnter ? PRESENCE_ACTION.update : PRESENCE_ACTION[e.action as keyof typeof PRESENCE_ACTION] };
};

/**
 * Applies a presence change to the members the rule knows of and says whether the member was
 * present before it (projections/webhooks/presence-members.ts); absent: every enter is an enter.
 */
export type PresenceBefore = (partition: number, channel: string, event: PresenceEvent) => boolean;

/** A compiled rule: its filter made once. */
export interface RuleMatcher {
  rule: WebhookRule;
  appId: string;
  filter: RegExp;
}

export const matcherOf = (appId: string, rule: WebhookRule): RuleMatcher => ({ rule, appId, filter: filterOf(rule.source.channelFilter) });

/** On the linear engine (rules.ts); a rule stored before that was required, and which it cannot run, as it was stored. */
function filterOf(source: string): RegExp {
  try {
    return channelFilterRegExp(source);
  } catch {
    return new RegExp(source);
  }
}

/** The items a record gives a rule (none when the rule does not take it); in the record's order. */
export function itemsOf(record: LogRecord, m: RuleMatcher, presentBefore?: PresenceBefore): WebhookItem[] {
  const event = decodeEvent(record.value);
  if (event.type !== 'messages.published' && event.type !== 'presence.changed') return [];
  if (event.appId !== m.appId) return [];
  const base = { webhookId: m.rule.id, id: `${record.topic}:${record.partition}:${record.offset}`, source: m.rule.source.type, serial: `${record.partition}:${record.offset}`, timestamp: record.timestamp };
  const type = m.rule.source.type;
  if (type === 'channel.presence') {
    // `held`: the members moved to the instance a connection resumed on; no member came or went.
    if (event.type !== 'presence.changed' || event.event.action === 'held' || !m.filter.test(event.channel)) return [];
    // An enter by a member already present is an update, as the platform broadcasts it.
    const reEnter = (presentBefore?.(record.partition, event.channel, event.event) ?? false) && event.event.action === 'enter';
    return [{ ...base, name: 'presence.message', data: { channelId: event.channel, presence: [presenceToWire(event.event, reEnter, m.rule.target.format)] } }];
  }
  if (event.type !== 'messages.published') return [];
  if (type === 'channel.message') {
    if (event.channel === LIFECYCLE_CHANNEL || !m.filter.test(event.channel)) return [];
    return [{ ...base, name: 'channel.message', data: { channelId: event.channel, messages: event.messages.map((msg) => messageToWire(msg, m.rule.target.format)) } }];
  }
  // channel.lifecycle: the announcements on the lifecycle metachannel, one item each, filtered by
  // the channel they tell of; channel.occupancy: its `channel.occupancy` announcements (the figures
  // of [meta]channel.occupancy and of the channel's status), which channel.lifecycle leaves out.
  if (event.channel !== LIFECYCLE_CHANNEL) return [];
  return event.messages.flatMap((msg, i) => {
    if ((msg.name === 'channel.occupancy') !== (type === 'channel.occupancy')) return [];
    const data = detailsOf(msg.data, msg.encoding);
    const channelId = typeof data.channelId === 'string' ? data.channelId : typeof data.name === 'string' ? data.name : '';
    if (!m.filter.test(channelId)) return [];
    return [{ ...base, id: event.messages.length > 1 ? `${base.id}:${i}` : base.id, name: msg.name ?? 'channel.lifecycle', timestamp: msg.timestamp, data: { ...data, channelId } }];
  });
}

/** A lifecycle announcement's ChannelDetails: stored as JSON text (encoding `json`) or as an object. */
function detailsOf(data: unknown, encoding: string | undefined): Record<string, unknown> {
  if (typeof data === 'string' && encoding === 'json') {
    try {
      data = JSON.parse(data);
    } catch {
      return {};
    }
  }
  return typeof data === 'object' && data !== null && !(data instanceof Uint8Array) && !Array.isArray(data) ? (data as Record<string, unknown>) : {};
}

/**
 * A request's body: the envelope, or for a rule with `enveloped: false` the item's data alone
 * (single) or the data of each (batch); JSON text, or MessagePack bytes for a msgpack target.
 */
export function bodyOf(rule: WebhookRule, items: WebhookItem[]): string | Uint8Array {
  const value = rule.target.enveloped ? { items } : rule.requestMode === 'single' ? items[0].data : items.map((i) => i.data);
  return rule.target.format === 'msgpack' ? packValue(value) : JSON.stringify(value);
}

/** The Content-Type of a rule's requests. */
export const contentTypeOf = (rule: WebhookRule): string => (rule.target.format === 'msgpack' ? 'application/x-msgpack' : 'application/json');
