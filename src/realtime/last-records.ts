/**
 * Each channel's last record offset in its partition of the messages topic, as delivery reads
 * them, for the most recently written channels: what tells a resume, without reading the log,
 * that a channel had nothing after the client's position (a channel quiet for longer than the
 * continuity window keeps it, however busy its partition: README, Resume).
 *
 * Per partition two generations of keys, at most `maxKeysPerPartition` together: when the current
 * one holds half, the older one is dropped, and the partition's horizon moves to where the current
 * one began. Every key with a record at or after the horizon is held, so a key not held had none
 * there. (Dropping keys one by one, oldest first from a Map, made each drop walk the deleted
 * entries ahead of it: 34 µs a record at 200,000 keys, against 0.03 to 0.13 µs for generations.)
 */
export class LastRecords {
  private readonly partitions = new Map<number, { current: Map<string, number>; older: Map<string, number>; currentFrom: number; horizon: number }>();
  private readonly generationKeys: number;

  constructor(maxKeysPerPartition: number) {
    this.generationKeys = Math.max(1, Math.floor(maxKeysPerPartition / 2));
  }

  /** Delivery reads `partition` from `offset` on: what came before it is not known. */
  start(partition: number, offset: number): void {
    this.partitions.set(partition, { current: new Map(), older: new Map(), currentFrom: offset, horizon: offset });
  }

  /** Delivery read a record of `key` at `offset`. */
  seen(partition: number, key: string, offset: number): void {
    const p = this.partitions.get(partition);
    if (!p) return;
    p.current.set(key, offset);
    if (p.current.size < this.generationKeys) return;
    p.older = p.current;
    p.current = new Map();
    p.horizon = p.currentFrom;
    p.currentFrom = offset + 1;
  }

  /** Whether `key` certainly has no record in its partition from `offset` up to what delivery read. */
  nothingSince(partition: number, key: string, offset: number): boolean {
    const p = this.partitions.get(partition);
    if (!p || offset < p.horizon) return false;
    return (p.current.get(key) ?? p.older.get(key) ?? -1) < offset;
  }
}
