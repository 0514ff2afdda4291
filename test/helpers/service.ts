import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { parseConfig } from '../../src/config.js';
import { startService, embeddedAdapters, type Adapters, type Service } from '../../src/service.js';
import type { Clock } from '../../src/clock.js';
import { Topics } from '../../src/log/port.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';

export interface TestService {
  service: Service;
  /** the default app's root key, `appId.keyId:secret` */
  key: string;
  /** Authorization header value for the root key */
  auth: string;
  dataDir: string;
  close(): Promise<void>;
  /**
   * Restarts on the same DATA_DIR (and the same adapters' files; in production mode the same topics
   * and tables), with `more.env` on top of the configuration and `more.logger` if given.
   */
  restart(more?: { env?: Record<string, string>; logger?: Logger }): Promise<TestService>;
}

export const basic = (key: string): string => `Basic ${Buffer.from(key).toString('base64')}`;

/**
 * The mode startTestService starts services in: `TEST_SERVICE_MODE=production` (`.ci/run` sets it
 * for its second pass over test/sdk, test/http, the realtime files on the log and the console's and dashboard's browser tests) puts them on Kafka and ClickHouse, found as
 * test/helpers/infra.ts finds them, each with topics and tables of its own; embedded otherwise.
 */
export const testServiceMode: 'embedded' | 'production' = process.env.TEST_SERVICE_MODE === 'production' ? 'production' : 'embedded';

interface ProductionTarget {
  env: Record<string, string>;
  clickhouseUrl: string;
  /** librdkafka's mock broker (see onMockBroker) */
  mock: boolean;
}
let productionTarget: Promise<ProductionTarget> | undefined;

/** The infrastructure of the production mode, found once per test file. */
function findProductionTarget(): Promise<ProductionTarget> {
  return (productionTarget ??= (async () => {
    const { findProductionInfra } = await import('./production.js');
    const found = await findProductionInfra();
    if (!found) throw new Error('TEST_SERVICE_MODE=production needs Kafka and ClickHouse (README: Infrastructure for tests): none found');
    return {
      clickhouseUrl: found.clickhouseUrl,
      mock: found.mock,
      env: { KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: found.mock || found.source !== 'testcontainers' ? '0' : '1' },
    };
  })());
}

/**
 * Whether startTestService starts its services on librdkafka's mock broker (production mode, as
 * infra/local runs it). The mock keeps at most 5 MiB of record batches a partition and deletes the
 * oldest past that, read or not (rd_kafka_mock_partition_init sets max_size; no setting changes
 * it), where a Kafka cluster keeps what the topic's retention says: a test that appends more than
 * that to one partition (one channel's history) before the service has read it cannot run on it.
 */
export async function onMockBroker(): Promise<boolean> {
  return testServiceMode === 'production' && (await findProductionTarget()).mock;
}

/** Drops the ClickHouse tables of one production test service (its Kafka topics go with the infrastructure). */
async function dropTables(clickhouseUrl: string, prefix: string): Promise<void> {
  const query = async (sql: string): Promise<string> => {
    const res = await fetch(clickhouseUrl, { method: 'POST', body: sql, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`ClickHouse: ${text.slice(0, 200)}`);
    return text;
  };
  const names = await query(`SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${prefix}')`);
  for (const name of names.split('\n').filter((n) => n !== '')) {
    // ClickHouse 18.16 answers a DROP ... IF EXISTS with Code 60 ("doesn't exist") for a table it
    // listed a moment before (seen once in CI's production run of test/realtime): gone is what is asked.
    await query(`DROP TABLE IF EXISTS \`${name}\``).catch((err: Error) => {
      if (!/Code: 60\b/.test(err.message)) throw err;
    });
  }
}

/**
 * A whole service in a fresh DATA_DIR (SANDBOX on), built as main.ts builds it but not listening:
 * tests use app.inject(). On the embedded adapters, or in production mode (testServiceMode) unless
 * the test passes adapters of its own. Close it in teardown.
 */
export async function startTestService(
  env: Record<string, string> = {},
  options: { clock?: Clock; adapters?: (dataDir: string) => Adapters; dataDir?: string; logger?: Logger; isolation?: { topicPrefix: string; tablePrefix: string } } = {},
): Promise<TestService> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'cm-test-'));
  const production = testServiceMode === 'production' && !options.adapters ? await findProductionTarget() : undefined;
  const config = parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent', ...production?.env, ...env });
  const logger = options.logger ?? pino({ level: 'silent' });
  const tag = randomBytes(4).toString('hex');
  // A restart keeps its topics and tables: it is the same service again.
  const isolation = options.isolation ?? { topicPrefix: `ts-${tag}-`, tablePrefix: `ts_${tag}_` };
  let adapters: Adapters;
  if (options.adapters) adapters = options.adapters(dataDir);
  else if (production) adapters = await (await import('../../src/production-adapters.js')).productionAdapters(config, logger, isolation);
  else adapters = embeddedAdapters(config);
  const service = await startService(config, logger, adapters, options.clock);
  const app = service.registry.all().find((a) => a.source === 'default') ?? service.registry.all()[0];
  const key = `${app.keys[0].keyName}:${app.keys[0].keySecret}`;
  const handle: TestService = {
    service,
    key,
    auth: basic(key),
    dataDir,
    close: async () => {
      await service.close();
      if (production) await dropTables(production.clickhouseUrl, isolation.tablePrefix);
    },
    restart: async (more = {}) => {
      await service.close();
      return startTestService({ ...env, ...more.env }, { ...options, ...(more.logger ? { logger: more.logger } : {}), dataDir, isolation });
    },
  };
  return handle;
}

/** Listens on a free loopback port (realtime tests need a real socket); returns the port. */
export async function listening(ts: TestService): Promise<number> {
  await ts.service.app.listen({ port: 0, host: '127.0.0.1' });
  return (ts.service.app.server.address() as AddressInfo).port;
}

/**
 * Resolves once GET /ready answers 200, as a load balancer would put the instance in rotation: in
 * production mode a start's consumers read the log some 3 s after it (their Kafka groups joining),
 * and an ATTACH meanwhile waits for realtime delivery (README: Health, readiness and metrics).
 */
export async function ready(ts: TestService, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await ts.service.app.inject({ method: 'GET', url: '/ready' });
    if (res.statusCode === 200) return;
    if (Date.now() > deadline) throw new Error(`GET /ready still ${res.statusCode} after ${timeoutMs} ms: ${res.body}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const removeDir = (dir: string): void => rmSync(dir, { recursive: true, force: true });

/** A channel name no other test uses. */
export const uniqueChannel = (prefix = 'test'): string => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

/** Publishes `messages` (one or an array, as JSON) to `channel` with the root key; fails the test unless the service answers 201. */
export async function publishJson(ts: TestService, channel: string, messages: unknown): Promise<void> {
  const res = await ts.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization: ts.auth, 'content-type': 'application/json' },
    payload: JSON.stringify(messages),
  });
  if (res.statusCode !== 201) throw new Error(`publish to ${channel} answered ${res.statusCode}: ${res.body}`);
}

/**
 * A channelSerial of `channel` (default app) far past where delivery stands, on the channel's own
 * partition: an ATTACH with it waits for the log's end offsets first. The embedded log has one
 * partition by default, Kafka's topics several: on another partition it would be no position of
 * the channel, answered at once.
 */
export async function serialAhead(ts: TestService, channel: string): Promise<string> {
  const appId = (ts.service.registry.all().find((a) => a.source === 'default') ?? ts.service.registry.all()[0]).appId;
  return `${partitionFor(channelKey(appId, channel), await ts.service.log.partitions(Topics.messages))}:999999999`;
}
