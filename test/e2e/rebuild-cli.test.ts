import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from '../../src/stores/sqlite/driver.mjs';
import { removeDir, startTestService, uniqueChannel } from '../helpers/service.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';

const run = promisify(execFile);
const cli = (args: string[], dataDir?: string) =>
  run(process.execPath, ['--import', 'tsx', 'src/cli/rebuild.ts', ...args], {
    env: { ...process.env, KAFKA_BROKERS: '', CLICKHOUSE_URL: '', ...(dataDir ? { DATA_DIR: dataDir } : {}) },
  });

describe('npm run rebuild (ARCHITECTURE: exact rebuild of every projection from the log)', () => {
  it('rebuilds stats from offset 0 of the embedded log beside the running service, whose reads go on, to the same numbers; and repairs a damaged store', async () => {
    const t = await startTestService();
    try {
      for (let i = 0; i < 40; i++) {
        const res = await t.service.app.inject({
          method: 'POST',
          url: `/channels/${uniqueChannel('rebuild')}/messages`,
          headers: { authorization: t.auth, 'content-type': 'application/json' },
          payload: { name: 'order', data: 'x'.repeat(i) },
        });
        expect(res.statusCode).toBe(201);
      }
      await t.service.stats.flush();
      const stats = async (): Promise<{ status: number; body: { inbound?: unknown; channels?: { peak?: number; opened?: number }; intervalId: string }[] }> => {
        const res = await t.service.app.inject({ url: '/stats?unit=hour', headers: { authorization: t.auth } });
        return { status: res.statusCode, body: res.json() };
      };
      // (channels.mean is over the samples elapsed so far, so it moves with the clock: not compared.)
      const figures = (r: { intervalId: string; inbound?: unknown; channels?: { peak?: number; opened?: number } }) => ({
        intervalId: r.intervalId,
        inbound: r.inbound,
        channels: { peak: r.channels?.peak, opened: r.channels?.opened },
      });
      const before = (await stats()).body.map(figures);
      expect(JSON.stringify(before)).toContain('"count":40');

      // Beside the running service: its reads answer throughout.
      const rebuilding = cli(['--projection', 'stats'], t.dataDir);
      let reads = 0;
      let done = false;
      void rebuilding.finally(() => (done = true)).catch(() => undefined);
      while (!done) {
        expect((await stats()).status).toBe(200);
        reads++;
        await new Promise((r) => setTimeout(r, 20));
      }
      const { stderr } = await rebuilding;
      expect(reads).toBeGreaterThan(0);
      expect(stderr).toMatch(/rebuilt stats: \d+ records/);
      expect(stderr).not.toContain('\r['); // a progress bar only on a terminal
      const after = (await stats()).body.map(figures);
      expect(after).toEqual(before);
    } finally {
      await t.close();
    }

    // A damaged store (samples wrong, rollups gone) is rebuilt to the numbers it had.
    const path = join(t.dataDir, 'projections.db');
    const read = async () => {
      const store = new SqliteStatsStore(path);
      await store.init();
      const apps = (new Database(path, { readonly: true }).prepare('SELECT DISTINCT app_id FROM stats_samples').pluck().all() as string[]);
      const out: unknown[] = [];
      for (const appId of apps) for (const unit of ['minute', 'hour', 'day', 'month'] as const) out.push(await store.query({ appId, unit, start: 0, end: Date.now() + 60_000 }));
      await store.close();
      return out;
    };
    const good = await read();
    const db = new Database(path);
    db.exec('UPDATE stats_samples SET c1 = c1 + 1000; DELETE FROM stats_rollups;');
    db.close();
    expect(await read()).not.toEqual(good);
    await cli(['--projection', 'stats'], t.dataDir);
    expect(await read()).toEqual(good);
    // History and presence history rebuild too, twice each: no checkpoint or mark of a rebuild is
    // left in the store (it resumes from none; each run used to leave one more under its own name).
    const rebuildRows = (): unknown[] => {
      const check = new Database(path, { readonly: true });
      try {
        return [
          ...check.prepare("SELECT consumer FROM projection_checkpoints WHERE consumer LIKE 'rebuild-%'").all(),
          ...check.prepare("SELECT consumer FROM projection_marks WHERE consumer LIKE 'rebuild-%'").all(),
        ];
      } finally {
        check.close();
      }
    };
    for (const projection of ['history', 'presence', 'history', 'presence']) {
      expect((await cli(['--projection', projection], t.dataDir)).stderr).toMatch(new RegExp(`rebuilt ${projection}: \\d+ records`));
    }
    expect(rebuildRows()).toEqual([]);
    removeDir(t.dataDir);
  }, 120_000);

  it('--help prints the usage (util.parseArgs); a missing or unknown --projection is refused with it', async () => {
    expect((await cli(['--help'])).stdout).toMatch(/^Usage: npx tsx src\/cli\/rebuild.ts --projection stats\|history\|presence/);
    for (const args of [[], ['--projection', 'nope']]) {
      const failed = await cli(args).catch((e) => e);
      expect(failed.code).toBe(2);
      expect(failed.stderr).toMatch(/--projection must be one of stats, history, presence/);
    }
  }, 60_000);

  it('refuses a DATA_DIR that does not exist, holds no log or a log.db that is not a database, exit 1, and makes nothing there (it made a data directory with an empty log and a default app, and said it rebuilt 0 records)', async () => {
    const base = mkdtempSync(join(tmpdir(), 'rebuild-missing-'));
    try {
      const missing = join(base, 'typo');
      const failed = await cli(['--projection', 'stats'], missing).catch((e) => e);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toBe(`rebuild: DATA_DIR=${missing} does not exist\n`);
      expect(existsSync(missing)).toBe(false);
      const empty = join(base, 'empty');
      mkdirSync(empty);
      const noLog = await cli(['--projection', 'history', '--data-dir', empty]).catch((e) => e);
      expect(noLog.code).toBe(1);
      expect(noLog.stderr).toMatch(/^rebuild: DATA_DIR=.* holds no log \(.*log\.db does not exist\); is it the service's data directory\?\n$/);
      expect(readdirSync(empty)).toEqual([]);
      // A log.db that is not a database: named, in one line (it was SQLite's 'file is not a database' alone).
      writeFileSync(join(empty, 'log.db'), Buffer.alloc(5000, 7));
      const notADb = await cli(['--projection', 'stats', '--data-dir', empty]).catch((e) => e);
      expect(notADb.code).toBe(1);
      expect(notADb.stderr).toBe(`rebuild: ${join(empty, 'log.db')} cannot be read as a log: file is not a database (SQLITE_NOTADB); is it the service's data directory, or restore the file from a backup\n`);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  }, 60_000);
});
