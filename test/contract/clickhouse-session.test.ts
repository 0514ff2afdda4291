import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { createClient } from '@clickhouse/client';
import { ClickHouseSession, createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { sql, sqlIdentifier } from '../../src/stores/clickhouse/sql.js';
import { ServiceError } from '../../src/errors.js';
import { describeWithInfra, findClickHouse } from '../helpers/infra.js';

const clickhouse = await findClickHouse();

/** A port with nobody listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// Selects go over plain HTTP (the client library's own overhead was most of a stats page): the
// same rows and the same errors as the library's.
describeWithInfra('ClickHouseSession selects', 'ClickHouse', clickhouse, ({ url }) => {
  it('gives the rows the client library gives: 64-bit integers, text with newlines and quotes, arrays', async () => {
    const client = createClickHouseClient({ url });
    const session = new ClickHouseSession({ client }, 'test');
    try {
      const statement = sql`SELECT number AS n, toUInt64(number) * 4294967296 AS big, concat('line\n', toString(number), '"q"') AS text, [number, 1] AS list FROM system.numbers LIMIT 3`;
      const expected = await (await client.query({ query: statement.text, format: 'JSONEachRow' })).json();
      expect(await session.select(statement)).toEqual(expected);
      expect(expected).toHaveLength(3);
    } finally {
      await session.close();
      await client.close();
    }
  });

  /** What a select fails with through the client library (a client not made by createClickHouseClient). */
  async function libraryError(clientUrl: string, statement: ReturnType<typeof sql>): Promise<unknown> {
    const library = createClient({ url: clientUrl, log: { level: 127 as never } });
    try {
      return await new ClickHouseSession({ client: library }, 'test').select(statement).catch((e: unknown) => e);
    } finally {
      await library.close();
    }
  }

  /** The parts of an error a route answers with. */
  const shape = (err: unknown): unknown => ({ kind: (err as object).constructor.name, message: (err as Error).message, code: (err as { code?: unknown }).code });

  it("uses the URL's database, and its user (an unknown one is refused as through the client library)", async () => {
    const database = `t_${randomBytes(4).toString('hex')}`;
    const admin = createClickHouseClient({ url });
    await admin.command({ query: sql`CREATE DATABASE ${sqlIdentifier(database)}`.text });
    await admin.command({ query: sql`CREATE TABLE ${sqlIdentifier(database)}.here (x UInt8) ENGINE = Memory`.text });
    await admin.command({ query: sql`INSERT INTO ${sqlIdentifier(database)}.here VALUES (7)`.text });
    const inDatabase = createClickHouseClient({ url: `${url.replace(/\/$/, '')}/${database}` });
    const stranger = new URL(url);
    stranger.username = `nobody_${randomBytes(2).toString('hex')}`;
    const refused = createClickHouseClient({ url: stranger.toString(), quiet: true });
    try {
      expect(await new ClickHouseSession({ client: inDatabase }, 'test').select(sql`SELECT x FROM here`)).toEqual([{ x: 7 }]);
      const err = await new ClickHouseSession({ client: refused }, 'test').select(sql`SELECT 1`).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(shape(err)).toEqual(shape(await libraryError(stranger.toString(), sql`SELECT 1`)));
    } finally {
      await admin.command({ query: sql`DROP DATABASE IF EXISTS ${sqlIdentifier(database)}`.text });
      await Promise.all([admin.close(), inDatabase.close(), refused.close()]);
    }
  });

  it('an error ClickHouse answers is what the client library makes of it; no answer is a 503 the client may retry', async () => {
    const client = createClickHouseClient({ url });
    const gone = createClickHouseClient({ url: `http://127.0.0.1:${await closedPort()}`, quiet: true });
    try {
      const answered = await new ClickHouseSession({ client }, 'test').select(sql`SELECT * FROM no_such_table_here`).catch((e: unknown) => e);
      expect(answered).toBeInstanceOf(Error);
      expect(shape(answered)).toEqual(shape(await libraryError(url, sql`SELECT * FROM no_such_table_here`)));
      const unanswered = await new ClickHouseSession({ client: gone }, 'test').select(sql`SELECT 1`).catch((e: unknown) => e);
      expect(unanswered).toBeInstanceOf(ServiceError);
      expect((unanswered as ServiceError).message).toBe('the store did not answer; retry');
    } finally {
      await Promise.all([client.close(), gone.close()]);
    }
  });
});
