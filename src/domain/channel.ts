// A channel's name and what it says: a metachannel, a namespace (spec: Channel names).

export const META_PREFIX = '[meta]';

/** The metachannel of channel lifecycle events (spec: Events, 3; projections/channels). */
export const LIFECYCLE_CHANNEL = '[meta]channel.lifecycle';

export const isMetachannel = (name: string): boolean => name.startsWith(META_PREFIX);

/** The namespace of a channel: the part before the first colon, if any (qualifiers excluded). */
export function namespaceOf(name: string): string | undefined {
  const bare = name.startsWith('[') ? name.slice(name.indexOf(']') + 1) : name;
  const colon = bare.indexOf(':');
  return colon > 0 ? bare.slice(0, colon) : undefined;
}
