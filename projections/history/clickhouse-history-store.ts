import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import type { Checkpoint } from '../../src/log/port.js';
import type { StoredMessage } from '../../src/domain/message.js';
import { messageToWire } from '../../src/codec/message-wire.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { ClickHouseSession, type ClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlDate, sqlIdentifier, sqlJoin, sqlTable, type Sql } from '../../src/stores/clickhouse/sql.js';
import type { HistoryEntry, HistoryQuery } from './history-entry.js';
import type { HistoryStore, LogMark, PersistedEntry } from './history-store.js';
import { expiryDay } from './retention.js';

export interface ClickHouseHistoryStoreOptions {
  /** A client the caller owns (and closes), or a URL for a client this store owns. */
  client?: ClickHouseClient;
  url?: string;
  database?: string;
  /** Prepended to table names; tests use a unique prefix each. */
  tablePrefix?: string;
  /** Whose checkpoint this is (one projection, one name). */
  consumer?: string;
  clock?: Clock;
  /**
   * Told of a row ClickHouse refuses as malformed (refusedData below), which is then left out:
   * it can never be stored, and retrying it would hold back every app's persisted history.
   */
  onRefused?: (row: RefusedRow, err: Error) => void;
}

/** Where a refused row came from (no message content: it goes to the log). */
export interface RefusedRow {
  appId: string;
  channel: string;
  serial: number;
  partition: number;
  id: string;
}

/**
 * ClickHouse's codes for a value it cannot read (the same in 18.16 and current releases): an
 * insert refused with one of them is refused for its data, the same every time, never for an
 * outage. CANNOT_PARSE_TEXT 6, CANNOT_PARSE_ESCAPE_SEQUENCE 25, CANNOT_PARSE_QUOTED_STRING 26,
 * CANNOT_PARSE_INPUT_ASSERTION_FAILED 27, CANNOT_PARSE_DATE 38, CANNOT_PARSE_DATETIME 41,
 * TYPE_MISMATCH 53, ARGUMENT_OUT_OF_BOUND 69, CANNOT_CONVERT_TYPE 70, CANNOT_PARSE_NUMBER 72,
 * INCORRECT_DATA 117, TOO_LARGE_STRING_SIZE 131.
 */
const DATA_REFUSED = new Set([6, 25, 26, 27, 38, 41, 53, 69, 70, 72, 117, 131]);

/** Whether an insert failed for its data (18.16's message has no type name, so the client gives no code: read it from the text). */
export function refusedData(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  const n = typeof code === 'string' && /^\d+$/.test(code) ? Number(code) : Number(/^Code: (\d+)[,.]/.exec((err as Error)?.message ?? '')?.[1]);
  return DATA_REFUSED.has(n);
}

/**
 * The message's fields as columns beside the MessagePack (issue 14: `SELECT ... WHERE name = 'order'`),
 * as a JSON reader gets them: binary data as base64 with `base64` appended to the encoding, JSON
 * data as its text. Absent fields are empty strings (action 0: not a presence entry). The reads of
 * the service use `message` alone. Rows an older release wrote have them empty.
 */
const FIELD_COLUMNS = [
  ['id', 'String'],
  ['name', 'String'],
  ['clientId', 'String'],
  ['connectionId', 'String'],
  ['data', 'String'],
  ['encoding', 'String'],
  ['action', 'UInt8'],
] as const;

// A lone surrogate (U+D800 to U+DFFF unpaired) has no UTF-8 form, and ClickHouse refuses a lone
// high one spelt in JSONEachRow (18.16, Code 25: "missing second part of surrogate pair"): the
// whole insert fails, every time, and the writer would retry that batch for ever, holding back
// every app's persisted history. The service refuses such text where clients send it; should one
// reach the log anyway, its columns hold U+FFFD in its place (the `message` column keeps the
// message exactly: MessagePack, base64). String.prototype.toWellFormed: Node 20, not in the ES2022 lib.
const text = (s: string): string => (s as string & { toWellFormed(): string }).toWellFormed();

function fieldColumns(m: StoredMessage): Record<string, string | number> {
  const wire = messageToWire(m, 'json');
  const data = wire.data === undefined ? '' : typeof wire.data === 'string' ? wire.data : JSON.stringify(wire.data);
  return {
    id: text(m.id),
    name: text(m.name ?? ''),
    clientId: text(m.clientId ?? ''),
    connectionId: text(m.connectionId ?? ''),
    data: text(data),
    encoding: typeof wire.encoding === 'string' ? text(wire.encoding) : '',
    action: m.action ?? 0,
  };
}

interface MessageRow {
  serial: string | number;
  partition: number;
  message: string;
}

// Aliases differ from column names: ClickHouse resolves a name to an alias first, even inside
// another aggregate (18.16: "Aggregate function max(version) is found inside another").
interface StateRow {
  consumer: string;
  latest_checkpoint: string;
  latest_marks: string;
  latest_version: string | number;
}

/**
 * Persisted history in ClickHouse, in the SQL that 18.16 and current releases share (ARCHITECTURE).
 * Rows: a ReplacingMergeTree partitioned by expiry day, so retention drops whole partitions; a
 * replayed row has the same sorting key, and reads drop duplicates with LIMIT 1 BY serial, which
 * also holds for a row replayed into another day after a retention change (FINAL would not).
 * Progress: one row per partition and write, holding that partition's checkpoint and marks under
 * `<consumer>#<partition>`, latest version wins; the rows of one write are inserted together, so
 * checkpoint and marks never disagree. A row per partition, not one for all: the instances that
 * share a topic's partitions (a consumer group) each write the partitions they hold, and none
 * overwrites another's (an older release's single row under `<consumer>` is read beneath them).
 */
export class ClickHouseHistoryStore implements HistoryStore {
  readonly kind = 'clickhouse';
  private readonly ch: ClickHouseSession;
  private readonly database: string;
  private readonly messagesTable: string;
  private readonly stateTable: string;
  private readonly messages: Sql;
  private readonly state: Sql;
  private readonly consumer: string;
  private readonly clock: Clock;
  private readonly onRefused: ClickHouseHistoryStoreOptions['onRefused'];
  private checkpoint: Checkpoint = new Map();
  private version = 0;

  constructor(options: ClickHouseHistoryStoreOptions) {
    this.ch = new ClickHouseSession(options, 'ClickHouseHistoryStore');
    this.database = options.database ?? 'default';
    const prefix = options.tablePrefix ?? '';
    this.messagesTable = `${prefix}history_messages`;
    this.stateTable = `${prefix}projection_state`;
    this.messages = sqlTable(this.database, this.messagesTable);
    this.state = sqlTable(this.database, this.stateTable);
    this.consumer = options.consumer ?? 'history';
    this.clock = options.clock ?? systemClock;
    this.onRefused = options.onRefused;
  }

  async init(): Promise<void> {
    if (this.database !== 'default') {
      await this.ch.command(sql`CREATE DATABASE IF NOT EXISTS ${sqlIdentifier(this.database)}`);
    }
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.messages} (
        app_id String, channel String, serial UInt64, partition UInt32, ts UInt64, expires_on Date, message String,
        ${sqlJoin(FIELD_COLUMNS.map(([name, type]) => sql`${sqlIdentifier(name)} ${type === 'String' ? sql`String` : sql`UInt8`}`), sql`, `)}
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY expires_on
      ORDER BY (app_id, channel, ts, serial)`);
    // A table an older release made has no field columns (18.16 has no ADD COLUMN IF NOT EXISTS).
    const present = new Set(
      (await this.ch.select<{ name: string }>(sql`SELECT name FROM system.columns WHERE database = ${this.database} AND table = ${this.messagesTable}`)).map((c) => c.name),
    );
    for (const [name, type] of FIELD_COLUMNS.filter(([name]) => !present.has(name))) {
      await this.ch.command(sql`ALTER TABLE ${this.messages} ADD COLUMN ${sqlIdentifier(name)} ${type === 'String' ? sql`String` : sql`UInt8`}`);
    }
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.state} (
        consumer String, version UInt64, checkpoint String, marks String
      ) ENGINE = ReplacingMergeTree(version)
      ORDER BY consumer`);
    const state = await this.loadState();
    this.checkpoint = state.checkpoint;
    this.version = state.version;
  }

  async write(rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]): Promise<void> {
    // Rows first: a crash in between replays rows the table already has, and never loses any.
    if (rows.length > 0) {
      await this.insertRows(
        rows,
        rows.map((r) => ({
          app_id: text(r.appId),
          channel: text(r.channel),
          serial: r.serial,
          partition: r.partition,
          ts: r.message.timestamp,
          expires_on: expiryDay(r.message.timestamp, r.retentionHours),
          message: Buffer.from(packValue(r.message)).toString('base64'),
          ...fieldColumns(r.message),
        })),
      );
    }
    // Partitions missing from this checkpoint keep their stored offsets, as in the SQLite store.
    const version = Math.max(this.version + 1, this.clock.now() * 1000);
    await this.ch.client.insert({
      table: this.state.text,
      format: 'JSONEachRow',
      values: [...checkpoint].map(([partition, offset]) => ({
        consumer: `${this.consumer}#${partition}`,
        version,
        checkpoint: JSON.stringify([[partition, offset]]),
        marks: JSON.stringify(marks.filter((m) => m.partition === partition).map((m) => [m.partition, m.offset, m.timestamp])),
      })),
    });
    this.checkpoint = new Map([...this.checkpoint, ...checkpoint]);
    this.version = version;
  }

  /**
   * Inserts the rows. An insert ClickHouse refuses for its data (refusedData) is split in halves
   * until the rows it refuses are alone; those are left out (onRefused) and the others stored, so
   * one malformed row costs a few more inserts, once, instead of stalling the writer. Any other
   * failure (an outage) is thrown, and the caller writes the rows again later: halves already
   * inserted are then replayed, which reads drop (LIMIT 1 BY serial).
   */
  private async insertRows(rows: PersistedEntry[], values: Record<string, unknown>[]): Promise<void> {
    try {
      await this.ch.client.insert({ table: this.messages.text, format: 'JSONEachRow', values });
    } catch (err) {
      if (!refusedData(err)) throw err;
      if (rows.length === 1) {
        const [r] = rows;
        this.onRefused?.({ appId: r.appId, channel: r.channel, serial: r.serial, partition: r.partition, id: r.message.id }, err as Error);
        return;
      }
      const half = rows.length >> 1;
      await this.insertRows(rows.slice(0, half), values.slice(0, half));
      await this.insertRows(rows.slice(half), values.slice(half));
    }
  }

  async loadCheckpoint(): Promise<Checkpoint> {
    return (await this.loadState()).checkpoint;
  }

  async loadMarks(): Promise<LogMark[]> {
    return (await this.loadState()).marks;
  }

  private async loadState(): Promise<{ checkpoint: Checkpoint; marks: LogMark[]; version: number }> {
    const rows = await this.ch.select<StateRow>(sql`
      SELECT consumer, argMax(checkpoint, version) AS latest_checkpoint, argMax(marks, version) AS latest_marks, max(version) AS latest_version
      FROM ${this.state} WHERE consumer = ${this.consumer} OR startsWith(consumer, ${`${this.consumer}#`})
      GROUP BY consumer`);
    // The older single row first: a partition's own row, where there is one, replaces what it says.
    rows.sort((a, b) => Number(a.consumer !== this.consumer) - Number(b.consumer !== this.consumer));
    const checkpoint: Checkpoint = new Map();
    const marks = new Map<number, LogMark[]>();
    let version = 0;
    for (const row of rows) {
      version = Math.max(version, Number(row.latest_version));
      const own = new Map(JSON.parse(row.latest_checkpoint) as [number, number][]);
      const ownMarks = (JSON.parse(row.latest_marks) as [number, number, number][]).map(([partition, offset, timestamp]) => ({ partition, offset, timestamp }));
      for (const [partition, offset] of own) {
        checkpoint.set(partition, offset);
        marks.set(partition, ownMarks.filter((m) => m.partition === partition));
      }
    }
    return { checkpoint, marks: [...marks.values()].flat().sort((a, b) => a.offset - b.offset), version };
  }

  async query(q: HistoryQuery): Promise<HistoryEntry[]> {
    const backwards = q.direction === 'backwards';
    const where = [
      sql`app_id = ${q.appId}`,
      sql`channel = ${q.channel}`,
      // Always a time lower bound: 18.16 would otherwise scan the whole channel.
      sql`ts >= ${Math.max(0, Math.ceil(q.start))}`,
      sql`ts <= ${Math.max(0, Math.floor(q.end))}`,
    ];
    if (q.after !== undefined) where.push(backwards ? sql`serial < ${q.after}` : sql`serial > ${q.after}`);
    const rows = await this.ch.select<MessageRow>(sql`
      SELECT serial, partition, message FROM ${this.messages}
      WHERE ${sqlJoin(where, sql` AND `)}
      ORDER BY serial ${backwards ? sql`DESC` : sql`ASC`}
      LIMIT 1 BY serial
      LIMIT ${q.limit}`);
    return rows.map((r) => ({
      appId: q.appId,
      channel: q.channel,
      serial: Number(r.serial),
      partition: Number(r.partition),
      message: unpackValue(Buffer.from(r.message, 'base64')) as StoredMessage,
    }));
  }

  async dropExpired(now: number): Promise<number> {
    const today = new Date(now).toISOString().slice(0, 10);
    const parts = await this.ch.select<{ partition: string }>(sql`
      SELECT DISTINCT partition FROM system.parts
      WHERE database = ${this.database} AND table = ${this.messagesTable} AND active AND partition < ${today}
      ORDER BY partition`);
    for (const { partition } of parts) {
      // 18.16 and current releases both take the partition key's value as a literal.
      await this.ch.command(sql`ALTER TABLE ${this.messages} DROP PARTITION ${sqlDate(partition)}`);
    }
    return parts.length;
  }

  async close(): Promise<void> {
    await this.ch.close();
  }
}
