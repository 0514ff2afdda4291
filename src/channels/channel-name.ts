import { ServiceError } from '../errors.js';

export const META_PREFIX = '[meta]';
const MAX_NAME_BYTES = 2048;

/** The metachannel of channel lifecycle events (spec: Events, 3; projections/channels). */
export const LIFECYCLE_CHANNEL = '[meta]channel.lifecycle';

export const isMetachannel = (name: string): boolean => name.startsWith(META_PREFIX);

/**
 * Checks a channel name from a path (spec: Channel names, Authentication rule 6). Qualifiers in
 * square brackets are only `[meta]` and the `[?params]` form; anything else in brackets is refused.
 */
export function checkChannelName(name: string): string {
  if (name.length === 0) throw new ServiceError('invalidChannelName', 'channel name is empty');
  if (Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new ServiceError('invalidChannelName', `channel name is longer than ${MAX_NAME_BYTES} bytes`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) {
    throw new ServiceError('invalidChannelName', 'channel name contains control characters');
  }
  if (name.startsWith(':')) throw new ServiceError('invalidChannelName', 'channel name cannot start with ":"');
  if (name.startsWith('[')) {
    const close = name.indexOf(']');
    const qualifier = close < 0 ? name : name.slice(0, close + 1);
    if (close < 0 || !(qualifier === META_PREFIX || qualifier.startsWith('[?'))) {
      throw new ServiceError('invalidChannelName', `channel name has an unknown qualifier "${qualifier}"`);
    }
    if (close === name.length - 1) throw new ServiceError('invalidChannelName', 'channel name has a qualifier but no name');
  }
  return name;
}

/** The namespace of a channel: the part before the first colon, if any (qualifiers excluded). */
export function namespaceOf(name: string): string | undefined {
  const bare = name.startsWith('[') ? name.slice(name.indexOf(']') + 1) : name;
  const colon = bare.indexOf(':');
  return colon > 0 ? bare.slice(0, colon) : undefined;
}
