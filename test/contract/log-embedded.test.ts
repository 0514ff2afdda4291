import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { logContract } from './log.contract.js';

logContract('embedded (SQLite file, 4 partitions)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'log-contract-'));
  const log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 4 });
  return {
    log,
    cleanup: async () => {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
