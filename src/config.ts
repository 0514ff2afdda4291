import { parseWebhookSettings, type WebhookSettings } from './webhooks/settings.js';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
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
  /**
   * Kafka: idempotent producer. 'auto' (the default): on when the cluster can serve it (it names a
   * controller among its brokers; librdkafka's mock broker does not), off otherwise, with a warning.
   * true: required (the start fails at once without it); false: off.
   */
  kafkaIdempotent: boolean | 'auto';
  /** Kafka producers, each with one produce request in flight for its share of the partitions. KAFKA_PRODUCERS */
  kafkaProducers: number;
  /**
   * Under load, how long a producer whose request just settled waits for more records before it
   * sends the next (Kafka's linger.ms, between back-to-back requests only). KAFKA_LINGER_MS
   */
  kafkaLingerMs: number;
  /**
   * Kafka consumer group session timeout: how long a group waits for a member that went away
   * without leaving (a kill -9) before its partitions go to the others. KAFKA_SESSION_TIMEOUT_MS
   */
  kafkaSessionTimeoutMs: number;
  kafkaClientId: string;
  /** Partitions of the embedded log's topics */
  embeddedPartitions: number;
  /**
   * Hours the embedded log keeps its records (messages, presence, usage, connections; the apps
   * topic is kept whole). LOG_RETENTION_HOURS, default 96; never below the longest history
   * retention a namespace can have (72 hours), so every projection can be rebuilt from the log.
   * Kafka's is the topics' own retention.ms (README: Audits).
   */
  logRetentionHours: number;
  /** The Ed25519 key that signs the log's audit checkpoints (PEM; made at first start). AUDIT_KEY_FILE, default DATA_DIR/audit-key.pem */
  auditKeyFile: string;
  /**
   * The key AUDIT_KEY_FILE's replaced (PEM): every checkpoint then carries its signature of the new
   * key, so auditors who trust it follow the rotation. AUDIT_PREVIOUS_KEY_FILE, default none.
   */
  auditPreviousKeyFile: string | undefined;
  /** How often a signed checkpoint of the log's hash chains is appended (when the log moved). AUDIT_CHECKPOINT_INTERVAL_MS, default 5 s */
  auditCheckpointIntervalMs: number;
  instanceId: string;
  /** the realtime gateway's timings and limits (src/realtime/settings.ts) */
  realtime: RealtimeSettings;
  /**
   * Whether REALTIME_MAX_CONNECTIONS was set: a value set and lowered to what the open-file limit
   * allows is worth a warning; the default, bounded the same way, is not.
   */
  realtimeMaxConnectionsSet?: boolean;
  /** channel activity and lifecycle events (projections/channels) */
  channels: ChannelSettings;
  /** Origins browsers may call from: true (any), a list, or false (no CORS headers). CORS_ORIGINS */
  corsOrigins: boolean | string[];
  /** GET /ready fails while a consumer has more records than this left to apply. READY_MAX_LAG */
  readyMaxLag: number;
  /** Longest wait for Kafka and ClickHouse to answer at start. STARTUP_TIMEOUT_MS */
  startupTimeoutMs: number;
  /** Longest graceful shutdown; past it the process exits anyway. SHUTDOWN_TIMEOUT_MS */
  shutdownTimeoutMs: number;
  /** How often the in-memory projections save a snapshot (and at close); 0: none. SNAPSHOT_INTERVAL_MS */
  snapshotIntervalMs: number;
  /** Production mode: at most how often a projection's snapshot also goes to the shared store (ClickHouse); 0: never. SHARED_SNAPSHOT_INTERVAL_MS */
  sharedSnapshotIntervalMs: number;
  /** The largest snapshot written to the shared store; a larger one is not shared. SHARED_SNAPSHOT_MAX_BYTES */
  sharedSnapshotMaxBytes: number;
  /** Webhook delivery's bounds (src/webhooks/settings.ts). */
  webhooks: WebhookSettings;
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

/** Where the log and the stores are, as a refused start names them (no URL: it may hold a password). */
export function logAndStores(config: Config, onKafka: boolean): { log: string; stores: string } {
  if (!onKafka) return { log: `${config.dataDir}/log.db`, stores: `the stores of ${config.dataDir}` };
  return { log: `KAFKA_BROKERS=${(config.kafkaBrokers ?? []).join(',')}`, stores: 'the ClickHouse tables of CLICKHOUSE_URL' };
}

export class ConfigError extends Error {}

/** The longest history retention a namespace can have (apps file: retentionHours 24 to 72). */
export const MAX_HISTORY_RETENTION_HOURS = 72;

/**
 * LOG_RETENTION_HOURS: refused below the longest history retention (a start that would delete
 * records history still serves, and that a rebuild needs, is refused, not raised silently).
 */
function logRetentionHours(e: Record<string, string | undefined>): number {
  const raw = e.LOG_RETENTION_HOURS;
  if (raw === undefined || raw === '') return 96;
  const n = Number(raw);
  if (!Number.isInteger(n) || n > 1_000_000) throw new ConfigError(`LOG_RETENTION_HOURS="${raw}" must be a whole number of hours from ${MAX_HISTORY_RETENTION_HOURS} to 1000000`);
  if (n < MAX_HISTORY_RETENTION_HOURS) {
    throw new ConfigError(
      `LOG_RETENTION_HOURS=${n} is below the longest history retention (${MAX_HISTORY_RETENTION_HOURS} hours, a persisted namespace's most): the log must keep every record history serves, so that projections can be rebuilt; set ${MAX_HISTORY_RETENTION_HOURS} or more`,
    );
  }
  return n;
}

/** Command-line flags: name, the variable it sets, what it means (`--help` prints them). */
const FLAG_TABLE: [flag: string, variable: string, help: string][] = [
  ['port', 'PORT', 'HTTP port (default 8080)'],
  ['host', 'HOST', 'listen address, an IP address or a host name (default 0.0.0.0)'],
  ['data-dir', 'DATA_DIR', 'embedded log, projections, default app (default ./data)'],
  ['kafka-brokers', 'KAFKA_BROKERS', 'host:port,...; with --clickhouse-url: production mode'],
  ['clickhouse-url', 'CLICKHOUSE_URL', 'http://host:8123; with --kafka-brokers: production mode'],
  ['apps-file', 'APPS_FILE', 'applications and keys (JSON); without it a default app is created'],
  ['sandbox', 'SANDBOX', 'enable POST /apps, DELETE /apps/:id and POST /stats (test harnesses)'],
  ['log-level', 'LOG_LEVEL', 'fatal, error, warn, info (default), debug, trace, silent'],
  ['cors-origins', 'CORS_ORIGINS', 'origins browsers may call from: * (default), a comma list, or none'],
  ['ready-max-lag', 'READY_MAX_LAG', 'records a consumer may have left before GET /ready fails (default 10000)'],
  ['startup-timeout-ms', 'STARTUP_TIMEOUT_MS', 'wait for Kafka and ClickHouse at start (default 30000)'],
  ['shutdown-timeout-ms', 'SHUTDOWN_TIMEOUT_MS', 'longest graceful shutdown (default 15000)'],
  ['snapshot-interval-ms', 'SNAPSHOT_INTERVAL_MS', 'snapshots of the in-memory projections, for a bounded start; 0 for none (default 60000)'],
  ['max-message-size', 'MAX_MESSAGE_SIZE', 'bytes of one message (default 65536)'],
  ['history-tail-ms', 'HISTORY_TAIL_MS', 'history kept in memory for every channel (default 120000)'],
  ['persisted-retention-hours', 'PERSISTED_RETENTION_HOURS', 'retention of persisted namespaces, 24 to 72 (default 24)'],
  ['log-retention-hours', 'LOG_RETENTION_HOURS', `embedded log's retention, ${MAX_HISTORY_RETENTION_HOURS} or more (default 96)`],
  ['kafka-idempotent', 'KAFKA_IDEMPOTENT', 'idempotent producer: auto (default), 1 (required) or 0'],
  ['kafka-producers', 'KAFKA_PRODUCERS', 'produce requests in flight, one per producer, 1 to 16 (default 1)'],
  ['kafka-linger-ms', 'KAFKA_LINGER_MS', 'under load, wait between produce requests for more records, 0 to 50 ms (default 1)'],
  ['kafka-session-timeout-ms', 'KAFKA_SESSION_TIMEOUT_MS', 'consumer group session timeout, 6000 to 300000 (default 30000)'],
  ['instance-id', 'INSTANCE_ID', 'this instance\'s stable name (default: the pid)'],
  ['max-messages-per-publish', 'MAX_MESSAGES_PER_PUBLISH', 'messages in one publish (default 1000)'],
  ['max-publish-bytes', 'MAX_PUBLISH_BYTES', 'bytes of one publish (default 524288)'],
  ['max-batch-messages', 'MAX_BATCH_MESSAGES', 'messages of one batch publish (default 10000)'],
  ['max-body-bytes', 'MAX_BODY_BYTES', 'largest request body (default 2097152)'],
  ['max-body-depth', 'MAX_BODY_DEPTH', 'levels of arrays and objects nested in a request body (default 512)'],
  ['max-inflight-body-bytes', 'MAX_INFLIGHT_BODY_BYTES', 'request bodies held at once, all clients (default 134217728)'],
  ['max-inflight-response-bytes', 'MAX_INFLIGHT_RESPONSE_BYTES', 'large response bodies not yet read by their clients, all clients (default 268435456)'],
  ['request-timeout-ms', 'REQUEST_TIMEOUT_MS', 'time to receive a whole request (default 30000)'],
  ['max-connections', 'MAX_CONNECTIONS', 'open HTTP connections (default 10000)'],
  ['max-token-nonces', 'MAX_TOKEN_NONCES', 'token request nonces remembered (default 500000)'],
  ['max-token-nonces-per-app', 'MAX_TOKEN_NONCES_PER_APP', 'nonces one app may hold (default 100000)'],
  ['max-revocations', 'MAX_REVOCATIONS', 'token revocations remembered (src/limits.ts)'],
  ['app-events-per-minute', 'APP_EVENTS_PER_MINUTE', 'revocations, key and rule changes one app may add to the log a minute (default 60)'],
  ['app-events-burst', 'APP_EVENTS_BURST', 'the same, at once (default 120)'],
  ['log-append-timeout-ms', 'LOG_APPEND_TIMEOUT_MS', 'time Kafka has to acknowledge an append (default 5000)'],
  ['max-unstored-rows', 'MAX_UNSTORED_ROWS', 'history rows held while the store is down (default 200000)'],
  ['max-unstored-bytes', 'MAX_UNSTORED_BYTES', 'bytes of the history rows held while the store is down (default 268435456)'],
  ['read-your-writes-timeout-ms', 'READ_YOUR_WRITES_TIMEOUT_MS', "time a read waits for the instance's own writes to apply (default 5000)"],
  ['stats-cache-rows', 'STATS_CACHE_ROWS', 'stats rows held in memory for GET /stats, 0 for none (default 100000)'],
  ['stats-cache-max-age-ms', 'STATS_CACHE_MAX_AGE_MS', 'age at which held stats rows are read again (default 60000)'],
];
const FLAGS: Record<string, string> = Object.fromEntries(FLAG_TABLE.map(([flag, variable]) => [flag, variable]));
/** Flags that take no value (`--sandbox` is SANDBOX=1). */
const SWITCHES = new Set(['sandbox']);

/** `--help` of the service: every flag with its variable. */
export function serviceUsage(command = 'channel-messaging'): string {
  const rows = FLAG_TABLE.map(([flag, variable, help]) => `  --${(flag + (SWITCHES.has(flag) ? '' : ' <value>')).padEnd(34)} ${variable.padEnd(26)} ${help}`);
  return (
    `Usage: ${command} [flags]\n\n` +
    `Runs the channel messaging service. Every flag overrides the environment variable beside it;\n` +
    `the README's Configuration section has the rest (REALTIME_*, EMBEDDED_PARTITIONS, KAFKA_CLIENT_ID).\n\n` +
    `${rows.join('\n')}\n  --help, -h${' '.repeat(61)}this text\n`
  );
}

/** The command line, read by node:util parseArgs: the flags given, and whether --help was. */
/** Flags naming a directory or file the service (or a command-line tool) reads and writes. */
const PATH_FLAGS = ['data-dir', 'apps-file'] as const;

/**
 * A path flag given empty (`--data-dir "$DIR"` with DIR unset) is refused: as unset, it became the
 * default ./data, the data directory of whatever service runs from here, not the one meant.
 */
export function checkPathFlag(flag: (typeof PATH_FLAGS)[number], value: string | undefined): void {
  if (value !== undefined && value.trim() === '') {
    throw new ConfigError(`--${flag} was given an empty value (an unset shell variable?); name the ${flag === 'data-dir' ? 'directory' : 'file'}, or leave the flag out for ${flag === 'data-dir' ? 'DATA_DIR or ./data' : 'APPS_FILE'}`);
  }
}

export function parseCommandLine(argv: string[]): { help: boolean; flags: Record<string, string> } {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(FLAG_TABLE.map(([flag]) => [flag, { type: SWITCHES.has(flag) ? ('boolean' as const) : ('string' as const) }])),
      },
    });
  } catch (err) {
    const message = (err as Error).message;
    const unknown = /Unknown option '(-[^']*)'/.exec(message);
    if (unknown) throw new ConfigError(`unknown flag ${unknown[1]} (see --help)`);
    const positional = /Unexpected argument '([^']*)'/.exec(message);
    if (positional) throw new ConfigError(`unexpected argument "${positional[1]}"; flags look like --port 8080 (see --help)`);
    throw new ConfigError(`${message.split('\n')[0]} (see --help)`);
  }
  const flags: Record<string, string> = {};
  let help = false;
  for (const name of PATH_FLAGS) checkPathFlag(name, (parsed.values as Record<string, unknown>)[name] as string | undefined);
  for (const [name, value] of Object.entries(parsed.values)) {
    if (name === 'help') help = value === true;
    else flags[FLAGS[name]] = value === true ? '1' : value === false ? '0' : String(value);
  }
  return { help, flags };
}

/** Command-line flags (`--port 9000`, `--sandbox`) override the environment variable of the same name. */
export function mergeFlags(env: Record<string, string | undefined>, argv: string[]): Record<string, string | undefined> {
  return { ...env, ...parseCommandLine(argv).flags };
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
    // A port out of range was taken, and the start then waited STARTUP_TIMEOUT_MS for a broker no address has.
    const port = Number(b.slice(b.lastIndexOf(':') + 1));
    if (port < 1 || port > 65535) throw new ConfigError(`KAFKA_BROKERS entry "${b}" has port ${port}: a port is from 1 to 65535`);
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
  const host = e.HOST || '0.0.0.0';
  // An IP address, or a host name (resolved when the service listens).
  if (!isIP(host) && !/^(?=.{1,253}$)[a-zA-Z0-9]([a-zA-Z0-9-]{0,62})(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}))*$/.test(host)) {
    throw new ConfigError(`HOST="${host}" must be an IP address (0.0.0.0, ::, 127.0.0.1) or a host name`);
  }
  return {
    port: int(e, 'PORT', 8080, 0, 65535),
    host,
    dataDir: resolve(e.DATA_DIR || './data'),
    kafkaBrokers,
    clickhouseUrl: clickhouse || undefined,
    appsFile: e.APPS_FILE ? resolve(e.APPS_FILE) : undefined,
    sandbox: bool(e, 'SANDBOX', false),
    logLevel,
    limits: parseLimits(e),
    webhooks: parseWebhookSettings(e, (message) => {
      throw new ConfigError(message);
    }),
    historyTailMs: int(e, 'HISTORY_TAIL_MS', 120_000, 1000, 3600_000),
    persistedRetentionHours: int(e, 'PERSISTED_RETENTION_HOURS', 24, 24, 72),
    kafkaProducers: int(e, 'KAFKA_PRODUCERS', 1, 1, 16),
    kafkaLingerMs: int(e, 'KAFKA_LINGER_MS', 1, 0, 50),
    kafkaSessionTimeoutMs: int(e, 'KAFKA_SESSION_TIMEOUT_MS', 30_000, 6_000, 300_000),
    kafkaIdempotent: e.KAFKA_IDEMPOTENT === undefined || e.KAFKA_IDEMPOTENT === '' || e.KAFKA_IDEMPOTENT.toLowerCase() === 'auto' ? 'auto' : bool(e, 'KAFKA_IDEMPOTENT', true),
    kafkaClientId: e.KAFKA_CLIENT_ID || 'channel-messaging',
    embeddedPartitions: int(e, 'EMBEDDED_PARTITIONS', 1, 1, 64),
    logRetentionHours: logRetentionHours(e),
    auditKeyFile: resolve(e.AUDIT_KEY_FILE || `${resolve(e.DATA_DIR || './data')}/audit-key.pem`),
    auditPreviousKeyFile: e.AUDIT_PREVIOUS_KEY_FILE ? resolve(e.AUDIT_PREVIOUS_KEY_FILE) : undefined,
    // Short: what a crash leaves unsigned, and a cut could take unseen, is at most this long (README: Replay for audits).
    auditCheckpointIntervalMs: int(e, 'AUDIT_CHECKPOINT_INTERVAL_MS', 5_000, 100, 24 * 3600_000),
    instanceId: e.INSTANCE_ID || `${process.pid}`,
    realtime: parseRealtime(e),
    realtimeMaxConnectionsSet: e.REALTIME_MAX_CONNECTIONS !== undefined && e.REALTIME_MAX_CONNECTIONS !== '',
    channels: parseChannels(e),
    corsOrigins: parseOrigins(e.CORS_ORIGINS),
    readyMaxLag: int(e, 'READY_MAX_LAG', 10_000, 0, 1_000_000_000),
    startupTimeoutMs: int(e, 'STARTUP_TIMEOUT_MS', 30_000, 100, 3600_000),
    shutdownTimeoutMs: int(e, 'SHUTDOWN_TIMEOUT_MS', 15_000, 100, 3600_000),
    snapshotIntervalMs: int(e, 'SNAPSHOT_INTERVAL_MS', 60_000, 0, 24 * 3600_000),
    sharedSnapshotIntervalMs: int(e, 'SHARED_SNAPSHOT_INTERVAL_MS', 600_000, 0, 7 * 24 * 3600_000),
    sharedSnapshotMaxBytes: int(e, 'SHARED_SNAPSHOT_MAX_BYTES', 64 * 1024 * 1024, 1024, 256 * 1024 * 1024),
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

/** CORS_ORIGINS: `*` (default, any origin), `none`, or a comma list of origins (`https://app.example.com`). */
function parseOrigins(raw: string | undefined): boolean | string[] {
  const value = raw?.trim() ?? '';
  if (value === '' || value === '*') return true;
  if (value.toLowerCase() === 'none') return false;
  const origins = value.split(',').map((o) => o.trim()).filter((o) => o !== '');
  for (const origin of origins) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin) {
      throw new ConfigError(`CORS_ORIGINS entry "${origin}" must be an origin such as https://app.example.com (scheme, host, port if any; no path), or set CORS_ORIGINS to * or none`);
    }
  }
  return origins;
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
    maxInboundBytesRate: int(e, 'REALTIME_MAX_INBOUND_BYTES_RATE', d.maxInboundBytesRate, 1024, 1024 * 1024 * 1024),
    floodCooldownMs: int(e, 'REALTIME_FLOOD_COOLDOWN_MS', d.floodCooldownMs, 0, 24 * 3600 * 1000),
    maxFrameDepth: int(e, 'REALTIME_MAX_FRAME_DEPTH', d.maxFrameDepth, 4, 10_000),
    maxFrameWidth: int(e, 'REALTIME_MAX_FRAME_WIDTH', d.maxFrameWidth, 16, 10_000_000),
    attachmentEventsRate: int(e, 'REALTIME_ATTACHMENT_EVENTS_RATE', d.attachmentEventsRate, 1, 1_000_000),
    maxBufferedBytes: int(e, 'REALTIME_MAX_BUFFERED_BYTES', d.maxBufferedBytes, 64 * 1024, 1024 * 1024 * 1024),
    maxInflightBytes: int(e, 'REALTIME_MAX_INFLIGHT_BYTES', d.maxInflightBytes, 1024, 1024 * 1024 * 1024),
    maxTotalInflightBytes: int(e, 'REALTIME_MAX_TOTAL_INFLIGHT_BYTES', d.maxTotalInflightBytes, 1024, 64 * 1024 * 1024 * 1024),
    maxMembersPerConnection: int(e, 'REALTIME_MAX_MEMBERS_PER_CONNECTION', d.maxMembersPerConnection, 1, 10_000_000),
    maxPresenceMembers: int(e, 'REALTIME_MAX_PRESENCE_MEMBERS', d.maxPresenceMembers, 1, 1_000_000_000),
    maxPresenceMembersPerApp: int(e, 'REALTIME_MAX_PRESENCE_MEMBERS_PER_APP', d.maxPresenceMembersPerApp, 1, 1_000_000_000),
    cometMaxPendingRequests: int(e, 'REALTIME_COMET_MAX_PENDING_REQUESTS', d.cometMaxPendingRequests, 1, 100),
    cometMaxSendBytes: int(e, 'REALTIME_COMET_MAX_SEND_BYTES', d.cometMaxSendBytes, 1024, 256 * 1024 * 1024),
    cometMaxUnpolledPerAddress: int(e, 'REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS', d.cometMaxUnpolledPerAddress, 1, 10_000_000),
    maxReplayScanRecords: int(e, 'REALTIME_MAX_REPLAY_SCAN', d.maxReplayScanRecords, 1000, 100_000_000),
    instanceAliveIntervalMs: int(e, 'REALTIME_INSTANCE_ALIVE_MS', d.instanceAliveIntervalMs, 100, 3600_000),
    occupancyIntervalMs: int(e, 'REALTIME_OCCUPANCY_INTERVAL_MS', d.occupancyIntervalMs, 100, 600_000),
    tokenRenewLeadMs: int(e, 'REALTIME_TOKEN_RENEW_LEAD_MS', d.tokenRenewLeadMs, 0, 3600_000),
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
    maxBodyDepth: int(e, 'MAX_BODY_DEPTH', d.maxBodyDepth, 64, 100_000),
    maxInflightBodyBytes: int(e, 'MAX_INFLIGHT_BODY_BYTES', d.maxInflightBodyBytes, MiB, 64 * 1024 * MiB),
    maxInflightResponseBytes: int(e, 'MAX_INFLIGHT_RESPONSE_BYTES', d.maxInflightResponseBytes, MiB, 64 * 1024 * MiB),
    requestTimeoutMs: int(e, 'REQUEST_TIMEOUT_MS', d.requestTimeoutMs, 1000, 3600_000),
    maxConnections: int(e, 'MAX_CONNECTIONS', d.maxConnections, 1, 1_000_000),
    logAppendTimeoutMs: int(e, 'LOG_APPEND_TIMEOUT_MS', d.logAppendTimeoutMs, 100, 600_000),
    maxUnstoredRows: int(e, 'MAX_UNSTORED_ROWS', d.maxUnstoredRows, 1000, 10_000_000),
    maxUnstoredBytes: int(e, 'MAX_UNSTORED_BYTES', d.maxUnstoredBytes, 1024 * 1024, 64 * 1024 * MiB),
    readYourWritesMs: int(e, 'READ_YOUR_WRITES_TIMEOUT_MS', d.readYourWritesMs, 10, 600_000),
    statsCacheRows: int(e, 'STATS_CACHE_ROWS', d.statsCacheRows, 0, 100_000_000),
    statsCacheMaxAgeMs: int(e, 'STATS_CACHE_MAX_AGE_MS', d.statsCacheMaxAgeMs, 0, 86_400_000),
    maxStatusActivations: int(e, 'CHANNEL_STATUS_ACTIVATIONS', d.maxStatusActivations, 4, 100_000_000),
    maxActiveChannels: int(e, 'MAX_ACTIVE_CHANNELS', d.maxActiveChannels, 1, 100_000_000),
    maxActiveChannelsPerApp: int(e, 'MAX_ACTIVE_CHANNELS_PER_APP', d.maxActiveChannelsPerApp, 1, 100_000_000),

    maxTokenNonces: int(e, 'MAX_TOKEN_NONCES', d.maxTokenNonces, 1, 100_000_000),
    maxTokenNoncesPerApp: int(e, 'MAX_TOKEN_NONCES_PER_APP', d.maxTokenNoncesPerApp, 1, 100_000_000),
    maxRevocations: int(e, 'MAX_REVOCATIONS', d.maxRevocations, 1, 10_000_000),
    appEventsPerMinute: int(e, 'APP_EVENTS_PER_MINUTE', d.appEventsPerMinute, 1, 1_000_000),
    appEventsBurst: int(e, 'APP_EVENTS_BURST', d.appEventsBurst, 1, 1_000_000),
    maxKeysPerApp: int(e, 'MAX_KEYS_PER_APP', d.maxKeysPerApp, 1, 100_000),
    maxSandboxApps: int(e, 'MAX_SANDBOX_APPS', d.maxSandboxApps, 1, 100_000),
    maxBatchPresenceMembers: int(e, 'MAX_BATCH_PRESENCE_MEMBERS', d.maxBatchPresenceMembers, 1, 10_000_000),
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
