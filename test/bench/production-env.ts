// Production mode is measured only when its infrastructure is there: KAFKA_BROKERS and
// CLICKHOUSE_URL in the environment, or the env file that `bash infra/local/start.sh` writes.
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

export interface FoundProduction {
  env: Record<string, string>;
  /** the env file it came from, or undefined for this process's environment */
  file?: string;
  /** librdkafka's mock broker (infra/local), not a real Kafka */
  kafkaMock: boolean;
  /** The local infrastructure's processes (infra/local's INFRA_KAFKA_PID, INFRA_CLICKHOUSE_PID), whose CPU the bench reads */
  pids: { kafka?: number; clickhouse?: number };
}

export type ProductionEnv = FoundProduction | { skipped: string };

/** Reads `export NAME=value` lines. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) out[m[1]] = m[2].trim().replace(/^(['"])(.*)\1$/, '$2');
  }
  return out;
}

export async function productionEnv(env: Record<string, string | undefined>, root: string): Promise<ProductionEnv> {
  let found: Record<string, string | undefined> = env;
  let file: string | undefined;
  if (!(env.KAFKA_BROKERS && env.CLICKHOUSE_URL)) {
    file = join(env.INFRA_STATE_DIR ?? join(root, 'infra/.state'), 'env');
    if (!existsSync(file)) {
      return { skipped: 'no KAFKA_BROKERS + CLICKHOUSE_URL and no infra/.state/env; `bash infra/local/start.sh` starts local infrastructure' };
    }
    found = parseEnvFile(readFileSync(file, 'utf8'));
    if (!(found.KAFKA_BROKERS && found.CLICKHOUSE_URL)) return { skipped: `${file} lacks KAFKA_BROKERS or CLICKHOUSE_URL` };
  }
  const brokers = found.KAFKA_BROKERS!;
  const clickhouse = found.CLICKHOUSE_URL!;
  // The bench puts load only on this machine, so it drives only local infrastructure.
  const hosts = [...brokers.split(',').map((b) => b.trim().replace(/:\d+$/, '')), hostOf(clickhouse)];
  const remote = hosts.find((h) => !LOOPBACK.has(h));
  if (remote !== undefined) return { skipped: `${remote} is not a loopback address; the bench loads only local infrastructure` };
  if (!existsSync(join(root, 'src/production-adapters.ts'))) return { skipped: 'src/production-adapters.ts does not exist yet' };

  try {
    const res = await fetch(new URL('/ping', clickhouse), { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return { skipped: `ClickHouse at ${clickhouse} answers /ping with ${res.status}` };
  } catch (err) {
    return { skipped: `ClickHouse at ${clickhouse} does not answer /ping (${(err as Error).message})` };
  }
  const broker = brokers.split(',')[0].trim();
  if (!(await reachable(broker))) return { skipped: `Kafka broker ${broker} does not accept connections` };

  const kafkaMock = found.KAFKA_MOCK === '1';
  const pid = (v: string | undefined): number | undefined => (v && /^\d+$/.test(v) ? Number(v) : undefined);
  return {
    file,
    kafkaMock,
    pids: { kafka: pid(found.INFRA_KAFKA_PID), clickhouse: pid(found.INFRA_CLICKHOUSE_PID) },
    env: {
      KAFKA_BROKERS: brokers,
      CLICKHOUSE_URL: clickhouse,
      // librdkafka's mock broker cannot take idempotent producers.
      ...(kafkaMock ? { KAFKA_IDEMPOTENT: '0' } : {}),
    },
  };
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return url;
  }
}

function reachable(hostPort: string): Promise<boolean> {
  const i = hostPort.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = connect({ host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)), timeout: 2000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Drops the ClickHouse tables a bench run created (its Kafka topics stay: the mock broker forgets them on restart). */
export async function dropTables(clickhouseUrl: string, prefix: string): Promise<void> {
  const query = async (sql: string): Promise<string> => {
    const res = await fetch(clickhouseUrl, { method: 'POST', body: sql, signal: AbortSignal.timeout(60_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`ClickHouse: ${text.slice(0, 200)}`);
    return text;
  };
  const names = await query(`SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${prefix}')`);
  for (const name of names.split('\n').filter((n) => n !== '')) await query(`DROP TABLE IF EXISTS \`${name}\``);
}
