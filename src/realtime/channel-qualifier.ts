import { ServiceError } from '../errors.js';
import { checkChannelName } from '../channels/channel-name.js';
import { META_PREFIX } from '../domain/channel.js';

// A realtime channel name's qualifier (REALTIME-PROTOCOL.md §9): `[?rewind=1]room` (channel params
// in the name) and `[filter=<base64 expression>?params]room`, the derived channel the SDK's
// `channels.getDerived(name, { filter })` names. Either refers to the channel `room`: its
// messages, presence and capability. `[meta]` names are channels of their own.

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

/** A realtime channel name, checked, with what its qualifier says. */
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

function paramsOf(query: string): Record<string, string> {
  const params: Record<string, string> = {};
  let count = 0;
  for (const [key, value] of new URLSearchParams(query)) {
    if (++count > MAX_NAME_PARAMS) throw new ServiceError('invalidChannelName', `a channel name may carry at most ${MAX_NAME_PARAMS} params`);
    params[key] = value;
  }
  return params;
}
