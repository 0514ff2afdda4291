import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Adapters } from './service.js';
import { KafkaLog } from './log/kafka/kafka-log.js';
import { createClickHouseClient, waitForClickHouse } from './stores/clickhouse/client.js';
import { ClickHouseHistoryStore } from '../projections/history/clickhouse-history-store.js';
import { ClickHouseStatsStore } from '../projections/stats/clickhouse-stats-store.js';

export interface Isolation {
  /** Prepended to Kafka topic names (tests and tenants use their own topics). */
  topicPrefix?: string;
  /** Prepended to ClickHouse table names. */
  tablePrefix?: string;
  /** Prepended to the projections' checkpoint names (a rebuild keeps checkpoints of its own). */
  consumerPrefix?: string;
}

/**
 * Production mode (ARCHITECTURE): the log on Kafka, history and stats in ClickHouse. One
 * ClickHouse client serves every store and is closed with the adapters.
 */
export async function productionAdapters(config: Config, logger: Logger, isolation: Isolation = {}): Promise<Adapters> {
  const client = createClickHouseClient({ url: config.clickhouseUrl! });
  try {
    await waitForClickHouse(client, 30_000);
  } catch (err) {
    await client.close();
    throw new Error(`CLICKHOUSE_URL=${config.clickhouseUrl}: ${(err as Error).message}`);
  }
  const prefix = isolation.tablePrefix ?? '';
  return {
    log: new KafkaLog({
      brokers: config.kafkaBrokers!,
      clientId: config.kafkaClientId,
      idempotent: config.kafkaIdempotent,
      topicPrefix: isolation.topicPrefix,
      // Bounds publish-to-visible delay on brokers that hold a fetch for its whole wait even when
      // data arrives (librdkafka's mock does; Kafka answers early). Costs ~10 idle fetches/s per consumer.
      fetchMaxWaitMs: 100,
      appendTimeoutMs: config.limits.logAppendTimeoutMs,
      logger: logger.child({ component: 'kafka' }),
    }),
    historyStore: new ClickHouseHistoryStore({ client, consumer: `${isolation.consumerPrefix ?? ''}history`, tablePrefix: prefix }),
    presenceHistoryStore: new ClickHouseHistoryStore({ client, consumer: `${isolation.consumerPrefix ?? ''}presence-history`, tablePrefix: `${prefix}presence_` }),
    statsStore: new ClickHouseStatsStore({ client, tablePrefix: prefix }),
    // Fewer, larger inserts: ClickHouse wants parts, not rows (recent history is served from memory).
    projectionFlushMs: 1000,
    close: () => client.close(),
  };
}
