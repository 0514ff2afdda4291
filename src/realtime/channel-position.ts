// A channel position as the realtime protocol carries it (`channelSerial` of ATTACHED, MESSAGE,
// PRESENCE): `partition:offset`, everything in the channel's partition before `offset` delivered.
// Not a history serial (projections/history/history-entry.ts `serialOf`, a number per message).

/** The channelSerial of a position in the channel's partition. */
export const channelSerialAt = (partition: number, offset: number): string => `${partition}:${offset}`;

/** The offset a channelSerial names in `partition`; undefined when it is not one of that partition's. */
export function offsetOfChannelSerial(serial: string, partition: number): number | undefined {
  const m = /^(\d+):(\d+)$/.exec(serial);
  if (!m || Number(m[1]) !== partition) return undefined;
  const offset = Number(m[2]);
  return Number.isSafeInteger(offset) ? offset : undefined;
}
