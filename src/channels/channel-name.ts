import { ServiceError } from '../errors.js';
import { META_PREFIX } from '../domain/channel.js';

const MAX_NAME_BYTES = 2048;

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
    // `[?x][meta]channel.lifecycle` is no channel the realtime interface can name (channel-qualifier.ts):
    // over REST it was a regular channel that `*` reached, listed and announced as if it were the metachannel.
    if (qualifier !== META_PREFIX && name[close + 1] === '[') {
      throw new ServiceError('invalidChannelName', 'a qualified channel name cannot name another qualified channel');
    }
  }
  return name;
}
