import { Worker } from 'node:worker_threads';

/** A row of log_records: topic, partition, offset, key, ts, value. */
export type LogRow = [string, number, number, string, number, Uint8Array];

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

  constructor(path: string) {
    // Plain JavaScript: no loader flags (--import tsx, ...) are inherited, so none can break it.
    this.worker = new Worker(new URL('./sqlite-writer.worker.mjs', import.meta.url), { workerData: { path }, execArgv: [] });
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

  private send(message: object): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, ...message });
    });
  }

  /** Resolves once the rows are committed and synced to disk. */
  write(rows: LogRow[]): Promise<void> {
    return this.send({ rows });
  }

  async close(): Promise<void> {
    try {
      await this.send({ close: true });
    } finally {
      await this.worker.terminate();
    }
  }
}
