import { resolve } from 'node:path';
import { DEFAULT_LIMITS } from './limits.js';

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  kafkaBrokers?: string[];
  clickhouseUrl?: string;
  appsFile?: string;
  sandbox: boolean;
  logLevel: string;
  /** max size of one message (name, data, clientId, extras), bytes */
  maxMessageSize: number;
  maxMessagesPerPublish: number;
  /** in-memory history of every channel, ms (spec: two minutes) */
  historyTailMs: number;
  /** default retention of persisted namespaces, hours (24 to 72) */
  persistedRetentionHours: number;
  /** Kafka: idempotent producer (on for real Kafka; librdkafka's mock broker cannot take it) */
  kafkaIdempotent: boolean;
  kafkaClientId: string;
  /** Partitions of the embedded log's topics */
  embeddedPartitions: number;
  instanceId: string;

  // Faults of the production parts (prod-faults).
  /** limits.ts: logAppendTimeoutMs */
  logAppendTimeoutMs: number;
  /** limits.ts: maxUnstoredRows */
  maxUnstoredRows: number;
}

export type Mode = 'embedded' | 'production';
export const modeOf = (config: Config): Mode => (config.kafkaBrokers && config.clickhouseUrl ? 'production' : 'embedded');

export class ConfigError extends Error {}

const FLAGS: Record<string, string> = {
  port: 'PORT',
  host: 'HOST',
  'data-dir': 'DATA_DIR',
  'kafka-brokers': 'KAFKA_BROKERS',
  'clickhouse-url': 'CLICKHOUSE_URL',
  'apps-file': 'APPS_FILE',
  sandbox: 'SANDBOX',
  'log-level': 'LOG_LEVEL',
  'max-message-size': 'MAX_MESSAGE_SIZE',
  'history-tail-ms': 'HISTORY_TAIL_MS',
  'persisted-retention-hours': 'PERSISTED_RETENTION_HOURS',
  'kafka-idempotent': 'KAFKA_IDEMPOTENT',
  'instance-id': 'INSTANCE_ID',
};

/** Command-line flags (`--port 9000`, `--sandbox`) override the environment variable of the same name. */
export function mergeFlags(env: Record<string, string | undefined>, argv: string[]): Record<string, string | undefined> {
  const merged = { ...env };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument "${arg}"; flags look like --port 8080`);
    const [name, inline] = arg.slice(2).split('=', 2);
    const variable = FLAGS[name];
    if (!variable) throw new ConfigError(`unknown flag --${name}; known flags: ${Object.keys(FLAGS).map((f) => `--${f}`).join(' ')}`);
    if (inline !== undefined) merged[variable] = inline;
    else if (argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) merged[variable] = argv[++i];
    else merged[variable] = '1';
  }
  return merged;
}

function int(env: Record<string, string | undefined>, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name}="${raw}" must be a whole number from ${min} to ${max}`);
  return n;
}

function bool(env: Record<string, string | undefined>, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name}="${raw}" must be 1 or 0 (true or false)`);
}

/** Reads the configuration; anything wrong fails with a message that says what to fix. */
export function parseConfig(env: Record<string, string | undefined>, argv: string[] = []): Config {
  const e = mergeFlags(env, argv);
  const kafka = e.KAFKA_BROKERS?.trim();
  const clickhouse = e.CLICKHOUSE_URL?.trim();
  if (!!kafka !== !!clickhouse) {
    throw new ConfigError('set both KAFKA_BROKERS and CLICKHOUSE_URL for production mode, or neither for the embedded mode');
  }
  const kafkaBrokers = kafka ? kafka.split(',').map((b) => b.trim()) : undefined;
  for (const b of kafkaBrokers ?? []) {
    if (!/^[\w.-]+:\d+$/.test(b)) throw new ConfigError(`KAFKA_BROKERS entry "${b}" must look like host:port`);
  }
  if (clickhouse) {
    try {
      const url = new URL(clickhouse);
      if (!/^https?:$/.test(url.protocol)) throw new Error();
    } catch {
      throw new ConfigError(`CLICKHOUSE_URL="${clickhouse}" must be an http(s) URL such as http://127.0.0.1:8123`);
    }
  }
  const logLevel = e.LOG_LEVEL ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL="${logLevel}" must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  return {
    port: int(e, 'PORT', 8080, 0, 65535),
    host: e.HOST || '0.0.0.0',
    dataDir: resolve(e.DATA_DIR || './data'),
    kafkaBrokers,
    clickhouseUrl: clickhouse || undefined,
    appsFile: e.APPS_FILE ? resolve(e.APPS_FILE) : undefined,
    sandbox: bool(e, 'SANDBOX', false),
    logLevel,
    maxMessageSize: int(e, 'MAX_MESSAGE_SIZE', 65536, 1, 16 * 1024 * 1024),
    maxMessagesPerPublish: 1000,
    historyTailMs: int(e, 'HISTORY_TAIL_MS', 120_000, 1000, 3600_000),
    persistedRetentionHours: int(e, 'PERSISTED_RETENTION_HOURS', 24, 24, 72),
    kafkaIdempotent: bool(e, 'KAFKA_IDEMPOTENT', true),
    kafkaClientId: e.KAFKA_CLIENT_ID || 'channel-messaging',
    embeddedPartitions: int(e, 'EMBEDDED_PARTITIONS', 1, 1, 64),
    instanceId: e.INSTANCE_ID || `${process.pid}`,

    logAppendTimeoutMs: int(e, 'LOG_APPEND_TIMEOUT_MS', DEFAULT_LIMITS.logAppendTimeoutMs, 100, 600_000),
    maxUnstoredRows: int(e, 'MAX_UNSTORED_ROWS', DEFAULT_LIMITS.maxUnstoredRows, 1000, 10_000_000),
  };
}
