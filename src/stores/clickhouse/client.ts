import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Sql } from './sql.js';
import { ClickHouseError, ClickHouseLogLevel, createClient, parseError, type ClickHouseClient } from '@clickhouse/client';
import { ServiceError } from '../../errors.js';
import { waitFor, type WaitOptions } from '../../startup.js';

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
  const client = createClient({
    url: connection.url,
    request_timeout: connection.requestTimeoutMs ?? 30_000,
    application: 'channel-messaging',
    ...(connection.quiet ? { log: { level: ClickHouseLogLevel.OFF } } : {}),
  });
  readers.set(client, new SelectReader(connection.url, connection.requestTimeoutMs ?? 30_000));
  const close = client.close.bind(client);
  client.close = async () => {
    readers.get(client)?.close();
    await close();
  };
  return client;
}

/** The plain reader of each client made here (selects go through it; see SelectReader). */
const readers = new WeakMap<ClickHouseClient, SelectReader>();

/**
 * SELECTs over plain HTTP with a keep-alive agent: the client library spends some 1.8 ms of its
 * own on every query (2.2 ms for `SELECT 1` against 0.4 ms with node:http on the same server,
 * measured on 18.16), which was most of a GET /stats page in production. The same request the
 * library makes (the statement and `FORMAT JSONEachRow` as the body, the URL's credentials and
 * database), and the same errors: ClickHouse's own answered as a ClickHouseError (parseError),
 * no answer as a network error.
 */
class SelectReader {
  private readonly target: URL;
  private readonly agent: HttpAgent;
  private readonly headers: Record<string, string>;
  private readonly send: typeof httpRequest;

  constructor(
    url: string,
    private readonly timeoutMs: number,
  ) {
    const parsed = new URL(url);
    const https = parsed.protocol === 'https:';
    this.send = https ? httpsRequest : httpRequest;
    this.agent = https ? new HttpsAgent({ keepAlive: true, maxSockets: 10 }) : new HttpAgent({ keepAlive: true, maxSockets: 10 });
    this.headers = { 'Content-Type': 'text/plain; charset=utf-8' };
    if (parsed.username || parsed.password) {
      const credentials = `${decodeURIComponent(parsed.username || 'default')}:${decodeURIComponent(parsed.password)}`;
      this.headers.Authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
    }
    this.target = new URL(`${parsed.protocol}//${parsed.host}/`);
    const database = parsed.pathname.replace(/^\/+|\/+$/g, '');
    if (database) this.target.searchParams.set('database', decodeURIComponent(database));
  }

  select<T>(statement: string): Promise<T[]> {
    return new Promise<T[]>((resolve, reject) => {
      const req = this.send(this.target, { method: 'POST', agent: this.agent, headers: this.headers, timeout: this.timeoutMs }, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) return reject(parseError(body));
          const rows: T[] = [];
          try {
            for (const line of body.split('\n')) {
              if (line === '') continue;
              // An error after the first rows comes at the end of a 200 answer, as text.
              if (line.startsWith('Code: ')) return reject(parseError(line));
              rows.push(JSON.parse(line) as T);
            }
          } catch (err) {
            return reject(err);
          }
          resolve(rows);
        });
      });
      req.on('timeout', () => req.destroy(new Error('Timeout error.')));
      req.on('error', reject);
      req.end(`${statement}\nFORMAT JSONEachRow`);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Pings until the server answers or the time runs out (start-up ordering with a fresh server),
 * saying "waiting for ClickHouse at <at>" about once a second meanwhile (startup.ts: waitFor).
 */
export async function waitForClickHouse(
  client: ClickHouseClient,
  timeoutMs = 30_000,
  options: { at?: string; logger?: WaitOptions['logger'] } = {},
): Promise<void> {
  await waitFor({ what: 'ClickHouse', at: options.at ?? 'its URL', timeoutMs, logger: options.logger, gaveUp: `ClickHouse did not answer within ${timeoutMs} ms` }, async () => {
    const result = await client.ping();
    if (!result.success) throw result.error;
  });
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
      const reader = readers.get(this.client);
      if (reader) return await reader.select<T>(statement.text);
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
