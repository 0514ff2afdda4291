// The embedded log's in-memory windows: the newest records of each topic partition, so that its
// consumers read them without SQLite (EmbeddedLog.consume, right after each commit).
import type { AppendRecord, LogPosition, LogRecord } from '../port.js';

/** The newest records of a topic partition, from offset `start`, and their recordBytes. */
interface Window {
  start: number;
  records: LogRecord[];
  bytes: number;
}

/** What a record holds in memory, as the windows and a consumer's batch count it. */
export const recordBytes = (r: LogRecord): number => r.value.byteLength + r.key.length;

/**
 * A record leaves its window once every running consumer of its topic has read it (release), or
 * when its partition's window holds more than maxRecords (a consumer that lags reads from SQLite
 * instead). Kept only for as long as consumers need them, records die young: kept longer, each one
 * (and the event decoded with it) outlived a few scavenges and was copied into the old generation.
 * Bounded in bytes too, all partitions together (maxBytes): a consumer that waits (a webhook rule
 * whose target does not answer) held 20,000 records a partition, 10 GB of 512 KiB publishes.
 */
export class RecentWindows {
  private readonly windows = new Map<string, Window[]>();
  /** The next offset of each running consumer, per topic (its positions array, by partition). */
  private readonly readers = new Map<string, Set<number[]>>();
  /** bytes the windows hold (recordBytes), all together */
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly maxRecords = 20_000,
  ) {}

  /** Keeps committed records (the window of each partition they went to). */
  remember(topic: string, records: AppendRecord[], positions: LogPosition[]): void {
    let partitions = this.windows.get(topic);
    if (!partitions) this.windows.set(topic, (partitions = []));
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      const { partition, offset } = positions[i];
      let window = partitions[partition];
      if (!window || window.start + window.records.length !== offset) {
        if (window) this.bytes -= window.bytes;
        window = partitions[partition] = { start: offset, records: [], bytes: 0 };
      }
      const record: LogRecord = { topic, partition, offset, key: r.key, timestamp: r.timestamp, value: r.value };
      window.records.push(record);
      const bytes = recordBytes(record);
      window.bytes += bytes;
      this.bytes += bytes;
      if (window.records.length > this.maxRecords || this.bytes > this.maxBytes) this.trim(window);
    }
  }

  /** Counts a consumer's positions (by partition) among the topic's readers; the answer takes them out. */
  addReader(topic: string, positions: number[]): () => void {
    let readers = this.readers.get(topic);
    if (!readers) this.readers.set(topic, (readers = new Set()));
    readers.add(positions);
    return () => void readers.delete(positions);
  }

  /** Drops the records of a partition's window that every running consumer of the topic has read. */
  release(topic: string, partition: number): void {
    const window = this.windows.get(topic)?.[partition];
    const readers = this.readers.get(topic);
    if (!window || !readers || readers.size === 0) return;
    let read = Infinity;
    for (const positions of readers) read = Math.min(read, positions[partition]);
    const drop = Math.min(read - window.start, window.records.length);
    if (drop <= 0) return;
    let bytes = 0;
    for (let i = 0; i < drop; i++) bytes += recordBytes(window.records[i]);
    this.dropFront(window, drop, bytes);
  }

  /** The window's records and the index of fromOffset among them, or undefined when it does not hold fromOffset. */
  holding(topic: string, partition: number, fromOffset: number): { records: LogRecord[]; index: number } | undefined {
    const window = this.windows.get(topic)?.[partition];
    return window && fromOffset >= window.start ? { records: window.records, index: fromOffset - window.start } : undefined;
  }

  /** Up to maxRecords records from fromOffset, ending at the first that reaches maxBytes; undefined when the window does not hold fromOffset. */
  read(topic: string, partition: number, fromOffset: number, maxRecords: number, maxBytes: number): LogRecord[] | undefined {
    const held = this.holding(topic, partition, fromOffset);
    if (!held) return undefined;
    const { records, index: from } = held;
    let to = Math.min(records.length, from + maxRecords);
    if (maxBytes !== Infinity) {
      let bytes = 0;
      for (let i = from; i < to; i++) {
        if ((bytes += recordBytes(records[i])) < maxBytes) continue;
        to = i + 1;
        break;
      }
    }
    return records.slice(from, to);
  }

  /**
   * Drops the oldest records of a window that went over a bound, down to half of it (records a
   * lagging consumer reads from SQLite instead): the window appended to pays, so the bytes of all
   * windows together never pass maxBytes once an append is remembered.
   */
  private trim(window: Window): void {
    let drop = 0;
    let bytes = 0;
    while (drop < window.records.length && (window.records.length - drop > this.maxRecords / 2 || this.bytes - bytes > this.maxBytes / 2)) {
      bytes += recordBytes(window.records[drop++]);
    }
    this.dropFront(window, drop, bytes);
  }

  private dropFront(window: Window, drop: number, bytes: number): void {
    window.records.splice(0, drop);
    window.start += drop;
    window.bytes -= bytes;
    this.bytes -= bytes;
  }
}
