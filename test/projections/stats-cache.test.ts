import { describe, expect, it } from 'vitest';
import { CachedStatsStore, LevelRows } from '../../projections/stats/stats-cache.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { Base, type Unit } from '../../src/domain/stats-sample.js';
import type { LevelRow, Piece } from '../../projections/stats/rollups.js';
import type { StatsQuery } from '../../src/domain/stats-sample.js';
import { rng, statsRow, T0 } from '../helpers/stats-log.js';

const C = Base.inbound('rest', 'messages', 'count');
const UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

const row = statsRow;

/** A SQLite store whose reads are counted (the pieces of each), behind a cache. */
async function cachedStore(options: { maxRows?: number; maxAgeMs?: number; now?: () => number } = {}) {
  const inner = new SqliteStatsStore(':memory:');
  await inner.init();
  const reads: Piece[][] = [];
  const read = inner.readPieces.bind(inner);
  inner.readPieces = (appId, pieces) => (reads.push(pieces), read(appId, pieces));
  let oldestAsked = 0;
  const oldest = inner.oldestInterval.bind(inner);
  inner.oldestInterval = (appId) => (oldestAsked++, oldest(appId));
  const cache = new CachedStatsStore(inner, { maxRows: options.maxRows ?? 10_000, maxAgeMs: options.maxAgeMs ?? 60_000, clock: { now: options.now ?? (() => T0) } });
  return { inner, cache, reads, oldestAsked: () => oldestAsked };
}

const page = (unit: Unit, start = T0 - 86_400_000 * 40, end = T0 + 86_400_000 * 40): StatsQuery => ({ appId: 'a', unit, start, end });

describe('LevelRows: the ranges of one level held', () => {
  it('answers what is missing, takes ranges in and drops ranges as a set of starts would (random operations)', () => {
    const random = rng(7);
    const held = new LevelRows();
    const model = new Map<number, boolean>(); // start (0..99) -> held; a row at every third start
    const r = (start: number): LevelRow => ({ level: 'minute', start, counters: {}, channelSamples: 0, channelSum: 0, channelMax: 0, channelMin: 0, connectionSamples: 0, connectionSum: 0, connectionMax: 0, connectionMin: 0, lastSample: start });
    for (let step = 0; step < 2000; step++) {
      const a = Math.floor(random() * 100);
      const b = a + 1 + Math.floor(random() * 20);
      const op = random();
      if (op < 0.4) {
        // The store's rows of the whole range: what is held already is not added twice.
        const rows: LevelRow[] = [];
        for (let s = a; s < b; s++) if (s % 3 === 0) rows.push(r(s));
        const added = held.fill(a, b, rows);
        expect(added).toBe(rows.filter((x) => !model.get(x.start)).length);
        for (let s = a; s < b; s++) model.set(s, true);
      } else if (op < 0.6) {
        held.drop(a, b);
        for (let s = a; s < b; s++) model.delete(s);
      }
      const missing: number[] = [];
      for (const m of held.missing(a, b)) for (let s = m.from; s < m.to; s++) missing.push(s);
      const expected: number[] = [];
      for (let s = a; s < b; s++) if (!model.get(s)) expected.push(s);
      expect(missing).toEqual(expected);
      const rows: LevelRow[] = [];
      held.between(a, b, rows);
      expect(rows.map((x) => x.start)).toEqual(Array.from({ length: b - a }, (_, i) => a + i).filter((s) => model.get(s) && s % 3 === 0));
      // Spans stay sorted and apart.
      for (let i = 1; i < held.spans.length; i++) expect(held.spans[i].from).toBeGreaterThan(held.spans[i - 1].to);
    }
  });
});

describe('CachedStatsStore: GET /stats rows held in memory', () => {
  it('gives what the store gives, through random writes (late samples, replays, other apps) and pages of every unit and range', async () => {
    const { cache } = await cachedStore({ maxRows: 400 }); // small: evictions happen too
    const plain = new SqliteStatsStore(':memory:');
    await plain.init();
    const random = rng(11);
    const DAY = 86_400_000;
    for (let step = 0; step < 300; step++) {
      if (random() < 0.5) {
        const rows = Array.from({ length: 1 + Math.floor(random() * 4) }, () =>
          row({
            appId: random() < 0.8 ? 'a' : 'b',
            interval: T0 + Math.floor(random() * 45 * DAY * (random() < 0.5 ? 0.01 : 1) / 6000) * 6000,
            partition: Math.floor(random() * 2),
            version: Math.floor(random() * 5),
            counters: { [C]: 1 + Math.floor(random() * 9) },
            channels: Math.floor(random() * 4),
            connections: Math.floor(random() * 3),
          }),
        );
        await cache.write('messages', rows, new Map());
        await plain.write('messages', rows, new Map());
      }
      const unit = UNITS[Math.floor(random() * 4)];
      const start = T0 - DAY + Math.floor(random() * 47 * DAY * (random() < 0.5 ? 0.02 : 1));
      const q: StatsQuery = { appId: random() < 0.8 ? 'a' : 'b', unit, start, end: start + Math.floor(random() * 40 * DAY * (random() < 0.5 ? 0.01 : 1)) };
      expect(await cache.query(q)).toEqual(await plain.query(q));
      expect(await cache.oldestInterval(q.appId)).toEqual(await plain.oldestInterval(q.appId));
      expect(cache.size).toBeLessThanOrEqual(400);
    }
    expect(cache.hits).toBeGreaterThan(0);
  });

  it('serves a page read before from memory, and a page of another range reads only the ranges not held', async () => {
    const { cache, reads } = await cachedStore();
    await cache.write('messages', [row({ interval: T0 }), row({ interval: T0 + 3600_000 })], new Map());
    const first = await cache.query(page('hour'));
    expect(reads.length).toBeGreaterThan(0);
    reads.length = 0;
    expect(await cache.query(page('hour'))).toEqual(first);
    expect(reads).toEqual([]);
    // A wider range: only what lies outside the first.
    await cache.query(page('hour', T0 - 86_400_000 * 80));
    expect(reads).toHaveLength(1);
    expect(Math.max(...reads[0].map((p) => p.to))).toBeLessThanOrEqual(T0 - 86_400_000 * 40);
  });

  it('a write drops just the rows its samples fall in: the next page reads that sample, minute, hour, day and month again', async () => {
    const { cache, reads } = await cachedStore();
    await cache.write('messages', [row({ interval: T0 }), row({ interval: T0 + 7200_000 })], new Map());
    const q = page('day', T0 - 86_400_000 * 3, T0 + 86_400_000 * 3 - 6000);
    await cache.query(q);
    await cache.query(page('minute', T0, T0 + 3 * 3600_000));
    reads.length = 0;
    await cache.write('messages', [row({ interval: T0 + 7200_000 + 6000, counters: { [C]: 5 } })], new Map());
    const [, day] = [await cache.query(page('minute', T0, T0 + 3 * 3600_000)), await cache.query(q)];
    expect(day.map((b) => b.counters[C])).toEqual([7]);
    // Only the minute 02:00 (the minute page), and the day (the day page) were read again.
    expect(reads.flat().map((p) => [p.level, p.from - T0, p.to - T0])).toEqual([
      ['minute', 7200_000, 7260_000],
      ['day', 0, 86_400_000],
    ]);
  });

  it('keeps nothing of a read that a write overtook: the next page reads the store again and shows the write', async () => {
    const { inner, cache } = await cachedStore();
    await cache.write('messages', [row({ interval: T0 })], new Map());
    // The store answers the first read only once the write below has been made.
    const read = inner.readPieces.bind(inner);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let answered: LevelRow[] | undefined;
    inner.readPieces = async (appId, pieces) => {
      answered ??= await read(appId, pieces);
      await held;
      return answered;
    };
    const before = cache.query(page('minute'));
    await new Promise((r) => setTimeout(r, 5));
    await cache.write('messages', [row({ interval: T0 + 6000, counters: { [C]: 10 } })], new Map());
    release();
    expect((await before).map((b) => b.counters[C])).toEqual([1]); // what the store held when it was read
    inner.readPieces = read;
    expect((await cache.query(page('minute'))).map((b) => b.counters[C])).toEqual([11]);
  });

  it('two reads at once of overlapping pages hold each row once, and give what the store gives', async () => {
    const { cache, inner } = await cachedStore();
    await cache.write('messages', Array.from({ length: 10 }, (_, i) => row({ interval: T0 + i * 60_000 })), new Map());
    const q = (from: number, to: number): StatsQuery => ({ appId: 'a', unit: 'minute', start: T0 + from * 60_000, end: T0 + to * 60_000 - 6000 });
    await Promise.all([cache.query(q(0, 10)), cache.query(q(0, 10)), cache.query(q(3, 7)), cache.query(q(5, 10))]);
    expect(cache.size).toBe(10);
    expect(await cache.query(q(0, 10))).toEqual(await inner.query(q(0, 10)));
  });

  it('takes a write of 200,000 intervals and a read of 150,000 rows (no argument list that long)', async () => {
    const { cache, inner } = await cachedStore({ maxRows: 1_000_000 });
    const minutes = Array.from({ length: 150_000 }, (_, i): LevelRow => ({ level: 'minute', start: T0 + i * 60_000, counters: { [C]: 1 }, channelSamples: 1, channelSum: 1, channelMax: 1, channelMin: 1, connectionSamples: 0, connectionSum: 0, connectionMax: 0, connectionMin: 0, lastSample: T0 + i * 60_000 }));
    inner.readPieces = async (_appId, pieces) => minutes.filter((m) => pieces.some((p) => p.level === 'minute' && m.start >= p.from && m.start < p.to));
    expect(await cache.query({ appId: 'a', unit: 'minute', start: T0, end: T0 + 150_000 * 60_000 - 6000 })).toHaveLength(150_000);
    expect(cache.size).toBe(150_000);
    inner.write = async () => {};
    await cache.write('messages', Array.from({ length: 200_000 }, (_, i) => row({ interval: T0 + i * 6000 })), new Map());
    expect(cache.size).toBe(150_000 - 20_000);
  });

  it('holds at most maxRows rows: the app read longest ago goes first, and one app holds at most a quarter of them', async () => {
    const { cache, reads } = await cachedStore({ maxRows: 40 });
    const rows = (appId: string, n: number) => Array.from({ length: n }, (_, i) => row({ appId, interval: T0 + i * 60_000 }));
    await cache.write('messages', ['a', 'b', 'c', 'd', 'e'].flatMap((app) => rows(app, 10)).concat(rows('big', 40)), new Map());
    const minutes = async (appId: string): Promise<number> => {
      reads.length = 0;
      expect(await cache.query({ ...page('minute'), appId })).toHaveLength(appId === 'big' ? 40 : 10);
      return reads.length;
    };
    for (const app of ['a', 'b', 'c', 'd']) expect(await minutes(app)).toBe(1);
    expect(cache.size).toBe(40);
    expect(await minutes('e')).toBe(1); // a, read longest ago, goes
    expect(cache.size).toBe(40);
    expect(await minutes('c')).toBe(0);
    expect(await minutes('a')).toBe(1); // b goes
    expect(await minutes('b')).toBe(1); // d goes (c was read after it)
    // 40 minutes of one app: more than its quarter. Kept by no one, and the others stay.
    expect(await minutes('big')).toBe(1);
    expect(await minutes('big')).toBe(1);
    expect(cache.size).toBe(40);
    for (const app of ['e', 'c', 'a', 'b']) expect(await minutes(app)).toBe(0);
  });

  it("reads an app's rows again once they are maxAgeMs old (a rebuild beside the service writes in another process)", async () => {
    let now = T0;
    const { cache, reads } = await cachedStore({ maxAgeMs: 60_000, now: () => now });
    await cache.write('messages', [row({ interval: T0 })], new Map());
    await cache.query(page('minute'));
    reads.length = 0;
    now += 59_000;
    await cache.query(page('minute'));
    expect(reads).toHaveLength(0);
    now += 2000;
    await cache.query(page('minute'));
    expect(reads.length).toBeGreaterThan(0);
  });

  it("knows the app's oldest sample after one read, and a write of an older sample moves it back", async () => {
    const { cache, oldestAsked } = await cachedStore();
    expect(await cache.oldestInterval('a')).toBeUndefined();
    await cache.write('messages', [row({ interval: T0 + 60_000 })], new Map());
    expect(await cache.oldestInterval('a')).toBe(T0 + 60_000);
    await cache.write('messages', [row({ interval: T0 })], new Map());
    expect(await cache.oldestInterval('a')).toBe(T0);
    expect(oldestAsked()).toBe(1);
  });

  it('with maxRows 0 holds nothing: every read goes to the store', async () => {
    const { cache, reads } = await cachedStore({ maxRows: 0 });
    await cache.write('messages', [row({ interval: T0 })], new Map());
    await cache.query(page('minute'));
    await cache.query(page('minute'));
    expect(reads).toHaveLength(2);
    expect(cache.size).toBe(0);
  });
});
