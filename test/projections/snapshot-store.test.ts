// The snapshot files of the in-memory projections (projections/snapshots.ts): what a start does
// with a snapshot it cannot use (README: A bounded start) — it passes it over with a warning that
// says why, and with none left the projection replays its topics whole.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SnapshotStore, type SnapshotPositions } from '../../projections/snapshots.js';
import { SnapshotSchedule } from '../../projections/snapshot-schedule.js';
import { Topics, type Log } from '../../src/log/port.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';

interface Line {
  level: number;
  msg: string;
  reason?: string;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(options: { ends?: Map<number, number>; logId?: string; keep?: number; dir?: string; log?: Log } = {}) {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'cm-snap-'));
  if (!options.dir) dirs.push(dir);
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as Line) });
  let clock = 1_000;
  const store = new SnapshotStore({
    dir,
    logId: options.logId ?? 'embedded:test',
    log: options.log ?? { endOffsets: async () => options.ends ?? new Map([[0, 100], [1, 100]]) },
    logger,
    keep: options.keep,
    now: () => clock++,
  });
  const warnings = () => lines.filter((l) => l.level === 40);
  return { dir, store, lines, warnings };
}

const at = (p0: number, p1 = 0): SnapshotPositions => new Map([[Topics.presence, new Map([[0, p0], [1, p1]])]]);
const files = (dir: string, name = 'presence'): string[] => readdirSync(join(dir, name)).filter((f) => f.endsWith('.snap')).sort().reverse();

describe('snapshot files', () => {
  it('a snapshot read back has the state and the positions it was saved with, bytes included', async () => {
    const { store } = setup();
    const state = { channels: [['app\u0000ch', [{ id: 'a', connectionId: 'c', data: new Uint8Array([1, 2, 3]), extras: { x: 1 } }]]] };
    await store.save('presence', 1, at(40, 7), state);
    const read = await store.load<typeof state>('presence', 1);
    expect(read?.positions).toEqual(at(40, 7));
    expect(read?.state).toEqual(state);
  });

  it('the newest usable snapshot is restored', async () => {
    const { store } = setup();
    await store.save('presence', 1, at(10), { n: 1 });
    await store.save('presence', 1, at(20), { n: 2 });
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(2);
  });

  it('no snapshot at all is a full replay without a warning', async () => {
    const { store, warnings } = setup();
    expect(await store.load('presence', 1)).toBeUndefined();
    expect(warnings()).toEqual([]);
  });

  it('a corrupt snapshot is passed over with a warning naming the checksum, and the older one serves', async () => {
    const { dir, store, warnings } = setup();
    await store.save('presence', 1, at(10), { n: 1 });
    await store.save('presence', 1, at(20), { n: 2 });
    const newest = join(dir, 'presence', files(dir)[0]);
    const bytes = readFileSync(newest);
    bytes[bytes.length - 2] ^= 0xff;
    writeFileSync(newest, bytes);
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(1);
    expect(warnings().map((w) => w.reason)).toEqual(['its checksum does not match: corrupt']);
  });

  it('a truncated snapshot, and one whose header is cut, fall back to the full replay with warnings saying why', async () => {
    const { dir, store, warnings } = setup();
    await store.save('presence', 1, at(10), { members: 'x'.repeat(1000) });
    await store.save('presence', 1, at(20), { members: 'y'.repeat(1000) });
    const [newest, older] = files(dir).map((f) => join(dir, 'presence', f));
    writeFileSync(newest, readFileSync(newest).subarray(0, 600));
    writeFileSync(older, readFileSync(older).subarray(0, 30));
    expect(await store.load('presence', 1)).toBeUndefined();
    const w = warnings();
    expect(w[0].reason).toMatch(/^truncated or padded: \d+ bytes of state where the header says \d+$/);
    expect(w[1].reason).toMatch(/header is not readable.*corrupt or truncated/);
    expect(w[2].msg).toBe('no usable snapshot: the projection replays its topics whole');
  });

  it("a bit flipped in a snapshot's header (a position 0:6 read as 0:7, which would skip a record) is passed over with a warning: the header has a checksum of its own", async () => {
    const { dir, store, warnings } = setup();
    await store.save('presence', 1, at(3), { n: 1 });
    await store.save('presence', 1, at(6), { n: 2 });
    // The newest and furthest: [[0,6],[1,0]] in its header.
    const newest = join(dir, 'presence', files(dir)[0]);
    const bytes = readFileSync(newest);
    const at6 = bytes.indexOf('[[0,6]');
    expect(at6).toBeGreaterThan(0);
    bytes[at6 + 4] ^= 0x01; // '6' -> '7'
    writeFileSync(newest, bytes);
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(1);
    expect(warnings().map((w) => w.reason)).toEqual(["its header's checksum does not match: corrupt"]);
  });

  it('a snapshot of an earlier build (format /1, no checksum of its header) is still used', async () => {
    const { dir, store, warnings } = setup();
    await store.save('presence', 1, at(10), { n: 1 });
    const file = join(dir, 'presence', files(dir)[0]);
    const bytes = readFileSync(file);
    const eol = bytes.indexOf(10);
    const { headerSha256: _, ...header } = JSON.parse(bytes.subarray(0, eol).toString()) as Record<string, unknown>;
    writeFileSync(file, Buffer.concat([Buffer.from(`${JSON.stringify({ ...header, format: 'channel-messaging-snapshot/1' })}\n`), bytes.subarray(eol + 1)]));
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(1);
    expect(warnings()).toEqual([]);
  });

  it('a snapshot of an older version of the state is not used: full replay, with a warning naming both versions', async () => {
    const { store, warnings } = setup();
    await store.save('presence', 1, at(10), { old: true });
    expect(await store.load('presence', 2)).toBeUndefined();
    expect(warnings()[0].reason).toBe('version 1 of the projection\'s state, this build reads version 2 (written by an older build)');
  });

  it('a snapshot past the log\'s end (a log reset) is not used', async () => {
    const { dir } = setup();
    const first = setup({ dir });
    await first.store.save('presence', 1, at(90, 5), {});
    const reset = setup({ dir, ends: new Map([[0, 12]]) });
    expect(await reset.store.load('presence', 1)).toBeUndefined();
    expect(reset.warnings()[0].reason).toBe("its presence position 0:90 is past the log's end (12): the log was reset or is another one");
  });

  it('a snapshot of a log that was replaced since (log.db restored from an older backup) and has grown past it is not used: the record it was taken after differs', async () => {
    const { dir } = setup();
    const logs: EmbeddedLog[] = [];
    const logAt = (name: string) => {
      const log = new EmbeddedLog({ path: join(dir, `${name}.db`), partitions: 2 });
      logs.push(log);
      return log;
    };
    const fill = async (log: Log, n: number, tag: string) => {
      for (const p of [0, 1]) {
        // Keys that land on each partition: any key, appended until the partition holds n.
        for (let i = 0; (await log.endOffsets(Topics.presence)).get(p)! < n; i++) await log.append(Topics.presence, [{ key: `${tag}-${p}-${i}`, value: new Uint8Array([i & 0xff]), timestamp: 1_000 + i }]);
      }
    };
    try {
      const before = logAt('before');
      await fill(before, 10, 'a');
      const first = setup({ dir, log: before });
      await first.store.save('presence', 1, new Map([[Topics.presence, await before.endOffsets(Topics.presence)]]), { members: 'of the log before' });
      // The same log still serves it (the check passes where nothing changed).
      expect((await setup({ dir, log: before }).store.load<{ members: string }>('presence', 1))?.state.members).toBe('of the log before');

      const replaced = logAt('replaced');
      await fill(replaced, 12, 'b');
      const after = setup({ dir, log: replaced });
      expect(await after.store.load('presence', 1)).toBeUndefined();
      expect(after.warnings().map((w) => w.reason)[0]).toMatch(/^the presence record it was taken after \(\d:9\) is another one in this log: the log was reset or replaced since$/);
    } finally {
      for (const log of logs) await log.close();
    }
  });

  it("a snapshot saved after the store first read the log's end (a writer's hand-over minutes after the start) is used: the end is read again", async () => {
    const { dir } = setup();
    let end = new Map([[0, 50], [1, 50]]);
    const lines: Line[] = [];
    const store = new SnapshotStore({ dir, logId: 'embedded:test', log: { endOffsets: async () => end }, logger: pino({ level: 'warn' }, { write: (l: string) => lines.push(JSON.parse(l) as Line) }) });
    await store.save('presence', 1, at(40, 40), { n: 1 });
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(1);
    end = new Map([[0, 100], [1, 100]]);
    await store.save('presence', 1, at(90, 90), { n: 2 });
    expect((await store.load<{ n: number }>('presence', 1))?.state.n).toBe(2);
    expect(lines).toEqual([]);
  });

  it('a snapshot of a topic whose partition count changed since (its keys were on other partitions) is not used', async () => {
    const { dir } = setup();
    const first = setup({ dir });
    await first.store.save('presence', 1, at(10, 5), {});
    const grown = setup({ dir, ends: new Map([[0, 100], [1, 100], [2, 0], [3, 0]]) });
    expect(await grown.store.load('presence', 1)).toBeUndefined();
    expect(grown.warnings()[0].reason).toBe('it covers 2 partitions of the presence topic, which has 4');
    expect(await setup({ dir }).store.load('presence', 1)).toBeDefined();
  });

  it("a log whose end cannot be read (a broker error) passes the snapshot over with a warning instead of failing the start", async () => {
    const { dir, store } = setup();
    await store.save('presence', 1, at(5), {});
    const lines: Line[] = [];
    const failing = new SnapshotStore({
      dir,
      logId: 'embedded:test',
      log: { endOffsets: async () => Promise.reject(new Error('broker gone')) },
      logger: pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as Line) }),
    });
    expect(await failing.load('presence', 1)).toBeUndefined();
    expect(lines.find((l) => l.level === 40)?.reason).toBe("the presence topic's end could not be read to check it against (broker gone)");
  });

  it('a snapshot of another log is not used', async () => {
    const { dir, store } = setup({ logId: 'kafka:a:9092' });
    await store.save('presence', 1, at(1), {});
    const other = setup({ dir, logId: 'kafka:b:9092' });
    expect(await other.store.load('presence', 1)).toBeUndefined();
    expect(other.warnings()[0].reason).toBe('its positions are of another log (kafka:a:9092, this one is kafka:b:9092)');
  });

  it("a projection's own refusal passes a snapshot over for an older one, at info level when it says it is no fault", async () => {
    const { store, lines, warnings } = setup();
    await store.save('presence', 1, at(10), { n: 1 });
    await store.save('presence', 1, at(20), { n: 2 });
    const read = await store.load<{ n: number }>('presence', 1, (s) => (s.state.n === 2 ? { reason: 'too new', warn: false } : undefined));
    expect(read?.state.n).toBe(1);
    expect(warnings()).toEqual([]);
    expect(lines.some((l) => l.msg === 'snapshot passed over' && l.reason === 'too new')).toBe(true);
  });

  it('a temporary file a crash left during a write (kill -9) is removed by a later write once old, not while it may be a write in progress', async () => {
    const { dir, store } = setup();
    await store.save('presence', 1, at(10), { n: 1 });
    // What a kill -9 between the temporary file's write and its rename leaves: a snapshot's bytes under a temporary name.
    const leftover = join(dir, 'presence', `.${files(dir)[0]}.tmp`);
    const recent = join(dir, 'presence', '.000000000009999-0000abcd.snap.tmp');
    writeFileSync(leftover, readFileSync(join(dir, 'presence', files(dir)[0])));
    writeFileSync(recent, 'a write in progress');
    const old = (Date.now() - 3_600_000) / 1000;
    utimesSync(leftover, old, old);
    await store.save('presence', 1, at(20), { n: 2 });
    expect(existsSync(leftover)).toBe(false);
    expect(existsSync(recent)).toBe(true);
  });

  it('keeps the newest `keep` snapshots of a projection and leaves no temporary file', async () => {
    const { dir, store } = setup({ keep: 3 });
    for (let i = 1; i <= 5; i++) await store.save('presence', 1, at(i), { i });
    expect(files(dir)).toHaveLength(3);
    expect(readdirSync(join(dir, 'presence')).filter((f) => !f.endsWith('.snap'))).toEqual([]);
    expect((await store.load<{ i: number }>('presence', 1))?.state.i).toBe(5);
  });

  it('the schedule saves on its own every interval once started, and a failed write is logged and tried again', async () => {
    const { dir, store } = setup();
    let offset = 1;
    const lines: Line[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as Line) });
    const schedule = new SnapshotSchedule(store, [{ name: 'presence', version: 1, take: () => ({ positions: at(offset++), state: {} }) }], 20, logger);
    // A folder that cannot be made (a file stands where it would go): every write fails.
    const blocked = join(dir, 'a-file');
    writeFileSync(blocked, '');
    const unwritable = new SnapshotStore({ dir: join(blocked, 'snapshots'), logId: 'embedded:test', log: { endOffsets: async () => new Map() }, logger });
    let moved = 1;
    const failing = new SnapshotSchedule(unwritable, [{ name: 'presence', version: 1, take: () => ({ positions: at(moved++), state: {} }) }], 20, logger);
    const saved = (): number => (existsSync(join(dir, 'presence')) ? files(dir).length : 0);
    const failed = (): number => lines.filter((l) => l.msg === 'snapshot write failed; the next one tries again').length;
    schedule.start();
    failing.start();
    for (let i = 0; i < 1000 && (saved() < 3 || failed() < 2); i++) await new Promise((r) => setTimeout(r, 10));
    await schedule.close();
    await failing.close();
    expect(saved()).toBeGreaterThanOrEqual(3);
    expect(failed()).toBeGreaterThanOrEqual(2);
  });

  it('the schedule saves a source only when its positions moved, and once more at close', async () => {
    const { dir, store } = setup();
    let positions = at(1);
    const schedule = new SnapshotSchedule(store, [{ name: 'presence', version: 1, take: () => ({ positions, state: {} }) }], 60_000, pino({ level: 'silent' }));
    await schedule.saveAll();
    await schedule.saveAll();
    expect(files(dir)).toHaveLength(1);
    positions = at(2);
    await schedule.close();
    expect(files(dir)).toHaveLength(2);
  });
});
