// Finds Kafka and ClickHouse for the suites that need them, in the order ARCHITECTURE gives:
// (1) KAFKA_BROKERS / CLICKHOUSE_URL in the environment, (2) testcontainers when a Docker engine
// is reachable, (3) the processes started by infra/local/start.sh (its env file). A suite whose
// infrastructure is missing says so loudly and skips; with REQUIRE_INFRA=1 it fails instead.
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, it } from 'vitest';

export const requireInfra = process.env.REQUIRE_INFRA === '1';

type Source = 'env' | 'testcontainers' | 'infra/local';

export interface KafkaInfra {
  brokers: string[];
  /** librdkafka's mock cluster: no idempotent producer, no admin APIs. */
  mock: boolean;
  source: Source;
  stop(): Promise<void>;
}

export interface ClickHouseInfra {
  url: string;
  source: Source;
  stop(): Promise<void>;
}

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const nothingToStop = async (): Promise<void> => {};

/** The env file written by infra/local/start.sh (INFRA_STATE_DIR, else infra/.state). */
function localInfraEnv(): Record<string, string> | undefined {
  const dirs = [process.env.INFRA_STATE_DIR, join(ROOT, 'infra/.state'), join(ROOT, 'infra/local/.state')];
  for (const dir of dirs) {
    if (!dir) continue;
    const file = join(dir, 'env');
    if (!existsSync(file)) continue;
    const env: Record<string, string> = {};
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
      if (m) env[m[1]] = m[2].trim().replace(/^(['"])(.*)\1$/, '$2');
    }
    return env;
  }
  return undefined;
}

function tcpReachable(hostPort: string, timeoutMs = 1_000): Promise<boolean> {
  const i = hostPort.lastIndexOf(':');
  const host = hostPort.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(hostPort.slice(i + 1));
  return new Promise((done) => {
    const socket = connect({ host, port });
    const finish = (ok: boolean): void => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

async function clickHouseAnswers(url: string, timeoutMs = 2_000): Promise<boolean> {
  try {
    const res = await fetch(new URL('/ping', url), { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok;
  } catch {
    return false;
  }
}

let dockerChecked: Promise<boolean> | undefined;
/** A quick look for a container engine, so machines without one do not wait on testcontainers. */
function dockerReachable(): Promise<boolean> {
  return (dockerChecked ??= (async () => {
    if (!process.env.DOCKER_HOST && !existsSync('/var/run/docker.sock') && !existsSync(join(process.env.HOME ?? '', '.docker/run/docker.sock'))) {
      return false;
    }
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), 5_000).unref());
      await Promise.race([getContainerRuntimeClient(), timeout]);
      return true;
    } catch {
      return false;
    }
  })());
}

const splitBrokers = (s: string): string[] =>
  s
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);

export async function findKafka(): Promise<KafkaInfra | undefined> {
  if (process.env.KAFKA_BROKERS) {
    return { brokers: splitBrokers(process.env.KAFKA_BROKERS), mock: process.env.KAFKA_MOCK === '1', source: 'env', stop: nothingToStop };
  }
  if (await dockerReachable()) {
    const { KafkaContainer } = await import('@testcontainers/kafka');
    const container = await new KafkaContainer('confluentinc/cp-kafka:7.6.1').withKraft().start();
    return {
      brokers: [`${container.getHost()}:${container.getMappedPort(9093)}`],
      mock: false,
      source: 'testcontainers',
      stop: async () => {
        await container.stop();
      },
    };
  }
  const local = localInfraEnv();
  if (local?.KAFKA_BROKERS) {
    const brokers = splitBrokers(local.KAFKA_BROKERS);
    if (await tcpReachable(brokers[0])) return { brokers, mock: local.KAFKA_MOCK === '1', source: 'infra/local', stop: nothingToStop };
  }
  return undefined;
}

export async function findClickHouse(): Promise<ClickHouseInfra | undefined> {
  if (process.env.CLICKHOUSE_URL) return { url: process.env.CLICKHOUSE_URL, source: 'env', stop: nothingToStop };
  if (await dockerReachable()) {
    const { ClickHouseContainer } = await import('@testcontainers/clickhouse');
    const container = await new ClickHouseContainer('clickhouse/clickhouse-server:24.8-alpine').start();
    return {
      url: container.getConnectionUrl(),
      source: 'testcontainers',
      stop: async () => {
        await container.stop();
      },
    };
  }
  const local = localInfraEnv();
  if (local?.CLICKHOUSE_URL && (await clickHouseAnswers(local.CLICKHOUSE_URL))) {
    return { url: local.CLICKHOUSE_URL, source: 'infra/local', stop: nothingToStop };
  }
  return undefined;
}

/**
 * Declares a suite that needs `kind`: runs `body` with the infrastructure found (stopping it after
 * the file), or, when none was found, warns loudly and skips — or fails, under REQUIRE_INFRA=1.
 * Call with the result of a top-level `await findKafka()` / `await findClickHouse()`.
 */
export function describeWithInfra<T extends { stop(): Promise<void>; source: Source }>(
  name: string,
  kind: 'Kafka' | 'ClickHouse' | 'Kafka and ClickHouse',
  infra: T | undefined,
  body: (infra: T) => void,
  /** How to get the infrastructure, when the usual ways do not apply (the fault tier). */
  how?: string,
): void {
  if (infra) {
    afterAll(() => infra.stop());
    describe(`${name} [${kind} via ${infra.source}]`, () => body(infra));
    return;
  }
  const variables = kind === 'Kafka' ? 'KAFKA_BROKERS' : kind === 'ClickHouse' ? 'CLICKHOUSE_URL' : 'KAFKA_BROKERS and CLICKHOUSE_URL';
  const hint = how ?? `set ${variables}, start a Docker engine, or run \`bash infra/local/start.sh\``;
  if (requireInfra) {
    describe(name, () => {
      it(`needs ${kind}`, () => {
        throw new Error(`${kind} not found and REQUIRE_INFRA=1 (${hint})`);
      });
    });
    return;
  }
  const line = '!'.repeat(100);
  console.warn(`\n${line}\n!!! ${kind} NOT FOUND: "${name}" IS SKIPPED. To run it: ${hint}.\n${line}\n`);
  describe.skip(`${name} (skipped: ${kind} not found)`, () => {
    it(`needs ${kind}`, () => {});
  });
}
