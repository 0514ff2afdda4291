import { Worker } from 'node:worker_threads';

/** A row of log_segments: the consecutive records of one append in one partition. */
export interface Segment {
  /** the topic's partition as numbered in log_streams (the row's id range) */
  stream: number;
  partition: number;
  firstOffset: number;
  count: number;
  /** newest timestamp among the records (retention) */
  lastTs: number;
  /** MessagePack array of [key, timestamp, value]; its own ArrayBuffer, moved to the writer */
  records: Uint8Array;
}

interface Pending {
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Commits batches of log rows on a worker thread (sqlite-writer.worker.mjs). Batches commit in
 * the order they were sent, and their promises settle in that order.
 */
export class SqliteWriter {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private failure: Error | undefined;

  /**
   * `insertSegment`: the INSERT of one log_segments row, with a Segment's fields and `topic` as
   * named parameters (embedded-log.ts owns the schema).
   */
  constructor(path: string, insertSegment: string) {
    // Plain JavaScript: no loader flags (--import tsx, ...) are inherited, so none can break it.
    this.worker = new Worker(new URL('./sqlite-writer.worker.mjs', import.meta.url), { workerData: { path, insertSegment }, execArgv: [] });
    this.worker.on('message', (m: { id: number; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error));
      else p.resolve();
    });
    const fail = (err: Error): void => {
      this.failure = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => {
      if (this.pending.size > 0) fail(new Error(`the log writer thread exited (code ${code})`));
    });
  }

  /** `message` gets the id its answer will carry. */
  private send(message: { id?: number; [field: string]: unknown }, transfer: ArrayBuffer[] = []): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const id = (message.id = this.nextId++);
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage(message, transfer);
    });
  }

  /**
   * Resolves once the segments are committed and synced to disk. Their buffers move to the writer
   * thread (no copy) when each is a whole ArrayBuffer; the caller must not use them afterwards.
   */
  write(topic: string, segments: Segment[]): Promise<void> {
    const transfer: ArrayBuffer[] = [];
    for (const { records: b } of segments) {
      if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && b.buffer instanceof ArrayBuffer) transfer.push(b.buffer);
    }
    return this.send({ topic, segments }, transfer);
  }

  async close(): Promise<void> {
    try {
      await this.send({ close: true });
    } finally {
      await this.worker.terminate();
    }
  }
}
