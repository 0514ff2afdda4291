// The adapters a service runs on (the log and the projections' stores), picked from the
// configuration: the embedded ones (SQLite in DATA_DIR) or the production ones (Kafka, ClickHouse).
import { join } from 'node:path';
import type { Logger } from 'pino';
import { modeOf, type Config } from './config.js';
import { ensureDir } from './startup.js';
import type { Adapters } from './adapter-port.js';
import { EmbeddedLog, type EmbeddedLogOptions } from './log/embedded/embedded-log.js';
import { EmbeddedLogReader } from './log/embedded/embedded-log-reader.js';
import { checkpointing } from './audit/checkpointing.js';
import { DataDirLock } from './log/embedded/data-dir-lock.js';
import { SqliteHistoryStore } from '../projections/history/sqlite-history-store.js';
import { SqliteStatsStore } from '../projections/stats/sqlite-stats-store.js';

export type { Adapters } from './adapter-port.js';

/**
 * `lock` (default): holds DATA_DIR for this service until close, or throws DataDirLockedError when
 * another holds it. `readOnlyLog`: the log read only, beside a running service (the rebuild, which
 * takes no lock): it writes nothing to log.db (embedded-log-reader.ts), where an EmbeddedLog beside
 * the service stored the partition count of any topic it read first.
 */
export function embeddedAdapters(
  config: Config,
  { lock = true, readOnlyLog = false, consumerPrefix = '', logger }: { lock?: boolean; readOnlyLog?: boolean; consumerPrefix?: string; logger?: Logger } = {},
): Adapters {
  ensureDir(config.dataDir);
  const held = lock ? DataDirLock.acquire(config.dataDir) : undefined;
  try {
    const log = readOnlyLog ? new EmbeddedLogReader({ path: join(config.dataDir, 'log.db') }) : new EmbeddedLog({
      path: join(config.dataDir, 'log.db'),
      partitions: config.embeddedPartitions,
      // LOG_RETENTION_HOURS: at least the longest history retention (config.ts), so projections can be rebuilt.
      retentionMs: config.logRetentionHours * 3600_000,
      // Only the service that holds DATA_DIR appends them (a rebuild beside it reads).
      checkpoints: lock ? auditCheckpoints(config, logger) : undefined,
      logger,
    });
    if (log instanceof EmbeddedLog) {
      const kept = log.partitionCountsOtherThan(config.embeddedPartitions);
      if (kept.length > 0) {
        logger?.warn(
          { embeddedPartitions: config.embeddedPartitions, kept },
          `EMBEDDED_PARTITIONS=${config.embeddedPartitions} applies only to topics the log has not made yet: ${kept.map((k) => `${k.topic} keeps ${k.partitions}`).join(', ')} (a topic's partition count never changes: history serials are offsets within a partition)`,
        );
      }
    }
    return {
      close: async () => held?.release(),
      log,
      historyStore: new SqliteHistoryStore(join(config.dataDir, 'projections.db'), `${consumerPrefix}history`),
      presenceHistoryStore: new SqliteHistoryStore(join(config.dataDir, 'projections.db'), `${consumerPrefix}presence-history`, 'presence'),
      statsStore: new SqliteStatsStore(join(config.dataDir, 'projections.db')),
    };
  } catch (err) {
    held?.release();
    throw err;
  }
}

/** The embedded log's signed checkpoints (tamper evidence, src/audit/checkpoint.ts), with the key of AUDIT_KEY_FILE. */
function auditCheckpoints(config: Config, logger: Logger | undefined): EmbeddedLogOptions['checkpoints'] {
  return {
    ...checkpointing(config),
    onError: (err) => logger?.error({ err }, 'audit checkpoint failed; tried again at the next interval'),
  };
}

/**
 * Builds adapters for the configured mode (production adapters load only when used). In production
 * mode too the service holds DATA_DIR (`lock`, default): it keeps the instance's audit key, the
 * witness of its last signed checkpoint and its snapshots, which a second instance on the same
 * directory would overwrite and delete (README: Several instances on Kafka).
 */
export async function adaptersFor(config: Config, logger: Logger, options: { lock?: boolean; readOnlyLog?: boolean; consumerPrefix?: string } = {}): Promise<Adapters> {
  if (modeOf(config) === 'embedded') return embeddedAdapters(config, { ...options, logger });
  const held = options.lock ?? true ? DataDirLock.acquire(config.dataDir) : undefined;
  try {
    const { productionAdapters } = await import('./production-adapters.js');
    const adapters = await productionAdapters(config, logger, { consumerPrefix: options.consumerPrefix, readOnlyLog: options.readOnlyLog });
    if (!held) return adapters;
    return {
      ...adapters,
      close: async () => {
        try {
          await adapters.close?.();
        } finally {
          held.release();
        }
      },
    };
  } catch (err) {
    held?.release();
    throw err;
  }
}
