import { resolve } from 'node:path';
import { DEFAULT_LIMITS, type Limits } from './limits.js';
import { DEFAULT_REALTIME_SETTINGS, type RealtimeSettings } from './realtime/settings.js';

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  kafkaBrokers?: string[];
  clickhouseUrl?: string;
  appsFile?: string;
  sandbox: boolean;
  logLevel: string;
  /** every limit the service enforces (src/limits.ts) */
  limits: Limits;
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
  /** the realtime gateway's timings and limits (src/realtime/settings.ts) */
  realtime: RealtimeSettings;
  /** channel activity and lifecycle events (projections/channels) */
  channels: ChannelSettings;
  // Faults of the production parts (prod-faults).
}

export interface ChannelSettings {
  /** A channel stays active this long after its last use (at most HISTORY_TAIL_MS). CHANNEL_IDLE_MS */
  idleMs: number;
  /** At most one channel.occupancy event per channel this often. CHANNEL_OCCUPANCY_THROTTLE_MS */
  occupancyThrottleMs: number;
  /** The region named in channel.region.* events. REGION */
  region: string;
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
  'max-messages-per-publish': 'MAX_MESSAGES_PER_PUBLISH',
  'max-publish-bytes': 'MAX_PUBLISH_BYTES',
  'max-batch-messages': 'MAX_BATCH_MESSAGES',
  'max-body-bytes': 'MAX_BODY_BYTES',
  'max-inflight-body-bytes': 'MAX_INFLIGHT_BODY_BYTES',
  'request-timeout-ms': 'REQUEST_TIMEOUT_MS',
  'max-connections': 'MAX_CONNECTIONS',
  'max-token-nonces': 'MAX_TOKEN_NONCES',
  'max-token-nonces-per-app': 'MAX_TOKEN_NONCES_PER_APP',
  'max-revocations': 'MAX_REVOCATIONS',
  'log-append-timeout-ms': 'LOG_APPEND_TIMEOUT_MS',
  'max-unstored-rows': 'MAX_UNSTORED_ROWS',
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
    limits: parseLimits(e),
    historyTailMs: int(e, 'HISTORY_TAIL_MS', 120_000, 1000, 3600_000),
    persistedRetentionHours: int(e, 'PERSISTED_RETENTION_HOURS', 24, 24, 72),
    kafkaIdempotent: bool(e, 'KAFKA_IDEMPOTENT', true),
    kafkaClientId: e.KAFKA_CLIENT_ID || 'channel-messaging',
    embeddedPartitions: int(e, 'EMBEDDED_PARTITIONS', 1, 1, 64),
    instanceId: e.INSTANCE_ID || `${process.pid}`,
    realtime: parseRealtime(e),
    channels: parseChannels(e),

  };
}

function parseChannels(e: Record<string, string | undefined>): ChannelSettings {
  const tail = int(e, 'HISTORY_TAIL_MS', 120_000, 1000, 3600_000);
  // Activity is rebuilt at start from the log's last HISTORY_TAIL_MS (what the memory tail reads).
  const idleMs = int(e, 'CHANNEL_IDLE_MS', tail, 100, 3600_000);
  if (idleMs > tail) throw new ConfigError(`CHANNEL_IDLE_MS (${idleMs}) must be at most HISTORY_TAIL_MS (${tail})`);
  const region = e.REGION || 'local';
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(region)) throw new ConfigError(`REGION="${region}" must be 1 to 64 letters, digits, "_", "." or "-"`);
  return { idleMs, occupancyThrottleMs: int(e, 'CHANNEL_OCCUPANCY_THROTTLE_MS', 1000, 0, 3600_000), region };
}

/** The realtime gateway's settings that can be set (src/realtime/settings.ts). */
function parseRealtime(e: Record<string, string | undefined>): RealtimeSettings {
  const d = DEFAULT_REALTIME_SETTINGS;
  return {
    ...d,
    connectionStateTtlMs: int(e, 'REALTIME_CONNECTION_STATE_TTL_MS', d.connectionStateTtlMs, 1000, 24 * 3600_000),
    maxIdleIntervalMs: int(e, 'REALTIME_MAX_IDLE_INTERVAL_MS', d.maxIdleIntervalMs, 1000, 3600_000),
    presenceDropMs: int(e, 'REALTIME_PRESENCE_DROP_MS', d.presenceDropMs, 0, 3600_000),
    maxFrameBytes: int(e, 'REALTIME_MAX_FRAME_BYTES', d.maxFrameBytes, 1024, 256 * 1024 * 1024),
    maxConnections: int(e, 'REALTIME_MAX_CONNECTIONS', d.maxConnections, 1, 10_000_000),
    maxChannelsPerConnection: int(e, 'REALTIME_MAX_CHANNELS_PER_CONNECTION', d.maxChannelsPerConnection, 1, 1_000_000),
    maxInboundRate: int(e, 'REALTIME_MAX_INBOUND_RATE', d.maxInboundRate, 1, 1_000_000),
    maxBufferedBytes: int(e, 'REALTIME_MAX_BUFFERED_BYTES', d.maxBufferedBytes, 64 * 1024, 1024 * 1024 * 1024),
    maxInflightBytes: int(e, 'REALTIME_MAX_INFLIGHT_BYTES', d.maxInflightBytes, 1024, 1024 * 1024 * 1024),
    maxTotalInflightBytes: int(e, 'REALTIME_MAX_TOTAL_INFLIGHT_BYTES', d.maxTotalInflightBytes, 1024, 64 * 1024 * 1024 * 1024),
    maxMembersPerConnection: int(e, 'REALTIME_MAX_MEMBERS_PER_CONNECTION', d.maxMembersPerConnection, 1, 10_000_000),
    maxPresenceMembers: int(e, 'REALTIME_MAX_PRESENCE_MEMBERS', d.maxPresenceMembers, 1, 1_000_000_000),
    maxPresenceMembersPerApp: int(e, 'REALTIME_MAX_PRESENCE_MEMBERS_PER_APP', d.maxPresenceMembersPerApp, 1, 1_000_000_000),
    instanceAliveIntervalMs: int(e, 'REALTIME_INSTANCE_ALIVE_MS', d.instanceAliveIntervalMs, 100, 3600_000),
  };
}

/** The limits that can be set (src/limits.ts); the rest keep their defaults. */
function parseLimits(e: Record<string, string | undefined>): Limits {
  const d = DEFAULT_LIMITS;
  const MiB = 1024 * 1024;
  const limits: Limits = {
    ...d,
    maxMessageSize: int(e, 'MAX_MESSAGE_SIZE', d.maxMessageSize, 1, 16 * MiB),
    maxMessagesPerPublish: int(e, 'MAX_MESSAGES_PER_PUBLISH', d.maxMessagesPerPublish, 1, 100_000),
    maxPublishBytes: int(e, 'MAX_PUBLISH_BYTES', d.maxPublishBytes, 1, 64 * MiB),
    maxBatchMessages: int(e, 'MAX_BATCH_MESSAGES', d.maxBatchMessages, 1, 1_000_000),
    maxBodyBytes: int(e, 'MAX_BODY_BYTES', d.maxBodyBytes, 1024, 256 * MiB),
    maxInflightBodyBytes: int(e, 'MAX_INFLIGHT_BODY_BYTES', d.maxInflightBodyBytes, MiB, 64 * 1024 * MiB),
    requestTimeoutMs: int(e, 'REQUEST_TIMEOUT_MS', d.requestTimeoutMs, 1000, 3600_000),
    maxConnections: int(e, 'MAX_CONNECTIONS', d.maxConnections, 1, 1_000_000),
    logAppendTimeoutMs: int(e, 'LOG_APPEND_TIMEOUT_MS', d.logAppendTimeoutMs, 100, 600_000),
    maxUnstoredRows: int(e, 'MAX_UNSTORED_ROWS', d.maxUnstoredRows, 1000, 10_000_000),

    maxTokenNonces: int(e, 'MAX_TOKEN_NONCES', d.maxTokenNonces, 1, 100_000_000),
    maxTokenNoncesPerApp: int(e, 'MAX_TOKEN_NONCES_PER_APP', d.maxTokenNoncesPerApp, 1, 100_000_000),
    maxRevocations: int(e, 'MAX_REVOCATIONS', d.maxRevocations, 1, 10_000_000),
  };
  // A publish of one message of the largest size must be possible.
  if (e.MAX_PUBLISH_BYTES === undefined || e.MAX_PUBLISH_BYTES === '') limits.maxPublishBytes = Math.max(limits.maxPublishBytes, limits.maxMessageSize);
  if (limits.maxPublishBytes < limits.maxMessageSize) {
    throw new ConfigError(`MAX_PUBLISH_BYTES (${limits.maxPublishBytes}) must be at least MAX_MESSAGE_SIZE (${limits.maxMessageSize})`);
  }
  limits.maxBatchBytes = Math.max(limits.maxBatchBytes, limits.maxPublishBytes);
  limits.headersTimeoutMs = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return limits;
}
