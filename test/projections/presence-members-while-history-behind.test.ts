// Issue 22: the presence member set must not depend on presence history's store. While that store
// refuses writes (a disk full, a ClickHouse down) presence history holds at most maxUnstoredRows
// rows and then refuses batches; the member set used to stop with it (realtime presence and
// `GET /presence` frozen). Now the member set goes on, and presence history follows the log on a
// consumer of its own, from where it stands, on its own view of the members; once the store takes
// writes its rows are those of a store that never failed. On a real embedded log and a real SQLite
// store, made to fail its writes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type Checkpoint, type LogRecord } from '../../src/log/port.js';
import { appendPresenceChurn, churnRows } from '../helpers/presence-churn.js';
import { PresenceProjection, type PresenceMember } from '../../projections/presence/presence-projection.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { ProjectionSet } from '../../projections/projection-set.js';
import { parseConfig } from '../../src/config.js';
import pino from 'pino';
import type { PersistedEntry, LogMark } from '../../projections/history/history-store.js';

const NOW = 1_900_000_000_000;
const clock = { now: () => NOW + 60_000 };
const PARTITIONS = 4;
// Enough for more rows than MAX_UNSTORED_ROWS's least (1,000): a churn's leaves of members not present make none.
const EVENTS = 2000;
const CHANNELS = 12;
const BATCH = 25;

/** The real SQLite store, refusing every write while `down` (as a full disk would). */
class FailingSqliteStore extends SqliteHistoryStore {
  down = false;
  override async write(rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]): Promise<void> {
    if (this.down) throw new Error('disk full');
    return super.write(rows, checkpoint, marks);
  }
}

describe('the presence member set while presence history is behind its store', () => {
  let dir: string;
  let log: EmbeddedLog;
  let stores: FailingSqliteStore[];
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'presence-behind-'));
    log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: PARTITIONS });
    stores = [];
    await appendPresenceChurn(log, { events: EVENTS, channels: CHANNELS, start: NOW, stepMs: 10 });
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const store = (name: string): FailingSqliteStore => {
    const s = new FailingSqliteStore(join(dir, `${name}.db`));
    stores.push(s);
    return s;
  };
  const batches = async (p: number, from = 0): Promise<LogRecord[][]> => {
    const records = await log.read(Topics.presence, p, from, 1e9);
    return Array.from({ length: Math.ceil(records.length / BATCH) }, (_, i) => records.slice(i * BATCH, (i + 1) * BATCH));
  };
  const members = (projection: PresenceProjection): PresenceMember[][] =>
    Array.from({ length: CHANNELS }, (_, c) => projection.query({ appId: 'app', channel: `persisted:room-${c}`, limit: 1000 }).members);
  const rows = (s: SqliteHistoryStore): Promise<unknown[]> => churnRows(s, CHANNELS);

  it('goes on past maxUnstoredRows, and presence history, followed on its own, writes the rows of a store that never failed', async () => {
    // The reference: a store that takes every write.
    const referenceStore = store('reference');
    const reference = new PresenceProjection({ store: referenceStore, clock, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000 });
    await reference.start();
    for (let p = 0; p < PARTITIONS; p++) for (const batch of await batches(p)) reference.apply(batch);
    await reference.close();

    const failing = store('failing');
    const told: (Checkpoint | undefined)[] = [];
    const projection = new PresenceProjection({
      store: failing,
      clock,
      tailMs: 120_000,
      retentionOf: () => 24,
      flushIntervalMs: 60_000,
      maxUnstoredRows: 40,
      onHistoryBehind: (from) => told.push(from && new Map(from)),
    });
    await projection.start();
    const changes: string[] = [];
    projection.onApplied((_app, channel, messages) => changes.push(...messages.map((m) => `${channel} ${m.id}`)));
    failing.down = true;
    // The main consumer: every batch taken (none refused), while the store refuses every write.
    for (let p = 0; p < PARTITIONS; p++) for (const batch of await batches(p)) projection.apply(batch);

    expect(members(projection)).toEqual(members(reference));
    expect(projection.memberCount('app')).toBe(reference.memberCount('app'));
    expect(changes).toHaveLength(new Set(changes).size); // each change announced once
    expect(projection.historyBehindOn.length).toBeGreaterThan(0);
    expect(told[0]).toBeDefined();

    // Presence history's own consumer, from where it was last told: refused while the store is down...
    const from = [...told].reverse().find((t) => t !== undefined)!;
    const first = (await batches(projection.historyBehindOn[0], from.get(projection.historyBehindOn[0]) ?? 0))[0];
    expect(() => projection.applyHistory(first)).toThrow(/behind/);
    // ...and, once it takes writes, delivered again until history reaches the member set.
    failing.down = false;
    await projection.history.flush();
    for (let p = 0; p < PARTITIONS; p++) {
      for (const batch of await batches(p, from.get(p) ?? 0)) {
        for (;;) {
          try {
            projection.applyHistory(batch);
            break;
          } catch {
            await projection.history.flush();
          }
        }
      }
    }
    expect(projection.historyBehindOn).toEqual([]);
    expect(told[told.length - 1]).toBeUndefined();
    await projection.close();
    const written = await rows(failing);
    expect(written.length).toBeGreaterThan(EVENTS / 2);
    expect(written).toEqual(await rows(referenceStore));
  });

  it('embedded: the service\'s projections keep the member set current past MAX_UNSTORED_ROWS, and presence history catches up on its own consumer once the store takes writes', async () => {
    const config = parseConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent', MAX_UNSTORED_ROWS: '1000' });
    const reference = new PresenceProjection({ store: store('reference'), clock, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000 });
    await reference.start();
    for (let p = 0; p < PARTITIONS; p++) for (const batch of await batches(p)) reference.apply(batch);
    await reference.close();

    const presenceStore = store('failing');
    presenceStore.down = true;
    const historyStore = new SqliteHistoryStore(join(dir, 'history.db'));
    const statsStore = new SqliteStatsStore(join(dir, 'stats.db'));
    const runner = new ProjectionRunner({ log, logger: pino({ level: 'silent' }) });
    // The log holds 2,000 presence changes on persisted channels: more rows than MAX_UNSTORED_ROWS.
    const set = await ProjectionSet.start({
      config: { ...config, historyTailMs: 120_000 },
      logger: pino({ level: 'silent' }),
      clock,
      runner,
      stores: { history: historyStore, presenceHistory: presenceStore, stats: statsStore },
      retentionOf: () => 24,
      flushIntervalMs: 50,
    });
    try {
      expect(members(set.presence)).toEqual(members(reference));
      expect(set.presence.historyBehindOn.length).toBeGreaterThan(0);
      presenceStore.down = false;
      const deadline = Date.now() + 30_000;
      while (set.presence.historyBehindOn.length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(set.presence.historyBehindOn).toEqual([]);
      await set.presence.history.flush();
      expect(await rows(presenceStore)).toEqual(await rows(stores[0]));
    } finally {
      await runner.stop();
      await set.close();
      await historyStore.close();
      await statsStore.close();
    }
  });
});
