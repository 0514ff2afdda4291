/** Stable key-to-partition mapping (FNV-1a), so one channel's events always share a partition. */
export function partitionFor(key: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % partitions;
}

/** Log key that keeps one channel's events in one partition, in order. */
export const channelKey = (appId: string, channel: string): string => `${appId}:${channel}`;

/** The appId of a channelKey: up to its first colon (appIds are letters, digits, `_` and `-`: src/apps/apps-file.ts, the sandbox's random ids). */
export const appIdOfKey = (key: string): string => key.slice(0, key.indexOf(':'));
