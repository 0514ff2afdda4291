// The port the service runs on: a log and the projections' stores. Its two implementations are
// src/adapters.ts (embedded) and src/production-adapters.ts (Kafka, ClickHouse); this file lets
// the second name the port without importing the first (which loads it lazily).
import type { Log } from './log/port.js';
import type { HistoryStore } from '../projections/history/history-store.js';
import type { StatsStore } from '../projections/stats/stats-store.js';
import type { WebhookCheckpointStore } from '../projections/webhooks/webhook-checkpoints.js';
import type { SharedSnapshots } from '../projections/shared-snapshots.js';

/** The adapters a service runs on; main.ts picks them from the configuration, tests may pass their own. */
export interface Adapters {
  log: Log;
  historyStore: HistoryStore;
  presenceHistoryStore: HistoryStore;
  statsStore: StatsStore;
  /** Where webhook delivery resumes (production: ClickHouse); absent: DATA_DIR/webhooks.db. */
  webhookCheckpoints?: WebhookCheckpointStore;
  /** Where every instance reads the in-memory projections' snapshots (production: ClickHouse); absent: DATA_DIR only. */
  sharedSnapshots?: SharedSnapshots;
  /** How often projections write to their stores (default: 100 ms history, 250 ms stats). */
  projectionFlushMs?: number;
  /** Releases what the adapters share (a ClickHouse client). */
  close?: () => Promise<void>;
}
