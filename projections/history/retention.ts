/**
 * Retention by whole days (ARCHITECTURE: retention by dropping partitions, not TTL). A row goes into
 * the partition of the day after its last retained instant; a day partition is dropped once that
 * day is over, so no row is dropped early, and reads also filter by each channel's exact window.
 */
export function expiryDay(timestamp: number, retentionHours: number): string {
  return new Date(timestamp + retentionHours * 3600_000).toISOString().slice(0, 10);
}
