import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HistoryStore } from '../../projections/history/history-store.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { historyStoreContract } from './history-store.contract.js';

historyStoreContract('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'history-contract-'));
  const opened: HistoryStore[] = [];
  return {
    open: async (consumer) => {
      const store = new SqliteHistoryStore(join(dir, 'projections.db'), consumer);
      opened.push(store);
      return store;
    },
    cleanup: async () => {
      for (const store of opened) await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
