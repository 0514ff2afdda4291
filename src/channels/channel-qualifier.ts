import { ServiceError } from '../errors.js';
import { checkChannelName } from './channel-name.js';
import { META_PREFIX } from '../domain/channel.js';

// A channel name's qualifier: `[?rewind=1]room` (channel params in the name) and
// `[filter=<base64 expression>?params]room`, the derived channel the SDK's
// `channels.getDerived(name, { filter })` names. Either refers to the channel `room`: its
// messages, presence and capability, over realtime and over REST alike (restChannelName).
// `[meta]` names are channels of their own.

/** Params in a name: as many as the ATTACH params may carry. */
const MAX_NAME_PARAMS = 16;
/** A qualifier's characters: room for a filter of MAX_FILTER_CHARS (message-filter.ts) in base64, and params. */
const MAX_QUALIFIER_CHARS = 2048;

export interface QualifiedName {
  /** The name as the client gave it: frames to it carry this name. */
  name: string;
  /** The channel it refers to. */
  base: string;
  /** The `filter` qualifier's value (base64 of the expression), when it names one. */
  filter?: string;
  /** Channel params given in the name. */
  params: Record<string, string>;
}

/** A channel name as a client gives it, checked, with what its qualifier says. */
export function qualifiedName(name: string): QualifiedName {
  if (!name.startsWith('[') || name.startsWith(META_PREFIX)) return { name: checkChannelName(name), base: name, params: {} };
  const close = name.indexOf(']');
  if (close < 0) throw new ServiceError('invalidChannelName', 'channel name has a "[" qualifier without its "]"');
  const inside = name.slice(1, close);
  const base = name.slice(close + 1);
  if (base.length === 0) throw new ServiceError('invalidChannelName', 'channel name has a qualifier but no name');
  if (base.startsWith('[')) throw new ServiceError('invalidChannelName', 'a qualified channel name cannot name another qualified channel');
  checkChannelName(base);
  if (inside.length > MAX_QUALIFIER_CHARS) throw new ServiceError('invalidChannelName', `a channel name's qualifier may be at most ${MAX_QUALIFIER_CHARS} characters`);
  const q = inside.indexOf('?');
  const head = q < 0 ? inside : inside.slice(0, q);
  const params = q < 0 ? {} : paramsOf(inside.slice(q + 1));
  if (head === '') return { name, base, params };
  if (head.startsWith('filter=')) {
    const filter = head.slice('filter='.length);
    if (filter.length === 0) throw new ServiceError('invalidChannelName', 'the filter qualifier is empty');
    return { name, base, filter, params };
  }
  throw new ServiceError('invalidChannelName', `channel name has an unknown qualifier "[${head}]": only [?params], [filter=...] and [meta] are served`);
}

/**
 * The channel a REST path or body names: `[?params]room` is `room`, as over realtime. The SDK's
 * realtime channel of that name asks for its history, presence and status over REST with the name
 * it was given (`/channels/%5B%3Frewind%3D1%5Droom/messages`); taken as a channel of its own, that
 * name read an empty history and published where no attachment of it received anything. The
 * params are attach options: a REST request has nothing to apply them to, and drops them. A
 * derived channel (`[filter=...]`) is subscribe-only, its filter applied to a realtime delivery;
 * a REST request on it is refused.
 */
export function restChannelName(name: string): string {
  const qualified = qualifiedName(name);
  if (qualified.filter !== undefined) {
    throw new ServiceError('invalidChannelName', `"[filter=...]${qualified.base}" names a derived channel, served over realtime only: name the channel itself ("${qualified.base}") over REST`);
  }
  return qualified.base;
}

function paramsOf(query: string): Record<string, string> {
  const params: Record<string, string> = {};
  let count = 0;
  for (const [key, value] of new URLSearchParams(query)) {
    if (++count > MAX_NAME_PARAMS) throw new ServiceError('invalidChannelName', `a channel name may carry at most ${MAX_NAME_PARAMS} params`);
    params[key] = value;
  }
  return params;
}
