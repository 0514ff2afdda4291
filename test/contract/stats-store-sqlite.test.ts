import { describe, expect, it } from 'vitest';
import Database from '../../src/stores/sqlite/driver.mjs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { CachedStatsStore } from '../../projections/stats/stats-cache.js';
import { Base } from '../../src/domain/stats-sample.js';
import { T0 } from '../helpers/stats-log.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';
import { statsStoreContract } from './stats-store.contract.js';

// Bare, and behind the cache the service reads stats through (projections/stats/stats-cache.ts).
for (const [name, wrap] of [
  ['sqlite', (store: StatsStore) => store],
  ['sqlite, behind the stats cache', (store: StatsStore) => new CachedStatsStore(store, { maxRows: 100_000, maxAgeMs: 3600_000 })],
] as const) {
  statsStoreContract(
    name,
    async () => {
      const opened: StatsStore[] = [];
      return {
        open: async () => {
          const store = wrap(new SqliteStatsStore(':memory:'));
          opened.push(store);
          return store;
        },
        cleanup: async () => {
          for (const s of opened) await s.close();
        },
      };
    },
    { replayRuns: 4 },
  );
}

describe('SqliteStatsStore on a table an older release made', () => {
  it('adds the columns added since (connections, counters appended to BASE_COUNTERS) and keeps the rows it had', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stats-old-'));
    try {
      const path = join(dir, 'stats.db');
      // The table as the release before realtime stats made it: 29 counters, no connections.
      const old = new Database(path);
      const columns = Array.from({ length: 29 }, (_, i) => `c${i + 1}`);
      old.exec(`CREATE TABLE stats_samples (
        app_id TEXT NOT NULL, interval INTEGER NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
        slot INTEGER NOT NULL, version INTEGER NOT NULL, channels INTEGER NOT NULL,
        ${columns.map((c) => `${c} REAL NOT NULL DEFAULT 0`).join(', ')},
        PRIMARY KEY (app_id, interval, topic, partition, slot)) WITHOUT ROWID`);
      old.prepare('INSERT INTO stats_samples (app_id, interval, topic, partition, slot, version, channels, c1) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run('a', T0, 'messages', 0, 0, 1, 2, 5);
      old.close();

      const store = new SqliteStatsStore(path);
      await store.init();
      await store.write('usage', [{ appId: 'a', interval: T0 + 6000, topic: 'usage', partition: 0, slot: 0, version: 1, counters: { [Base.connectionsOpened]: 3 }, channels: 0, connections: 4 }], new Map());
      const [minute] = await store.query({ appId: 'a', unit: 'minute', start: T0, end: T0 + 59_999 });
      expect(minute.counters).toEqual({ [Base.inbound('rest', 'messages', 'count')]: 5, [Base.connectionsOpened]: 3 });
      expect([minute.channelMax, minute.connectionSamples, minute.connectionMax]).toEqual([2, 1, 4]);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
