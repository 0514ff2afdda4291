import type { StoredMessage } from '../../src/messages/message.js';
import type { HistoryEntry, HistoryQuery } from './history-entry.js';

/** The messages a log record's value carries, in order (for entries kept by reference). */
export type MessagesOf = (value: Uint8Array) => StoredMessage[];

/**
 * One channel's entries, oldest first, as parallel arrays of numbers and references: a message
 * kept by reference costs no JavaScript object of its own, only slots in these arrays and its
 * share of the log record bytes it came in (which it shares with the records around it). Two
 * minutes of a busy service are millions of messages; as objects they made the garbage collector
 * the largest cost of publishing.
 */
class ChannelTail {
  /** index of the oldest live entry; entries before it are evicted */
  start = 0;
  readonly serials: number[] = [];
  readonly timestamps: number[] = [];
  readonly partitions: number[] = [];
  /** the ArrayBuffer holding the record's value, or the message itself (offsets[i] === -1) */
  readonly refs: (ArrayBufferLike | StoredMessage)[] = [];
  readonly offsets: number[] = [];
  readonly lengths: number[] = [];
  /** the message's index among its record's messages */
  readonly indexes: number[] = [];
  /** client-supplied message id -> timestamp, for idempotent publishing */
  readonly ids = new Map<string, number>();
  /** the indexed ids in arrival order, for eviction */
  readonly idOrder: string[] = [];
  idStart = 0;

  get end(): number {
    return this.serials.length;
  }

  get size(): number {
    return this.serials.length - this.start;
  }

  lastSerial(): number | undefined {
    return this.size > 0 ? this.serials[this.serials.length - 1] : undefined;
  }

  /** Drops evicted slots once they are the larger part of the arrays. */
  compact(): void {
    if (this.start <= 1024 && this.idStart <= 1024) return;
    if (this.start > 1024 && this.start * 2 > this.serials.length) {
      for (const list of [this.serials, this.timestamps, this.partitions, this.refs, this.offsets, this.lengths, this.indexes] as unknown[][]) {
        list.splice(0, this.start);
      }
      this.start = 0;
    }
    if (this.idStart > 1024 && this.idStart * 2 > this.idOrder.length) {
      this.idOrder.splice(0, this.idStart);
      this.idStart = 0;
    }
  }
}

/**
 * The last few minutes of every channel, in memory (spec: Limits, history without persistence).
 * Entries arrive in serial order per channel, so each channel is append-only; channels are found
 * through app then channel name, with no key string built per call. Messages of publishes are
 * kept by reference to the log record they came in (addRecord) and decoded again when a query
 * returns them; other entries (presence history, derived from state) are kept as objects (add).
 */
export class MemoryTail {
  private readonly apps = new Map<string, Map<string, ChannelTail>>();
  private size = 0;

  constructor(
    readonly windowMs: number,
    private readonly messagesOf?: MessagesOf,
  ) {}

  private channel(appId: string, channel: string): ChannelTail | undefined {
    return this.apps.get(appId)?.get(channel);
  }

  private channelForAdd(appId: string, channel: string, serial: number): ChannelTail | undefined {
    let channels = this.apps.get(appId);
    if (!channels) this.apps.set(appId, (channels = new Map()));
    let tail = channels.get(channel);
    if (!tail) channels.set(channel, (tail = new ChannelTail()));
    const last = tail.lastSerial();
    if (last !== undefined && last >= serial) return undefined; // replayed: already here
    return tail;
  }

  private push(
    tail: ChannelTail,
    serial: number,
    partition: number,
    timestamp: number,
    ref: ArrayBufferLike | StoredMessage,
    offset: number,
    length: number,
    index: number,
    indexedId: string | undefined,
  ): void {
    tail.serials.push(serial);
    tail.timestamps.push(timestamp);
    tail.partitions.push(partition);
    tail.refs.push(ref);
    tail.offsets.push(offset);
    tail.lengths.push(length);
    tail.indexes.push(index);
    if (indexedId !== undefined) {
      tail.ids.set(indexedId, timestamp);
      tail.idOrder.push(indexedId);
    }
    this.size++;
  }

  /** Adds an entry as an object; `indexId` records its id for idempotent publishing (client-supplied ids). */
  add(entry: HistoryEntry, indexId = false): void {
    const tail = this.channelForAdd(entry.appId, entry.channel, entry.serial);
    if (!tail) return;
    const { message } = entry;
    this.push(tail, entry.serial, entry.partition, message.timestamp, message, -1, 0, 0, indexId ? message.id : undefined);
  }

  /**
   * Adds message `index` of the log record whose value is `value`, by reference to those bytes.
   * `indexedId`: the message's id when the client supplied it (idempotent publishing).
   */
  addRecord(
    appId: string,
    channel: string,
    serial: number,
    partition: number,
    timestamp: number,
    value: Uint8Array,
    index: number,
    indexedId?: string,
  ): void {
    if (!this.messagesOf) throw new Error('this tail keeps entries as objects only');
    const tail = this.channelForAdd(appId, channel, serial);
    if (!tail) return;
    this.push(tail, serial, partition, timestamp, value.buffer, value.byteOffset, value.byteLength, index, indexedId);
  }

  /** Timestamp of a message with this (client-supplied) id on the channel, if one is in the tail. */
  idSeenAt(appId: string, channel: string, id: string): number | undefined {
    return this.channel(appId, channel)?.ids.get(id);
  }

  query(q: HistoryQuery): HistoryEntry[] {
    const tail = this.channel(q.appId, q.channel);
    if (!tail) return [];
    const picked: number[] = [];
    const { serials, timestamps } = tail;
    if (q.direction === 'backwards') {
      for (let i = tail.end - 1; i >= tail.start && picked.length < q.limit; i--) {
        if (q.after !== undefined && serials[i] >= q.after) continue;
        const ts = timestamps[i];
        if (ts > q.end || ts < q.start) continue;
        picked.push(i);
      }
    } else {
      for (let i = tail.start; i < tail.end && picked.length < q.limit; i++) {
        if (q.after !== undefined && serials[i] <= q.after) continue;
        const ts = timestamps[i];
        if (ts < q.start || ts > q.end) continue;
        picked.push(i);
      }
    }
    // Consecutive messages of one record decode it once.
    let lastRef: unknown;
    let lastOffset = -1;
    let lastMessages: StoredMessage[] = [];
    return picked.map((i) => {
      const ref = tail.refs[i];
      let message: StoredMessage;
      if (tail.offsets[i] === -1) {
        message = ref as StoredMessage;
      } else {
        if (ref !== lastRef || tail.offsets[i] !== lastOffset) {
          lastRef = ref;
          lastOffset = tail.offsets[i];
          lastMessages = this.messagesOf!(new Uint8Array(ref as ArrayBufferLike, tail.offsets[i], tail.lengths[i]));
        }
        message = lastMessages[tail.indexes[i]];
      }
      return { appId: q.appId, channel: q.channel, serial: serials[i], partition: tail.partitions[i], message };
    });
  }

  /** Oldest timestamp the tail is complete from (entries older than this may be evicted). */
  horizon(now: number): number {
    return now - this.windowMs;
  }

  evict(now: number): number {
    const cutoff = this.horizon(now);
    let removed = 0;
    for (const [appId, channels] of this.apps) {
      for (const [name, tail] of channels) {
        const before = tail.start;
        while (tail.start < tail.end && tail.timestamps[tail.start] < cutoff) {
          tail.refs[tail.start] = undefined as unknown as StoredMessage; // let go of the bytes now
          tail.start++;
        }
        while (tail.idStart < tail.idOrder.length) {
          const id = tail.idOrder[tail.idStart];
          const seen = tail.ids.get(id);
          if (seen !== undefined && seen >= cutoff) break;
          tail.ids.delete(id);
          tail.idStart++;
        }
        removed += tail.start - before;
        if (tail.size === 0 && tail.ids.size === 0) channels.delete(name);
        else tail.compact();
      }
      if (channels.size === 0) this.apps.delete(appId);
    }
    this.size -= removed;
    return removed;
  }

  get count(): number {
    return this.size;
  }
}
