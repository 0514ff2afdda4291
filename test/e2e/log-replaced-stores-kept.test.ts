// The embedded mode's side of a log made again (README: A log made again): DATA_DIR/log.db lost (or
// restored from a backup older than the stores) while projections.db, whose history and stats
// checkpoints name offsets of the old log, was kept. Before, the start read the new log from those
// offsets and skipped its first records without a word; it refuses now, saying what to do.
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters, startService } from '../../src/service.js';
import { basic } from '../helpers/service.js';

const KEY = 'keptapp.k1:kept-secret-kept-secret';

describe('a log replaced under the stores (embedded)', () => {
  it('a start with projections.db of another log.db refuses, naming the store, the offset and what to do; with its own log it starts', async () => {
    const dirs = [mkdtempSync(join(tmpdir(), 'cm-kept-a-')), mkdtempSync(join(tmpdir(), 'cm-kept-b-'))];
    const [old, replaced] = dirs;
    const configOf = (dataDir: string) => {
      const appsFile = join(dataDir, 'apps.json');
      writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'keptapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }] }));
      return parseConfig({ DATA_DIR: dataDir, APPS_FILE: appsFile, LOG_LEVEL: 'silent' });
    };
    try {
      const first = await startService(configOf(old), pino({ level: 'silent' }), embeddedAdapters(configOf(old)));
      for (let i = 0; i < 5; i++) {
        const res = await first.app.inject({ method: 'POST', url: '/channels/persisted:kept/messages', headers: { authorization: basic(KEY), 'content-type': 'application/json' }, payload: { name: 'm', data: String(i) } });
        expect(res.statusCode).toBe(201);
      }
      await first.close();
      // The stores kept, the log not: another DATA_DIR with projections.db alone.
      for (const file of ['projections.db', 'projections.db-wal', 'projections.db-shm']) if (existsSync(join(old, file))) copyFileSync(join(old, file), join(replaced, file));
      const config = configOf(replaced);
      const adapters = embeddedAdapters(config);
      const outcome = await startService(config, pino({ level: 'silent' }), adapters).then(
        async (service) => {
          await service.close();
          return 'started on the replaced log';
        },
        (err: Error) => err.message,
      );
      expect(outcome).toMatch(/^the history store has read messages\/\d+ up to offset \d+, past the log's end \(0\): the log \(.*log\.db\) was made again or replaced since the stores .* read it/);
      await adapters.log.close();
      await adapters.close?.();
      // Its own log: the start goes ahead, the history whole.
      const again = await startService(configOf(old), pino({ level: 'silent' }), embeddedAdapters(configOf(old)));
      const res = await again.app.inject({ url: '/channels/persisted:kept/messages', headers: { authorization: basic(KEY) } });
      expect((res.json() as unknown[]).length).toBe(5);
      await again.close();
    } finally {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
