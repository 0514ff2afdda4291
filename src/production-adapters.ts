import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Adapters } from './adapter-port.js';
import { KafkaLog, type KafkaLogOptions } from './log/kafka/kafka-log.js';
import { probeKafka } from './log/kafka/kafka-probe.js';
import { checkpointing } from './audit/checkpointing.js';
import { createClickHouseClient, waitForClickHouse } from './stores/clickhouse/client.js';
import { ClickHouseHistoryStore, type RefusedRow } from '../projections/history/clickhouse-history-store.js';
import { ClickHouseStatsStore } from '../projections/stats/clickhouse-stats-store.js';
import { ClickHouseWebhookCheckpoints } from '../projections/webhooks/webhook-checkpoints.js';
import { ClickHouseSharedSnapshots } from '../projections/shared-snapshots.js';
import { unreadable } from './log/event-shape.js';

export interface Isolation {
  /** Prepended to Kafka topic names (tests and tenants use their own topics). */
  topicPrefix?: string;
  /** Prepended to ClickHouse table names. */
  tablePrefix?: string;
  /** Prepended to the projections' checkpoint names (a rebuild keeps checkpoints of its own). */
  consumerPrefix?: string;
  /**
   * The log read only, beside a running instance (the rebuild): no signed checkpoints (they are the
   * instance's: a rebuild's log appended one at its close, with the instance's key, and rewrote the
   * witness beside it), and no topic made (createTopics: false).
   */
  readOnlyLog?: boolean;
}

/**
 * Production mode (ARCHITECTURE): the log on Kafka, history and stats in ClickHouse. One
 * ClickHouse client serves every store and is closed with the adapters.
 */
export async function productionAdapters(config: Config, logger: Logger, isolation: Isolation = {}): Promise<Adapters> {
  // Both answer within STARTUP_TIMEOUT_MS, or the start ends saying which one did not; meanwhile
  // "waiting for Kafka at host:port" (or ClickHouse) about once a second.
  const cluster = await probeKafka(config.kafkaBrokers!, config.kafkaClientId, config.startupTimeoutMs, logger);
  let idempotent = config.kafkaIdempotent === true;
  if (isolation.readOnlyLog) {
    // A log read only (the rebuild) produces nothing: KAFKA_IDEMPOTENT does not apply to it.
    idempotent = false;
  } else if (config.kafkaIdempotent === 'auto') {
    idempotent = cluster.controllerKnown;
    if (!idempotent) {
      logger.warn(
        'KAFKA_IDEMPOTENT=auto: the Kafka cluster names no controller among its brokers (librdkafka\'s mock broker does that), so the producer runs without idempotence; set KAFKA_IDEMPOTENT=0 to say so explicitly',
      );
    }
  } else if (idempotent && !cluster.controllerKnown) {
    throw new Error(
      `KAFKA_IDEMPOTENT=1, but the Kafka cluster at ${config.kafkaBrokers!.join(',')} names no controller among its brokers (librdkafka's mock broker?), so it cannot serve an idempotent producer; set KAFKA_IDEMPOTENT=0 or auto`,
    );
  }
  // A ping that hangs (an address that accepts connections but does not answer) ends within a few seconds.
  const probe = createClickHouseClient({ url: config.clickhouseUrl!, quiet: true, requestTimeoutMs: Math.min(config.startupTimeoutMs, 3000) });
  try {
    await waitForClickHouse(probe, config.startupTimeoutMs, { at: hostOf(config.clickhouseUrl!), logger });
  } catch (err) {
    probe.close().catch(() => {}); // not awaited: a ping may still hang, and the start has ended
    throw new Error(`CLICKHOUSE_URL=${withoutPassword(config.clickhouseUrl!)}: ${(err as Error).message}`);
  }
  await probe.close();
  const client = createClickHouseClient({ url: config.clickhouseUrl! });
  const prefix = isolation.tablePrefix ?? '';
  return {
    log: new KafkaLog({
      brokers: config.kafkaBrokers!,
      clientId: config.kafkaClientId,
      idempotent,
      producers: config.kafkaProducers,
      lingerMs: config.kafkaLingerMs,
      sessionTimeoutMs: config.kafkaSessionTimeoutMs,
      topicPrefix: isolation.topicPrefix,
      // Bounds publish-to-visible delay on brokers that hold a fetch for its whole wait even when
      // data arrives (librdkafka's mock does; Kafka answers early). Costs ~10 idle fetches/s per consumer.
      fetchMaxWaitMs: 100,
      appendTimeoutMs: config.limits.logAppendTimeoutMs,
      logger: logger.child({ component: 'kafka' }),
      // A record that is not one of the service's events (another producer's) is left out, logged and counted (README: Records that are not the service's).
      recordCheck: unreadable,
      // Tamper evidence: this instance's chain heads signed with AUDIT_KEY_FILE (src/log/kafka/kafka-chain.ts).
      ...(isolation.readOnlyLog ? { createTopics: false } : { checkpoints: kafkaCheckpoints(config, logger) }),
    }),
    historyStore: new ClickHouseHistoryStore({ client, consumer: `${isolation.consumerPrefix ?? ''}history`, tablePrefix: prefix, onRefused: rowRefused(logger, 'history') }),
    presenceHistoryStore: new ClickHouseHistoryStore({ client, consumer: `${isolation.consumerPrefix ?? ''}presence-history`, tablePrefix: `${prefix}presence_`, onRefused: rowRefused(logger, 'presence history') }),
    statsStore: new ClickHouseStatsStore({ client, tablePrefix: prefix }),
    webhookCheckpoints: new ClickHouseWebhookCheckpoints({ client, tablePrefix: prefix }),
    // A new instance (empty DATA_DIR) starts from these (README: A bounded start).
    sharedSnapshots: new ClickHouseSharedSnapshots({ client, tablePrefix: prefix, maxBytes: config.sharedSnapshotMaxBytes }),
    // Fewer, larger inserts: ClickHouse wants parts, not rows (recent history is served from memory).
    projectionFlushMs: 1000,
    close: () => client.close(),
  };
}

/** A history row ClickHouse refuses as malformed, left out (projections/history/clickhouse-history-store.ts): logged, never retried. */
const rowRefused =
  (logger: Logger, store: string) =>
  (row: RefusedRow, err: Error): void =>
    logger.warn({ err, store, ...row }, 'ClickHouse refused a history row as malformed: left out of the persisted history (it could never be stored), the others stored');

/** The signed checkpoints of this instance's Kafka chains, with the key of AUDIT_KEY_FILE (made at first start). */
function kafkaCheckpoints(config: Config, logger: Logger): KafkaLogOptions['checkpoints'] {
  return {
    ...checkpointing(config),
    onError: (err) => logger.error({ err }, 'audit checkpoint failed; tried again at the next interval'),
  };
}

/** host:port of a URL, without its credentials (for the log). */
/** The URL as it may be printed: a password in it is replaced by `***` (start lines end up in shared logs). */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return url;
    parsed.password = '***';
    return parsed.href.replace(/\/$/, url.endsWith('/') ? '/' : '');
  } catch {
    return '(an unparsable URL)';
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
