// Production mode in one test process: Kafka and ClickHouse found as test/helpers/infra.ts finds
// them, and service instances started on them as main.ts starts one, each with its own DATA_DIR
// and instance id, sharing topics and tables under one isolation prefix.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { parseConfig, type Config } from '../../src/config.js';
import { startService, type Service } from '../../src/service.js';
import { STATS_TOPICS } from '../../projections/projection-set.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { afterAll } from 'vitest';
import { until as untilShared } from '../faults/publish-load.js';
import { findClickHouse, findKafka, type KafkaInfra } from './infra.js';

export type ProductionInfra = KafkaInfra & { clickhouseUrl: string };

/** Kafka and ClickHouse together, or undefined when either is missing. */
export async function findProductionInfra(): Promise<ProductionInfra | undefined> {
  const kafka = await findKafka();
  const clickhouse = await findClickHouse();
  if (!kafka || !clickhouse) return undefined;
  return {
    ...kafka,
    clickhouseUrl: clickhouse.url,
    stop: async () => {
      await kafka.stop();
      await clickhouse.stop();
    },
  };
}

export interface InstanceSpec {
  /** the one app of the instance's APPS_FILE, with one key (`appId.keyId:secret`) */
  appId: string;
  key: string;
  instanceId: string;
  isolation: { topicPrefix: string; tablePrefix: string };
  /** the key's capability (default: none given, so `{"*":["*"]}`) */
  capability?: Record<string, string[]>;
  /** more configuration (REALTIME_*, ...) */
  env?: Record<string, string>;
}

/**
 * The configuration a production-mode instance starts with: a DATA_DIR of its own, an APPS_FILE
 * with these apps, the infrastructure found, and `env` on top.
 */
export function productionConfig(found: ProductionInfra, apps: unknown[], env: Record<string, string> = {}): { config: Config; dataDir: string } {
  const dataDir = mkdtempSync(join(tmpdir(), `cm-prod-${env.INSTANCE_ID ?? 'instance'}-`));
  const appsFile = join(dataDir, 'apps.json');
  writeFileSync(appsFile, JSON.stringify({ apps }));
  const config = parseConfig({
    DATA_DIR: dataDir,
    APPS_FILE: appsFile,
    KAFKA_BROKERS: found.brokers.join(','),
    CLICKHOUSE_URL: found.clickhouseUrl,
    KAFKA_IDEMPOTENT: found.mock || found.source !== 'testcontainers' ? '0' : '1',
    LOG_LEVEL: 'silent',
    ...env,
  });
  return { config, dataDir };
}

/** A production-mode instance listening on a free loopback port. Close it in teardown. */
export async function startProductionInstance(found: ProductionInfra, spec: InstanceSpec): Promise<{ service: Service; port: number }> {
  const app = { appId: spec.appId, keys: [{ key: spec.key, ...(spec.capability ? { capability: spec.capability } : {}) }] };
  const { config } = productionConfig(found, [app], { INSTANCE_ID: spec.instanceId, ...spec.env });
  const logger = pino({ level: 'silent' });
  const service = await startService(config, logger, await productionAdapters(config, logger, spec.isolation));
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  return { service, port: (service.app.server.address() as AddressInfo).port };
}

/**
 * What a production end-to-end file keeps for its teardown: the clients it opens and the instances
 * it starts, closed after its tests (the afterAll is registered here, so call this at the top of
 * the file); and `until`, polling every 100 ms for up to 30 s unless told otherwise.
 */
export function productionTeardown(): {
  opened: { close(): void }[];
  services: Service[];
  until: (what: string, check: () => boolean | Promise<boolean>, timeoutMs?: number) => Promise<void>;
} {
  const opened: { close(): void }[] = [];
  const services: Service[] = [];
  afterAll(async () => {
    for (const c of opened.splice(0)) c.close();
    for (const s of services.splice(0)) await s.close().catch(() => undefined);
  });
  return { opened, services, until: (what, check, timeoutMs = 30_000) => untilShared(what, check, timeoutMs, 100) };
}

/**
 * Resolves once the stats writers of `services` share every partition of the stats topics (each
 * topic's writers are one consumer group: projections/projection-set.ts). Until then a read that
 * waits for its own writes' rows (POST /stats fixtures, GET /stats) waits for the group. On the
 * mock broker a group's rebalance ends only when the session timeout has passed (real Kafka: as
 * soon as the members rejoined), so instances of such tests start with KAFKA_SESSION_TIMEOUT_MS 6000.
 */
export async function statsWritersFormed(services: Service[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const formed = async (): Promise<boolean> => {
    for (const topic of STATS_TOPICS) {
      const held = services.map((s) => s.runner.partitionsOf(`stats-writer-${topic}`));
      if (held.some((p) => p.length === 0)) return false;
      const all = held.flat().sort((x, y) => x - y);
      const count = await services[0].log.partitions(topic);
      if (all.length !== count || all.some((p, i) => p !== i)) return false;
    }
    return true;
  };
  while (!(await formed())) {
    if (Date.now() > deadline) throw new Error(`the stats writers' groups did not form within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A query's answer from the infrastructure's ClickHouse, trimmed (tests count the rows the writers sent). */
export async function clickhouse(found: ProductionInfra, query: string): Promise<string> {
  const res = await fetch(found.clickhouseUrl, { method: 'POST', body: query });
  const text = await res.text();
  if (!res.ok) throw new Error(`ClickHouse: ${text}`);
  return text.trim();
}
