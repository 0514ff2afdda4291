import { ServiceError } from '../errors.js';
import { META_PREFIX } from '../domain/channel.js';

const MAX_NAME_BYTES = 2048;

/**
 * Checks a channel's own name (spec: Channel names, Authentication rule 6): the only qualifier a
 * channel's name holds is `[meta]`. A name a client gives, which may carry a `[?params]` or
 * `[filter=...]` qualifier in front of it, goes through channel-qualifier.ts (qualifiedName,
 * restChannelName), which checks the channel it refers to here.
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
    if (!name.startsWith(META_PREFIX)) {
      const close = name.indexOf(']');
      throw new ServiceError('invalidChannelName', `channel name has an unknown qualifier "${close < 0 ? name : name.slice(0, close + 1)}"`);
    }
    if (name === META_PREFIX) throw new ServiceError('invalidChannelName', 'channel name has a qualifier but no name');
  }
  return name;
}
