import type { Sql } from './sql.js';
import { ClickHouseError, ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { ServiceError } from '../../errors.js';

export type { ClickHouseClient };

export interface ClickHouseConnection {
  /** http(s)://[user:password@]host:port[/database] */
  url: string;
  requestTimeoutMs?: number;
  /** The client's own console logging off (a start-up probe says itself what failed, once). */
  quiet?: boolean;
}

/**
 * A client that speaks only what ClickHouse 18.16 and current releases share: no session, no
 * settings beyond the server's defaults (18.16 rejects unknown settings), JSONEachRow in and out.
 */
export function createClickHouseClient(connection: ClickHouseConnection): ClickHouseClient {
  return createClient({
    url: connection.url,
    request_timeout: connection.requestTimeoutMs ?? 30_000,
    application: 'channel-messaging',
    ...(connection.quiet ? { log: { level: ClickHouseLogLevel.OFF } } : {}),
  });
}

/** Pings until the server answers or the time runs out (start-up ordering with a fresh server). */
export async function waitForClickHouse(client: ClickHouseClient, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const result = await client.ping();
      if (result.success) return;
      last = result.error;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`ClickHouse did not answer within ${timeoutMs} ms: ${last instanceof Error ? last.message : String(last)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * A store's way to ClickHouse: a client it was given (and leaves open) or one it made from a URL
 * (and closes), with the two calls every store makes. Statements come from the `sql` tag only.
 */
export class ClickHouseSession {
  readonly client: ClickHouseClient;
  private readonly owned: boolean;

  constructor(options: { client?: ClickHouseClient; url?: string }, owner: string) {
    if (options.client) {
      this.client = options.client;
      this.owned = false;
    } else if (options.url) {
      this.client = createClickHouseClient({ url: options.url });
      this.owned = true;
    } else {
      throw new Error(`${owner} needs a client or a url`);
    }
  }

  async command(statement: Sql): Promise<void> {
    await this.client.command({ query: statement.text });
  }

  async select<T>(statement: Sql): Promise<T[]> {
    try {
      const result = await this.client.query({ query: statement.text, format: 'JSONEachRow' });
      return await result.json<T>();
    } catch (err) {
      throw unavailableWhenUnreachable(err);
    }
  }

  async close(): Promise<void> {
    if (this.owned) await this.client.close();
  }
}

/**
 * A read that got no answer from ClickHouse (refused, reset, timed out) is a 503 a client may retry,
 * like a publish Kafka does not acknowledge; an error ClickHouse answered with stays what it is.
 */
function unavailableWhenUnreachable(err: unknown): unknown {
  if (err instanceof ClickHouseError || err instanceof ServiceError) return err;
  // The cause stays in the server's log: its addresses are not the client's business.
  const unavailable = new ServiceError('unavailable', 'the store did not answer; retry');
  unavailable.cause = err;
  return unavailable;
}
