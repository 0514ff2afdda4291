/**
 * A channel's position as the realtime protocol carries it (the channelSerial of ATTACHED and
 * MESSAGE, and the `from_serial` of a history request made with untilAttach): `partition:offset`,
 * everything in the channel's log partition before `offset` delivered. Opaque to the SDKs.
 */
export interface ChannelPosition {
  partition: number;
  offset: number;
}

export const channelSerial = (partition: number, offset: number): string => `${partition}:${offset}`;

/** The position a channelSerial names, or undefined if it is not one this service made. */
export function parseChannelSerial(serial: string): ChannelPosition | undefined {
  const m = /^(\d+):(\d+)$/.exec(serial);
  if (!m) return undefined;
  const partition = Number(m[1]);
  const offset = Number(m[2]);
  return Number.isSafeInteger(partition) && Number.isSafeInteger(offset) ? { partition, offset } : undefined;
}
