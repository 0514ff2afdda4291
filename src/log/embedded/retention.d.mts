// Types of retention.mjs (the embedded log's retention, a chunk at a time).
import type Database from '../../stores/sqlite/driver.mjs';

export declare const RETAIN_CHUNK_ROWS: number;
export declare function retentionChunk(
  db: Database.Database,
  sql: { oldest: string; newest: string; deleteBefore: string },
): (stream: number, cutoff: number) => { deleted: number; more: boolean };
