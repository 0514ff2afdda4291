import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ClickHouseHistoryStore, refusedData, type ClickHouseHistoryStoreOptions } from '../../projections/history/clickhouse-history-store.js';
import type { HistoryStore } from '../../projections/history/history-store.js';
import { createClickHouseClient, type ClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlString, sqlTable } from '../../src/stores/clickhouse/sql.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';
import { historyStoreContract } from './history-store.contract.js';

const clickhouse = await findClickHouse();

describeWithInfra('ClickHouseHistoryStore', 'ClickHouse', clickhouse, ({ url }) => {
  /** Drops the tables of a store made with this prefix. */
  const dropTables = async (client: ClickHouseClient, tablePrefix: string): Promise<void> => {
    for (const table of ['history_messages', 'projection_state']) {
      await client.command({ query: sql`DROP TABLE IF EXISTS ${sqlTable('default', tablePrefix + table)}`.text });
    }
  };

  /** A store on tables of its own, made ready, and a client to read them; the tables dropped after `run`. */
  const withStore = async (
    options: Omit<ClickHouseHistoryStoreOptions, 'url' | 'tablePrefix'>,
    run: (store: ClickHouseHistoryStore, client: ClickHouseClient, tablePrefix: string) => Promise<void>,
  ): Promise<void> => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const store = new ClickHouseHistoryStore({ url, tablePrefix, ...options });
    const client = createClickHouseClient({ url });
    try {
      await store.init();
      await run(store, client, tablePrefix);
    } finally {
      await store.close();
      await dropTables(client, tablePrefix);
      await client.close();
    }
  };

  historyStoreContract('clickhouse', async () => {
    // Tables of its own for every test (STYLE: unique names, no global resets).
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const opened: HistoryStore[] = [];
    return {
      open: async (consumer) => {
        const store = new ClickHouseHistoryStore({ url, tablePrefix, consumer });
        opened.push(store);
        return store;
      },
      cleanup: async () => {
        for (const store of opened) await store.close();
        const client = createClickHouseClient({ url });
        await dropTables(client, tablePrefix);
        await client.close();
      },
    };
  });

  it("has the message fields as columns (id, name, clientId, connectionId, data, encoding, action), so SELECT ... WHERE name = 'order' works", async () => {
    await withStore({}, async (store, client, tablePrefix) => {
      const now = Date.now();
      const entry = (serial: number, message: Record<string, unknown>) => ({
        appId: 'a', channel: 'orders', serial, partition: 0, retentionHours: 24, message: { id: `m${serial}`, timestamp: now + serial, ...message },
      });
      await store.write([
        entry(1, { name: 'order', clientId: 'alice', data: 'two apples' }),
        entry(2, { name: 'order', data: new Uint8Array([1, 2, 255]), encoding: 'cipher' }),
        entry(3, { name: 'refund', data: { amount: 5 }, connectionId: 'k1' }),
        entry(4, {}),
      ], new Map([[0, 5]]), []);
      const rows = await (
        await client.query({
          query: sql`SELECT id, name, clientId, data, encoding FROM ${sqlTable('default', `${tablePrefix}history_messages`)}
                     WHERE name = 'order' ORDER BY serial LIMIT 1 BY serial`.text,
          format: 'JSONEachRow',
        })
      ).json();
      expect(rows).toEqual([
        { id: 'm1', name: 'order', clientId: 'alice', data: 'two apples', encoding: '' },
        { id: 'm2', name: 'order', clientId: '', data: Buffer.from([1, 2, 255]).toString('base64'), encoding: 'cipher/base64' },
      ]);
      const [refund] = (await (
        await client.query({ query: sql`SELECT data, connectionId FROM ${sqlTable('default', `${tablePrefix}history_messages`)} WHERE name = 'refund'`.text, format: 'JSONEachRow' })
      ).json()) as { data: string }[];
      expect(JSON.parse(refund.data)).toEqual({ amount: 5 });
      // The service still reads the messages whole.
      const read = await store.query({ appId: 'a', channel: 'orders', start: 0, end: now + 10, limit: 10, direction: 'forwards' });
      expect(read.map((e) => e.message.name ?? null)).toEqual(['order', 'order', 'refund', null]);
    });
  });

  it('a message with lone surrogates in its fields is stored (ClickHouse refuses them in JSONEachRow): the columns hold U+FFFD, the service reads the message back exactly', async () => {
    await withStore({}, async (store, client, tablePrefix) => {
      const now = Date.now();
      const odd = { id: 'i\ud800:0', timestamp: now, name: 'n\ud800', clientId: 'a\ud800b', connectionId: 'c\udbff', data: 'd\ud800', encoding: 'e\ud800' };
      await store.write([{ appId: 'a', channel: 'orders', serial: 1, partition: 0, retentionHours: 24, message: odd }], new Map([[0, 2]]), []);
      const rows = await (
        await client.query({ query: sql`SELECT name, clientId, data FROM ${sqlTable('default', `${tablePrefix}history_messages`)}`.text, format: 'JSONEachRow' })
      ).json();
      expect(rows).toEqual([{ name: 'n\ufffd', clientId: 'a\ufffdb', data: 'd\ufffd' }]);
      const read = await store.query({ appId: 'a', channel: 'orders', start: 0, end: now + 10, limit: 10, direction: 'forwards' });
      expect(read.map((e) => e.message)).toEqual([odd]);
      expect(await store.loadCheckpoint()).toEqual(new Map([[0, 2]]));
    });
  });

  it('a row ClickHouse refuses for its data is left out and reported, the rows beside it stored and the checkpoint moved (no batch retried for ever); an outage still fails the write', async () => {
    const refused: { serial: number; code: boolean }[] = [];
    await withStore({ onRefused: (row, err) => refused.push({ serial: row.serial, code: /Code: 72/.test(err.message) }) }, async (store, client, tablePrefix) => {
      const now = Date.now();
      const entry = (serial: number, timestamp: number) => ({ appId: 'a', channel: 'c', serial, partition: 0, retentionHours: 24, message: { id: `m${serial}`, timestamp, name: `n${serial}` } });
      // A negative timestamp: ClickHouse refuses it for the UInt64 column (Code 72), every time.
      const rows = [1, 2, 3, 4, 5].map((serial) => entry(serial, serial === 4 ? -1 : now + serial));
      await store.write(rows, new Map([[0, 6]]), []);
      expect(refused).toEqual([{ serial: 4, code: true }]);
      const read = await store.query({ appId: 'a', channel: 'c', start: 0, end: now + 10, limit: 10, direction: 'forwards' });
      expect(read.map((e) => e.serial)).toEqual([1, 2, 3, 5]);
      expect(await store.loadCheckpoint()).toEqual(new Map([[0, 6]]));
      expect(refusedData(new Error('connect ECONNREFUSED 127.0.0.1:8123'))).toBe(false);
      expect(refusedData(new Error('Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded'))).toBe(false);
    });
  });

  it('a table an older release made gets the field columns and keeps its rows', async () => {
    const tablePrefix = `t_${randomBytes(4).toString('hex')}_`;
    const client = createClickHouseClient({ url });
    const table = sqlTable('default', `${tablePrefix}history_messages`);
    const store = new ClickHouseHistoryStore({ url, tablePrefix });
    try {
      await client.command({
        query: sql`CREATE TABLE ${table} (app_id String, channel String, serial UInt64, partition UInt32, ts UInt64, expires_on Date, message String)
          ENGINE = ReplacingMergeTree() PARTITION BY expires_on ORDER BY (app_id, channel, ts, serial)`.text,
      });
      await store.init();
      await store.write([{ appId: 'a', channel: 'c', serial: 1, partition: 0, retentionHours: 24, message: { id: 'x', timestamp: Date.now(), name: 'order' } }], new Map([[0, 2]]), []);
      const rows = await (await client.query({ query: sql`SELECT name FROM ${table}`.text, format: 'JSONEachRow' })).json();
      expect(rows).toEqual([{ name: 'order' }]);
    } finally {
      await store.close();
      await dropTables(client, tablePrefix);
      await client.close();
    }
  });

  describe('SQL literals', () => {
    it('come back from the server exactly as escaped', async () => {
      const client = createClickHouseClient({ url });
      try {
        const samples = ["it's", 'back\\slash\\', 'nul\0byte', 'new\nline\r\ttab', '\x01\x1f\x7f', '日本語 😀 é', "x' OR '1'='1", "\\'; DROP TABLE t; --", ''];
        for (const s of samples) {
          const result = await client.query({ query: sql`SELECT ${sqlString(s)} AS s, hex(s) AS h`.text, format: 'JSONEachRow' });
          const [row] = await result.json<{ s: string; h: string }>();
          expect(row.h).toBe(Buffer.from(s, 'utf8').toString('hex').toUpperCase());
          expect(row.s).toBe(s);
        }
      } finally {
        await client.close();
      }
    });
  });
});
