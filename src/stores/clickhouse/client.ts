import { createClient, type ClickHouseClient } from '@clickhouse/client';

export type { ClickHouseClient };

export interface ClickHouseConnection {
  /** http(s)://[user:password@]host:port[/database] */
  url: string;
  requestTimeoutMs?: number;
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
