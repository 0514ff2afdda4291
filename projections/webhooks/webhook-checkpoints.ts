import Database from '../../src/stores/sqlite/driver.mjs';
import type { ClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { ClickHouseSession } from '../../src/stores/clickhouse/client.js';
import { sql, sqlTable } from '../../src/stores/clickhouse/sql.js';
import type { Checkpoint } from '../../src/log/port.js';

/**
 * Where each webhook rule's delivery resumes: per consumer (a rule, `<appId>/<ruleId>`), topic and
 * partition, the next offset to deliver. Saved only once what comes before it was delivered (at
 * least once). Embedded: SQLite in DATA_DIR; production: ClickHouse, shared by the instances,
 * since whichever holds a partition in the rule's consumer group resumes where the last left it.
 */
export interface WebhookCheckpointStore {
  readonly kind: string;
  init(): Promise<void>;
  /** Absent when the consumer never saved one (a rule new to this store). */
  load(consumer: string, topic: string): Promise<Checkpoint | undefined>;
  save(consumer: string, topic: string, positions: Checkpoint): Promise<void>;
  /**
   * Where a rule starts on a partition it has no checkpoint of: records `proposed` (the log's end
   * as an instance saw it when it first ran the rule) and answers the earliest proposal so far per
   * partition. Instances starting a rule at once each propose their end; the earliest wins on all
   * of them, so what was published between their starts is delivered, not skipped.
   */
  start(consumer: string, topic: string, proposed: Checkpoint): Promise<Checkpoint>;
  /** Drops what the consumer saved and where it started: a rule removed, so that one made later with its id starts afresh. */
  forget(consumer: string, topic: string): Promise<void>;
  close(): Promise<void>;
}

export class SqliteWebhookCheckpoints implements WebhookCheckpointStore {
  readonly kind = 'sqlite';
  private readonly db: InstanceType<typeof Database>;

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
  }

  async init(): Promise<void> {
    this.db.exec(`CREATE TABLE IF NOT EXISTS webhook_checkpoints (
      consumer TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
      PRIMARY KEY (consumer, topic, partition))`);
    this.db.exec(`CREATE TABLE IF NOT EXISTS webhook_starts (
      consumer TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
      PRIMARY KEY (consumer, topic, partition))`);
  }

  async start(consumer: string, topic: string, proposed: Checkpoint): Promise<Checkpoint> {
    const put = this.db.prepare('INSERT INTO webhook_starts (consumer, topic, partition, next_offset) VALUES (?, ?, ?, ?) ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = min(next_offset, excluded.next_offset)');
    this.db.transaction(() => {
      for (const [partition, next] of proposed) put.run(consumer, topic, partition, next);
    })();
    const rows = this.db.prepare('SELECT partition, next_offset FROM webhook_starts WHERE consumer = ? AND topic = ?').all(consumer, topic) as { partition: number; next_offset: number }[];
    return new Map(rows.map((r) => [r.partition, r.next_offset]));
  }

  async load(consumer: string, topic: string): Promise<Checkpoint | undefined> {
    const rows = this.db.prepare('SELECT partition, next_offset FROM webhook_checkpoints WHERE consumer = ? AND topic = ?').all(consumer, topic) as { partition: number; next_offset: number }[];
    return rows.length === 0 ? undefined : new Map(rows.map((r) => [r.partition, r.next_offset]));
  }

  async save(consumer: string, topic: string, positions: Checkpoint): Promise<void> {
    const put = this.db.prepare('INSERT INTO webhook_checkpoints (consumer, topic, partition, next_offset) VALUES (?, ?, ?, ?) ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = max(next_offset, excluded.next_offset)');
    this.db.transaction(() => {
      for (const [partition, next] of positions) put.run(consumer, topic, partition, next);
    })();
  }

  async forget(consumer: string, topic: string): Promise<void> {
    this.db.transaction(() => {
      for (const table of ['webhook_checkpoints', 'webhook_starts']) this.db.prepare(`DELETE FROM ${table} WHERE consumer = ? AND topic = ?`).run(consumer, topic);
    })();
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

const FORGET_POLL_MS = 50;
const FORGET_MAX_WAIT_MS = 10_000;

/** The ClickHouse store: a row per save, the furthest offset per partition wins (a repeat or a stale save never moves it back). */
export class ClickHouseWebhookCheckpoints implements WebhookCheckpointStore {
  readonly kind = 'clickhouse';
  private readonly ch: ClickHouseSession;
  private readonly tableName: string;

  constructor(options: { client: ClickHouseClient; tablePrefix?: string }) {
    this.ch = new ClickHouseSession({ client: options.client }, 'ClickHouseWebhookCheckpoints');
    this.tableName = `${options.tablePrefix ?? ''}webhook_checkpoints`;
  }

  private get table() {
    return sqlTable('default', this.tableName);
  }

  private get startsTable() {
    return sqlTable('default', `${this.tableName.slice(0, -'checkpoints'.length)}starts`);
  }

  async init(): Promise<void> {
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.table} (
        consumer String, topic String, partition UInt32, next_offset UInt64
      ) ENGINE = ReplacingMergeTree(next_offset)
      ORDER BY (consumer, topic, partition)`);
    // Every proposal kept (a few rows per rule and start); the earliest is read.
    await this.ch.command(sql`CREATE TABLE IF NOT EXISTS ${this.startsTable} (
        consumer String, topic String, partition UInt32, next_offset UInt64
      ) ENGINE = MergeTree ORDER BY (consumer, topic, partition)`);
  }

  async start(consumer: string, topic: string, proposed: Checkpoint): Promise<Checkpoint> {
    if (proposed.size > 0) {
      await this.ch.client.insert({
        table: this.startsTable.text,
        format: 'JSONEachRow',
        values: [...proposed].map(([partition, next]) => ({ consumer, topic, partition, next_offset: next })),
      });
    }
    const rows = await this.ch.select<{ partition: number; next: string }>(
      sql`SELECT partition, toString(min(next_offset)) AS next FROM ${this.startsTable} WHERE consumer = ${consumer} AND topic = ${topic} GROUP BY partition`,
    );
    return new Map(rows.map((r) => [Number(r.partition), Number(r.next)]));
  }

  async load(consumer: string, topic: string): Promise<Checkpoint | undefined> {
    const rows = await this.ch.select<{ partition: number; next: string }>(
      sql`SELECT partition, toString(max(next_offset)) AS next FROM ${this.table} WHERE consumer = ${consumer} AND topic = ${topic} GROUP BY partition`,
    );
    return rows.length === 0 ? undefined : new Map(rows.map((r) => [Number(r.partition), Number(r.next)]));
  }

  async save(consumer: string, topic: string, positions: Checkpoint): Promise<void> {
    if (positions.size === 0) return;
    await this.ch.client.insert({
      table: this.table.text,
      format: 'JSONEachRow',
      values: [...positions].map(([partition, next]) => ({ consumer, topic, partition, next_offset: next })),
    });
  }

  async forget(consumer: string, topic: string): Promise<void> {
    // A mutation (a rule's removal is rare, its rows few), waited for as system.mutations tells:
    // the servers this runs on include some without the mutations_sync setting.
    const names = [this.tableName, `${this.tableName.slice(0, -'checkpoints'.length)}starts`];
    for (const name of names) await this.ch.command(sql`ALTER TABLE ${sqlTable('default', name)} DELETE WHERE consumer = ${consumer} AND topic = ${topic}`);
    for (let waited = 0; ; waited += FORGET_POLL_MS) {
      const [left] = await this.ch.select<{ n: string }>(sql`SELECT toString(count()) AS n FROM system.mutations WHERE database = 'default' AND table IN (${names[0]}, ${names[1]}) AND is_done = 0`);
      if (Number(left?.n ?? 0) === 0) return;
      if (waited >= FORGET_MAX_WAIT_MS) throw new Error(`the checkpoints of ${consumer} were not dropped within ${FORGET_MAX_WAIT_MS} ms (a ClickHouse mutation still running)`);
      await new Promise((resolve) => setTimeout(resolve, FORGET_POLL_MS));
    }
  }

  async close(): Promise<void> {
    await this.ch.close();
  }
}
