import type { StoredMessage } from '../../src/domain/message.js';
import { offsetOfSerial, type HistoryEntry, type HistoryQuery } from './history-entry.js';

/** The messages a log record's value carries, in order (for entries kept by reference). */
export type MessagesOf = (value: Uint8Array) => StoredMessage[];

// The numbers of one entry, interleaved in a chunk (FIELDS doubles an entry).
const SERIAL = 0;
const TIMESTAMP = 1;
const PARTITION = 2;
/** byte offset of the record's value in the entry's reference (an ArrayBuffer); -1: the reference is the message itself */
const OFFSET = 3;
const LENGTH = 4;
/** the message's index among its record's messages */
const INDEX = 5;
/** the entry's reference: refs[REF - refsBase] */
const REF = 6;
const FIELDS = 7;
/**
 * 128 entries (7 KiB): a channel's numbers cost at most two chunks more than its live entries.
 * With 1,024 (57 KiB), every channel that had seen 512 messages kept a 57 KiB chunk however few it
 * held, and a soak of 1,000 channels at 2 messages a second grew by 60 MB after 9 minutes.
 */
const CHUNK_BITS = 7;
/** entries a chunk holds */
const CHUNK = 1 << CHUNK_BITS;
/** Where entry i's numbers start in its chunk. */
const atOf = (i: number): number => (i & (CHUNK - 1)) * FIELDS;

/** A chunk of entry numbers: a JavaScript array of doubles, on the heap (no external memory). */
const newChunk = (length: number): number[] => new Array<number>(length).fill(0.5);

/**
 * Chunks of entry numbers that evicted entries gave back, for the next ones: in a steady state
 * the tail allocates nothing. Bounded, so a burst's memory goes back after it.
 */
class ChunkPool {
  private readonly free: number[][] = [];
  constructor(private readonly max = 256) {}

  take(): number[] {
    return this.free.pop() ?? newChunk(CHUNK * FIELDS);
  }

  give(chunk: number[]): void {
    if (chunk.length === CHUNK * FIELDS && this.free.length < this.max) this.free.push(chunk);
  }
}

/**
 * One channel's entries, oldest first. The numbers of an entry are interleaved in fixed-size
 * chunks (an entry's numbers share a cache line; writing a double costs no write barrier and no
 * growth of seven JavaScript arrays; evicted chunks are reused), and the references are in one
 * array. The chunks are arrays of doubles rather than Float64Arrays: a Float64Array's memory is
 * external to the JavaScript heap, and its growth made V8 run more full collections.
 *
 * A message kept by reference costs no JavaScript object of its own, only its slots here and its
 * share of the log record bytes it came in (which it shares with the records around it). Two
 * minutes of a busy service are millions of messages; as objects they made the garbage collector
 * the largest cost of publishing.
 */
class ChannelTail {
  /** index of the oldest live entry; entries before it are evicted */
  start = 0;
  /** index of the next entry */
  end = 0;
  /** chunks[k] holds entries (base + k) * CHUNK onwards */
  private readonly chunks: number[][] = [];
  private base = 0;
  /**
   * The entries' references, each once: consecutive entries whose values share an ArrayBuffer
   * (the log records of a few seconds do) share one slot. A reference is the ArrayBuffer holding
   * the record's value, or the message itself (OFFSET -1). Slot r is refs[r - refsBase].
   */
  private refs: (ArrayBufferLike | StoredMessage | undefined)[] = [];
  private refsBase = 0;
  /** client-supplied message id -> timestamp, for idempotent publishing */
  readonly ids = new Map<string, number>();
  /** the indexed ids in arrival order, for eviction */
  readonly idOrder: string[] = [];
  idStart = 0;

  constructor(private readonly pool: ChunkPool) {}

  get size(): number {
    return this.end - this.start;
  }

  /** Entries its chunks have room for (live ones, evicted ones not yet given back, free slots). */
  get capacity(): number {
    let slots = 0;
    for (const chunk of this.chunks) slots += chunk.length;
    return slots / FIELDS;
  }

  /** The chunk holding entry i (its numbers are at atOf(i) in it). */
  private chunkOf(i: number): number[] {
    return this.chunks[(i >> CHUNK_BITS) - this.base];
  }

  field(i: number, field: number): number {
    return this.chunkOf(i)[atOf(i) + field];
  }

  serial(i: number): number {
    return this.field(i, SERIAL);
  }

  timestamp(i: number): number {
    return this.field(i, TIMESTAMP);
  }

  ref(i: number): ArrayBufferLike | StoredMessage | undefined {
    return this.refs[this.field(i, REF) - this.refsBase];
  }

  lastSerial(): number | undefined {
    return this.size > 0 ? this.serial(this.end - 1) : undefined;
  }

  push(serial: number, timestamp: number, partition: number, ref: ArrayBufferLike | StoredMessage, offset: number, length: number, index: number): void {
    const i = this.end;
    const at = atOf(i);
    let chunk = this.chunkOf(i);
    // A new channel's first chunk starts small and doubles (most channels hold a few messages);
    // later chunks are whole ones, from the pool.
    if (chunk === undefined) this.chunks.push((chunk = i === 0 ? newChunk(8 * FIELDS) : this.pool.take()));
    else if (at === chunk.length) {
      const bigger = newChunk(Math.min(chunk.length * 2, CHUNK * FIELDS));
      for (let j = 0; j < chunk.length; j++) bigger[j] = chunk[j];
      this.chunks[this.chunks.length - 1] = chunk = bigger;
    }
    chunk[at + SERIAL] = serial;
    chunk[at + TIMESTAMP] = timestamp;
    chunk[at + PARTITION] = partition;
    chunk[at + OFFSET] = offset;
    chunk[at + LENGTH] = length;
    chunk[at + INDEX] = index;
    const refs = this.refs;
    if (refs.length === 0 || refs[refs.length - 1] !== ref) refs.push(ref);
    chunk[at + REF] = this.refsBase + refs.length - 1;
    this.end = i + 1;
  }

  /** Evicts the oldest entry. */
  shift(): void {
    const ref = this.field(this.start, REF);
    this.start++;
    // Let go of the bytes now, unless the next entry shares them.
    if (this.start === this.end || this.field(this.start, REF) !== ref) this.refs[ref - this.refsBase] = undefined;
    // A chunk whose entries are all evicted goes back to the pool.
    while ((this.start >> CHUNK_BITS) > this.base) {
      this.pool.give(this.chunks.shift()!);
      this.base++;
    }
  }

  /** Gives its chunks back to the pool (the channel is gone from the tail). */
  release(): void {
    for (const chunk of this.chunks.splice(0)) this.pool.give(chunk);
  }

  /** Drops evicted slots once they are the larger part of the references and ids. */
  compact(): void {
    // References before the oldest entry's are all let go of.
    const evicted = (this.start < this.end ? this.field(this.start, REF) : this.refsBase + this.refs.length) - this.refsBase;
    if (evicted > 1024 && evicted * 2 > this.refs.length) {
      this.refs = this.refs.slice(evicted);
      this.refsBase += evicted;
    }
    if (this.idStart > 1024 && this.idStart * 2 > this.idOrder.length) {
      this.idOrder.splice(0, this.idStart);
      this.idStart = 0;
    }
  }

  /** The entry's numbers and reference, for reading: partition, offset, length, index. */
  entry(i: number): { serial: number; partition: number; offset: number; length: number; index: number; ref: ArrayBufferLike | StoredMessage | undefined } {
    const chunk = this.chunkOf(i);
    const at = atOf(i);
    return {
      serial: chunk[at + SERIAL],
      partition: chunk[at + PARTITION],
      offset: chunk[at + OFFSET],
      length: chunk[at + LENGTH],
      index: chunk[at + INDEX],
      ref: this.ref(i),
    };
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
  private readonly pool = new ChunkPool();
  private size = 0;
  /** Entries older than the window the last evict() kept for a store that did not hold them yet. */
  keptPastWindow = 0;

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
    if (!tail) channels.set(channel, (tail = new ChannelTail(this.pool)));
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
    tail.push(serial, timestamp, partition, ref, offset, length, index);
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

  /** Whether the channel's tail holds the entry with this serial. */
  holds(appId: string, channel: string, serial: number): boolean {
    const tail = this.channel(appId, channel);
    if (!tail) return false;
    // Serials ascend in a channel's tail.
    let lo = tail.start;
    let hi = tail.end - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = tail.serial(mid);
      if (at === serial) return true;
      if (at < serial) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }

  /** Timestamp of a message with this (client-supplied) id on the channel, if one is in the tail. */
  idSeenAt(appId: string, channel: string, id: string): number | undefined {
    return this.channel(appId, channel)?.ids.get(id);
  }

  query(q: HistoryQuery): HistoryEntry[] {
    const tail = this.channel(q.appId, q.channel);
    if (!tail) return [];
    const picked: number[] = [];
    if (q.direction === 'backwards') {
      for (let i = tail.end - 1; i >= tail.start && picked.length < q.limit; i--) {
        if (q.after !== undefined && tail.serial(i) >= q.after) continue;
        const ts = tail.timestamp(i);
        if (ts > q.end || ts < q.start) continue;
        picked.push(i);
      }
    } else {
      for (let i = tail.start; i < tail.end && picked.length < q.limit; i++) {
        if (q.after !== undefined && tail.serial(i) <= q.after) continue;
        const ts = tail.timestamp(i);
        if (ts < q.start || ts > q.end) continue;
        picked.push(i);
      }
    }
    // Consecutive messages of one record decode it once.
    let lastRef: unknown;
    let lastOffset = -1;
    let lastMessages: StoredMessage[] = [];
    return picked.map((i) => {
      const e = tail.entry(i);
      let message: StoredMessage;
      if (e.offset === -1) {
        message = e.ref as StoredMessage;
      } else {
        if (e.ref !== lastRef || e.offset !== lastOffset) {
          lastRef = e.ref;
          lastOffset = e.offset;
          lastMessages = this.messagesOf!(new Uint8Array(e.ref as ArrayBufferLike, e.offset, e.length));
        }
        message = lastMessages[e.index];
      }
      return { appId: q.appId, channel: q.channel, serial: e.serial, partition: e.partition, message };
    });
  }

  /** Oldest timestamp the tail is complete from (entries older than this may be evicted). */
  horizon(now: number): number {
    return now - this.windowMs;
  }

  /**
   * Drops entries older than the window. With `unstoredFrom` (per partition, the first log offset
   * the store does not hold yet), older entries from there on stay, up to `maxKept` of them: a read
   * merges this tail with the store, so an entry leaves only once the store can answer for it.
   */
  evict(now: number, unstoredFrom?: (partition: number) => number, maxKept = 0): number {
    const cutoff = this.horizon(now);
    let removed = 0;
    let keepable = unstoredFrom ? maxKept : 0;
    this.keptPastWindow = 0;
    for (const [appId, channels] of this.apps) {
      for (const [name, tail] of channels) {
        const before = tail.start;
        while (tail.start < tail.end && tail.timestamp(tail.start) < cutoff) {
          // A channel's entries ascend in offset (one partition): past the first kept, all are.
          if (keepable > 0 && offsetOfSerial(tail.serial(tail.start)) >= unstoredFrom!(tail.field(tail.start, PARTITION))) {
            let i = tail.start;
            while (i < tail.end && tail.timestamp(i) < cutoff) i++;
            const kept = i - tail.start;
            if (kept <= keepable) {
              keepable -= kept;
              this.keptPastWindow += kept;
              break;
            }
            keepable = 0;
          }
          tail.shift();
        }
        while (tail.idStart < tail.idOrder.length) {
          const id = tail.idOrder[tail.idStart];
          const seen = tail.ids.get(id);
          if (seen !== undefined && seen >= cutoff) break;
          tail.ids.delete(id);
          tail.idStart++;
        }
        removed += tail.start - before;
        if (tail.size === 0 && tail.ids.size === 0) {
          tail.release();
          channels.delete(name);
        } else {
          tail.compact();
        }
      }
      if (channels.size === 0) this.apps.delete(appId);
    }
    this.size -= removed;
    return removed;
  }

  get count(): number {
    return this.size;
  }

  /** Entries a channel's chunks have room for: what its numbers cost, whatever it holds now. */
  capacityOf(appId: string, channel: string): number {
    return this.apps.get(appId)?.get(channel)?.capacity ?? 0;
  }
}
