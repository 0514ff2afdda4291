import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';
import { statsStoreContract } from './stats-store.contract.js';

statsStoreContract(
  'sqlite',
  async () => {
    const opened: StatsStore[] = [];
    return {
      open: async () => {
        const store = new SqliteStatsStore(':memory:');
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
