import { Worker } from 'node:worker_threads';
import { packedBound, packSegment, packSegmentInto, type Segment } from './segment.js';

/** The statements of retention.mjs (embedded-log.ts owns the schema). */
export interface RetentionSql {
  oldest: string;
  newest: string;
  deleteBefore: string;
}

/** A segment as the writer thread receives it: packed, in the ring (at, length) or in a buffer of its own. */
interface SentSegment {
  stream: number;
  partition: number;
  firstOffset: number;
  count: number;
  lastTs: number;
  at?: number;
  length?: number;
  records?: Uint8Array;
}

interface Pending {
  resolve: (deleted?: number) => void;
  reject: (err: Error) => void;
  /** where this commit's bytes end in the ring: freed when it is answered */
  ringEnd: number | undefined;
}

/**
 * Memory shared with the writer thread, used as a queue of packed segments: a commit's segments
 * are written here and their place sent, instead of a buffer per commit moved to the writer
 * (allocating that buffer and moving it cost the event loop more than the copy). Commits are
 * answered in order, so space is freed in the order it was taken.
 */
class SegmentRing {
  readonly shared: SharedArrayBuffer;
  private readonly bytes: Buffer;
  /** next free byte */
  private head = 0;
  /** first byte still in use (a commit not answered yet) */
  private tail = 0;
  private inUse = 0;

  constructor(size: number) {
    this.shared = new SharedArrayBuffer(size);
    this.bytes = Buffer.from(this.shared);
  }

  /**
   * Packs the segments' records one after the other and returns where each is, or undefined when
   * there is no room (the caller sends them in buffers of their own).
   */
  pack(segments: Segment[]): { places: { at: number; length: number }[]; end: number } | undefined {
    let bound = 0;
    for (const s of segments) bound += packedBound(s.records);
    let at = this.head;
    if (this.inUse > 0 && this.head <= this.tail) {
      // The free space is between head and tail.
      if (this.tail - this.head < bound) return undefined;
    } else if (this.bytes.length - this.head < bound) {
      // Not enough at the end: start again at the beginning, before the oldest bytes in use.
      if ((this.inUse > 0 ? this.tail : this.bytes.length) < bound) return undefined;
      at = 0;
    }
    const places = segments.map((s) => {
      const end = packSegmentInto(s.records, this.bytes, at);
      const place = { at, length: end - at };
      at = end;
      return place;
    });
    if (this.inUse === 0) this.tail = places[0].at;
    this.head = at;
    this.inUse++;
    return { places, end: at };
  }

  /** Frees the oldest commit's bytes (it ended at `end`). */
  free(end: number): void {
    this.inUse--;
    this.tail = end;
    if (this.inUse === 0) this.head = this.tail = 0;
  }
}

/**
 * Commits batches of log rows on a worker thread (sqlite-writer.worker.mjs). Batches commit in
 * the order they were sent, and their promises settle in that order.
 */
export class SqliteWriter {
  private readonly worker: Worker;
  private readonly ring: SegmentRing;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private failure: Error | undefined;
  private closing = false;

  /**
   * `insertSegment`: the INSERT of one log_segments row, with a Segment's fields (its records
   * packed) and `topic` as named parameters, and `chain` its links (chain.mjs); `lastChain`: the
   * SELECT of a stream's (@stream) newest chain (embedded-log.ts owns the schema).
   */
  constructor(path: string, insertSegment: string, lastChain: string, retention: RetentionSql, ringBytes = 4 * 1024 * 1024) {
    this.ring = new SegmentRing(ringBytes);
    // Plain JavaScript: no loader flags (--import tsx, ...) are inherited, so none can break it.
    this.worker = new Worker(new URL('./sqlite-writer.worker.mjs', import.meta.url), {
      workerData: { path, insertSegment, lastChain, retention, ring: this.ring.shared },
      execArgv: [],
    });
    this.worker.on('message', (m: { id: number; error?: string; deleted?: number }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (p.ringEnd !== undefined) this.ring.free(p.ringEnd);
      if (m.error) p.reject(new Error(m.error));
      else p.resolve(m.deleted);
    });
    const fail = (err: Error): void => {
      this.failure = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    this.worker.on('error', fail);
    // An exit that close() did not ask for fails what is in flight and every later write (a write
    // sent to a thread that is gone would never be answered). For good, not restarted: the thread
    // answers every SQLite error itself, so it only dies of what it cannot answer (out of memory,
    // a bug), maybe in the middle of a transaction whose lock its connection still holds in this
    // process; a new thread could not be trusted to take the lock, a new process can.
    this.worker.on('exit', (code) => {
      if (!this.closing) fail(new Error(`the log writer thread exited (code ${code})`));
    });
  }

  /** `message` gets the id its answer will carry (a retention's: the rows it deleted). */
  private send(message: { id?: number; [field: string]: unknown }, transfer: ArrayBuffer[] = [], ringEnd?: number): Promise<number | undefined> {
    const id = (message.id = this.nextId++);
    return new Promise<number | undefined>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ringEnd });
      this.worker.postMessage(message, transfer);
    });
  }

  /** Why the thread is gone (it exited or threw), if it is: no write will commit again. */
  get dead(): Error | undefined {
    return this.failure;
  }

  /**
   * Lets commits sent from now on run after a failed one (the thread fails every later commit
   * until told). The caller sends it once every commit it sent has been answered.
   */
  reset(): void {
    if (!this.failure) this.worker.postMessage({ reset: true });
  }

  /**
   * Deletes the expired rows at the start of each stream (retention.mjs), a chunk at a time between
   * commits; resolves with how many went. Commits sent meanwhile are not held up.
   */
  async retain(streams: number[], cutoff: number): Promise<number> {
    if (this.failure) throw this.failure;
    return (await this.send({ retain: { streams, cutoff } })) ?? 0;
  }

  /** Resolves once the segments are committed and synced to disk. */
  write(topic: string, segments: Segment[]): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    const sent: SentSegment[] = [];
    const packed = this.ring.pack(segments);
    if (packed) {
      segments.forEach(({ stream, partition, firstOffset, count, lastTs }, i) => {
        sent.push({ stream, partition, firstOffset, count, lastTs, at: packed.places[i].at, length: packed.places[i].length });
      });
      return this.send({ topic, segments: sent }, [], packed.end);
    }
    // Too large for the ring's free space: each segment in a buffer of its own, moved (not copied) to the writer.
    const transfer: ArrayBuffer[] = [];
    for (const { stream, partition, firstOffset, count, lastTs, records } of segments) {
      const bytes = packSegment(records);
      transfer.push(bytes.buffer as ArrayBuffer);
      sent.push({ stream, partition, firstOffset, count, lastTs, records: bytes });
    }
    return this.send({ topic, segments: sent }, transfer);
  }

  async close(): Promise<void> {
    this.closing = true;
    try {
      if (!this.failure) await this.send({ close: true });
    } finally {
      await this.worker.terminate();
      // A retention between two chunks when the thread closed: it stops there.
      for (const p of this.pending.values()) p.reject(new Error('the log is closed'));
      this.pending.clear();
    }
  }
}
