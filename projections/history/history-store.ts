import type { Checkpoint } from '../../src/log/port.js';
import type { HistoryEntry, HistoryQuery } from './history-entry.js';

/**
 * Where persisted history lives (embedded SQLite, or ClickHouse). The checkpoint is written with
 * the rows, so a crash between the two can only replay rows the store already has; the store
 * treats a replayed row (same app, channel, serial) as the same row.
 */
export interface HistoryStore {
  readonly kind: string;
  init(): Promise<void>;
  /**
   * Durably writes rows (with each row's retention) and then the checkpoint. The checkpoint's
   * partitions get these offsets and these marks; the others keep theirs (instances sharing a
   * topic's partitions each write the ones they hold).
   */
  write(rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]): Promise<void>;
  loadCheckpoint(): Promise<Checkpoint>;
  /** Positions with their timestamps, recent ones, to restart the in-memory tail from. */
  loadMarks(): Promise<LogMark[]>;
  query(q: HistoryQuery): Promise<HistoryEntry[]>;
  /** Drops whole days past every retention; returns how many days were dropped. */
  dropExpired(now: number): Promise<number>;
  close(): Promise<void>;
}

export interface PersistedEntry extends HistoryEntry {
  retentionHours: number;
}

export interface LogMark {
  partition: number;
  offset: number;
  timestamp: number;
}
