import { createHash } from 'node:crypto';
import type { ChannelIndex } from './channel-index.js';

// The `cursor` of GET /channels' `next` link (README: Channels, Enumeration): the last name a page
// listed, or for a name too long to go in a Link header, a shortened form the index finds again.

/** Cursors longer than this, percent-encoded, are shortened (cursorOf). */
const LONG_CURSOR = 600;
/** Starts a shortened cursor: a channel name never has control characters. */
const CURSOR_MARK = '\u0001';
/** Characters of a sha256 in base64url. */
const HASH_LENGTH = 43;

/** The hash a shortened cursor names a channel by, for a name too long to go whole in one (cursorOf). */
export const longNameHash = (channel: string): string | undefined =>
  encodeURIComponent(channel).length <= LONG_CURSOR ? undefined : createHash('sha256').update(channel).digest('base64url');

/**
 * The cursor that continues after `channel`: the name itself, or for a name too long to go in
 * a Link header (2,048 bytes percent-encode to 6,144 characters), its first 100 characters and
 * a hash, which nameOfCursor finds again by the hash (the index keeps each long name's).
 */
export function cursorOf(channel: string): string {
  const hash = longNameHash(channel);
  return hash === undefined ? channel : `${CURSOR_MARK}${hash}${channel.slice(0, 100)}`;
}

/** The name a cursor continues after. */
export function nameOfCursor(index: ChannelIndex, cursor: string): string {
  if (!cursor.startsWith(CURSOR_MARK)) return cursor;
  const head = cursor.slice(1 + HASH_LENGTH);
  // By its hash, which the index keeps for each long name: a cursor, forged or not, costs a map read.
  const found = index.named(cursor.slice(1, 1 + HASH_LENGTH));
  // Gone meanwhile: from the names that start like it (some may come again).
  return found !== undefined && found.startsWith(head) ? found : head;
}
