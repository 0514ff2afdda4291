// The snapshot store with its shared part in ClickHouse (projections/snapshots.ts,
// projections/shared-snapshots.ts; README: A bounded start): which snapshot a start takes when it
// has its own and shared ones, what is written there and when, and a snapshot too large for it.
// Needs ClickHouse (required under REQUIRE_INFRA=1).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { SnapshotStore, type SnapshotPositions } from '../../projections/snapshots.js';
import { SnapshotSchedule } from '../../projections/snapshot-schedule.js';
import { ClickHouseSharedSnapshots } from '../../projections/shared-snapshots.js';
import { createClickHouseClient } from '../../src/stores/clickhouse/client.js';
import { Topics } from '../../src/log/port.js';
import { findClickHouse, requireInfra } from '../helpers/infra.js';

const clickhouse = await findClickHouse();
const client = clickhouse && createClickHouseClient({ url: clickhouse.url });
const prefix = `sstore_${randomBytes(4).toString('hex')}_`;
const dirs: string[] = [];
afterAll(async () => {
  if (clickhouse) await fetch(clickhouse.url, { method: 'POST', body: `DROP TABLE IF EXISTS ${prefix}projection_snapshots` }).catch(() => undefined);
  await client?.close();
  await clickhouse?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Line {
  level: number;
  msg: string;
  reason?: string;
  shared?: boolean;
  file?: string;
}

/** An instance's store: a DATA_DIR of its own, the shared table of all, a log of 2 partitions ending at 100. */
function instance(options: { maxBytes?: number; everyMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'cm-sstore-'));
  dirs.push(dir);
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as Line) });
  const shared = new ClickHouseSharedSnapshots({ client: client!, tablePrefix: prefix, maxBytes: options.maxBytes ?? 1024 * 1024 });
  const store = new SnapshotStore({
    dir,
    logId: `kafka:test-${prefix}`,
    log: { endOffsets: async () => new Map([[0, 100], [1, 100]]) },
    logger,
    shared: { store: shared, everyMs: options.everyMs ?? 600_000, instance: 'test' },
  });
  return { dir, store, shared, lines, warnings: () => lines.filter((l) => l.level === 40) };
}

const at = (p0: number, p1 = 0): SnapshotPositions => new Map([[Topics.presence, new Map([[0, p0], [1, p1]])]]);

describe.skipIf(!clickhouse && !requireInfra)('shared snapshots in ClickHouse', () => {
  it('a new instance takes the furthest snapshot, local or shared; its own when it is further', async () => {
    if (!clickhouse) throw new Error('ClickHouse not found and REQUIRE_INFRA=1');
    const a = instance();
    expect(await a.store.save('p1', 1, at(10), { by: 'a', n: 1 }, { shared: 'now' })).toEqual({ shared: true });
    // A new instance, nothing of its own: the shared one.
    const b = instance();
    expect((await b.store.load<{ by: string }>('p1', 1))?.state.by).toBe('a');
    // B goes further and keeps it to itself (not due: the shared one is recent): B's own serves B.
    expect(await b.store.save('p1', 1, at(30), { by: 'b', n: 3 })).toEqual({ shared: false });
    expect((await b.store.load<{ by: string }>('p1', 1))?.state.by).toBe('b');
    // A shares a further one at its stop: B, restarted, takes it over its own older one.
    expect(await a.store.save('p1', 1, at(40, 5), { by: 'a', n: 4 }, { shared: 'now' })).toEqual({ shared: true });
    const restored = await b.store.load<{ by: string; n: number }>('p1', 1);
    expect(restored?.state).toEqual({ by: 'a', n: 4 });
    expect(restored?.positions).toEqual(at(40, 5));
    expect(b.warnings()).toEqual([]);
  });

  it("the newest shared snapshots are kept, not the furthest into the log: after a log reset the new log's are not pruned for the old one's (which a start refuses)", async () => {
    const a = instance();
    const logId = `kafka:test-${prefix}`;
    // Six of the old log, far into it.
    for (let i = 1; i <= 6; i++) await a.store.save('p-reset', 1, at(900 + i), { log: 'old' }, { shared: 'now' });
    // The log reset (a cluster made again): the new log's snapshot covers less.
    await a.store.save('p-reset', 1, at(3), { log: 'new' }, { shared: 'now' });
    // The prune is a mutation, applied in the background: wait until it has removed a row.
    let covered: number[] = [];
    for (let i = 0; i < 200 && (covered = (await a.shared.list('p-reset', logId)).map((r) => r.covered)).length > 6; i++) await new Promise((r) => setTimeout(r, 50));
    expect(covered.sort((x, y) => x - y)).toEqual([3, 902, 903, 904, 905, 906]); // the oldest written went
  });

  it('the shared snapshots are listed the furthest into the log first, by number (not as text: 40 before 5)', async () => {
    const a = instance();
    for (const n of [5, 40, 300]) await a.store.save('p-order', 1, at(n), { n }, { shared: 'now' });
    expect((await a.shared.list('p-order', `kafka:test-${prefix}`)).map((r) => r.covered)).toEqual([300, 40, 5]);
  });

  it('an interval shares a snapshot only when the newest shared one is older than the interval; a stop always does', async () => {
    const a = instance({ everyMs: 600_000 });
    const schedule = new SnapshotSchedule(a.store, [{ name: 'p2', version: 1, take: () => ({ positions: at(position), state: { position } }) }], 3600_000, pino({ level: 'silent' }));
    let position = 1;
    await schedule.saveAll(); // none shared yet: due
    position = 2;
    await schedule.saveAll(); // shared one moments ago: not due, local only
    expect((await a.shared.list('p2', `kafka:test-${prefix}`)).map((e) => e.covered)).toEqual([1]);
    expect(readdirSync(join(a.dir, 'p2'))).toHaveLength(2);
    await schedule.close(); // the stop: shared, though nothing moved since the last local one
    expect((await a.shared.list('p2', `kafka:test-${prefix}`)).map((e) => e.covered)).toEqual([2, 1]);
    expect(readdirSync(join(a.dir, 'p2'))).toHaveLength(2);
  });

  it('a snapshot too large for the shared store is kept locally and not shared, with a warning, not an error', async () => {
    const a = instance({ maxBytes: 2048 });
    expect(await a.store.save('p3', 1, at(10), { members: 'x'.repeat(5000) }, { shared: 'now' })).toEqual({ shared: false });
    expect(a.warnings().map((w) => w.msg)).toEqual(['snapshot too large for the shared store: not shared (a new instance replays this projection from its topics)']);
    expect(await a.shared.list('p3', `kafka:test-${prefix}`)).toEqual([]);
    expect(readdirSync(join(a.dir, 'p3'))).toHaveLength(1);
    expect((await instance().store.load('p3', 1))).toBeUndefined();
  });

  it('a shared snapshot of an older version of the state is passed over with a warning naming it, and the full replay follows', async () => {
    const a = instance();
    await a.store.save('p4', 1, at(10), { old: true }, { shared: 'now' });
    const b = instance();
    expect(await b.store.load('p4', 2)).toBeUndefined();
    const [passed, none] = b.warnings();
    expect(passed).toMatchObject({ shared: true, reason: "version 1 of the projection's state, this build reads version 2 (written by an older build)" });
    expect(passed.file).toMatch(new RegExp(`^clickhouse:${prefix}projection_snapshots#`));
    expect(none.msg).toBe('no usable snapshot: the projection replays its topics whole');
  });
});
