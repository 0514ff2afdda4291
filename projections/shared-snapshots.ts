import type { ClickHouseClient } from '../src/stores/clickhouse/client.js';
import { ClickHouseSession } from '../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../src/stores/clickhouse/sql.js';

/**
 * Snapshots every instance can read (README: A bounded start): production mode keeps the
 * in-memory projections' snapshots in ClickHouse as well as in DATA_DIR, so an instance with an
 * empty DATA_DIR (scaled out, replaced) starts from the newest one and reads only the log after it.
 * SnapshotStore (projections/snapshots.ts) decides what is written and checks what is read; this
 * is where the bytes go: one row per snapshot, the same bytes as a local file (a header line and
 * the state), base64 in a String column (JSONEachRow, the one format 18.16 and current releases share).
 */
export interface SharedSnapshotEntry {
  id: string;
  /** The sum of the offsets the snapshot covers, over every topic and partition (how far into the log it is). */
  covered: number;
  writtenAt: number;
  instance: string;
}

export interface SharedSnapshotRow extends SharedSnapshotEntry {
  name: string;
  log: string;
  version: number;
}

export interface SharedSnapshots {
  /** Where they are, for the logs (`clickhouse:<table>`). */
  readonly where: string;
  /** The largest snapshot (its bytes, header included) the store takes; a larger one is not written. */
  readonly maxBytes: number;
  /** A projection's snapshots of a log, the furthest into it first. */
  list(name: string, log: string): Promise<SharedSnapshotEntry[]>;
  /** A snapshot's bytes, or undefined when it is gone (pruned meanwhile). */
  read(id: string): Promise<Buffer | undefined>;
  write(row: SharedSnapshotRow, bytes: Buffer): Promise<void>;
  /**
   * Removes all but the `keep` newest written of a projection's snapshots of a log (not the
   * furthest into it: after a log reset the old log's go further, and a start refuses them).
   */
  prune(name: string, log: string, keep: number): Promise<void>;
}

/** The shared snapshots in a ClickHouse table, `<prefix>projection_snapshots`, made at first use. */
export class ClickHouseSharedSnapshots implements SharedSnapshots {
  readonly where: string;
  readonly maxBytes: number;
  private readonly ch: ClickHouseSession;
  private readonly table;
  private ready: Promise<void> | undefined;

  constructor(options: { client: ClickHouseClient; tablePrefix?: string; maxBytes: number }) {
    this.ch = new ClickHouseSession({ client: options.client }, 'ClickHouseSharedSnapshots');
    const name = `${options.tablePrefix ?? ''}projection_snapshots`;
    this.table = sqlTable('default', name);
    this.where = `clickhouse:${name}`;
    this.maxBytes = options.maxBytes;
  }

  private init(): Promise<void> {
    this.ready ??= this.ch
      .command(
        sql`CREATE TABLE IF NOT EXISTS ${this.table} (
          name String, log String, version UInt32, covered UInt64, written_at UInt64, id String, instance String, blob String
        ) ENGINE = MergeTree ORDER BY (name, log, covered, id)`,
      )
      .catch((err: unknown) => {
        this.ready = undefined; // tried again at the next use
        throw err;
      });
    return this.ready;
  }

  async list(name: string, log: string): Promise<SharedSnapshotEntry[]> {
    await this.init();
    // Ordered by the columns, not by their text (an alias named `covered` ordered "40" before "300").
    const rows = await this.ch.select<{ id: string; coveredText: string; writtenAt: string; instance: string }>(
      sql`SELECT id, toString(covered) AS coveredText, toString(written_at) AS writtenAt, instance FROM ${this.table}
          WHERE name = ${name} AND log = ${log} ORDER BY covered DESC, written_at DESC LIMIT 100`,
    );
    return rows.map((r) => ({ id: r.id, covered: Number(r.coveredText), writtenAt: Number(r.writtenAt), instance: r.instance }));
  }

  async read(id: string): Promise<Buffer | undefined> {
    await this.init();
    const rows = await this.ch.select<{ blob: string }>(sql`SELECT blob FROM ${this.table} WHERE id = ${id} LIMIT 1`);
    return rows[0] && Buffer.from(rows[0].blob, 'base64');
  }

  async write(row: SharedSnapshotRow, bytes: Buffer): Promise<void> {
    await this.init();
    await this.ch.client.insert({
      table: this.table.text,
      format: 'JSONEachRow',
      values: [{ name: row.name, log: row.log, version: row.version, covered: row.covered, written_at: row.writtenAt, id: row.id, instance: row.instance, blob: bytes.toString('base64') }],
    });
  }

  async prune(name: string, log: string, keep: number): Promise<void> {
    const old = (await this.list(name, log))
      .sort((x, y) => y.writtenAt - x.writtenAt)
      .slice(keep)
      .map((e) => e.id);
    // A mutation (18.16 has no lightweight DELETE), at most one per shared write: they are rare.
    if (old.length > 0) await this.ch.command(sql`ALTER TABLE ${this.table} DELETE WHERE id IN ${old}`);
  }
}
