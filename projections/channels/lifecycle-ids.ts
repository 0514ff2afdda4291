// Lifecycle messages' ids (ChannelsProjection): derived from the record that caused them, so the
// same cause gives the same id and a repeat is recognised by the idempotent-publish window.
import { createHash } from 'node:crypto';

const channelTag = (channel: string): string => createHash('sha1').update(channel).digest('base64url').slice(0, 12);

/** A lifecycle message's id: `lc:<cause position>:<channel tag>:<event>` (the same cause, the same id). */
export const lifecycleId = (cause: string, channel: string, event: string): string => `lc:${cause}:${channelTag(channel)}:${event}`;
export const periodOfId = (id: string): string | undefined => {
  const m = /^lc:(.+):[A-Za-z0-9_-]{12}:channel\.[a-z.]+$/.exec(id);
  return m?.[1];
};

