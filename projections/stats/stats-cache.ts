import { systemClock, type Clock } from '../../src/clock.js';
import type { StatsBucket } from '../../src/domain/stats-sample.js';
import { bucketsOf, endOf, LEVELS, startOf, type Level, type LevelRow, type Piece } from './rollups.js';
import type { StatsCheckpoint, StatsRollups, StatsRow, StatsStore } from './stats-store.js';
import type { StatsQuery } from '../../src/domain/stats-sample.js';

export interface StatsCacheOptions {
  /** Rows held, all apps and levels together (src/limits.ts statsCacheRows); 0 holds none. */
  maxRows: number;
  /** An app's rows are read again from the store after this long (see CachedStatsStore). */
  maxAgeMs: number;
  clock?: Clock;
}

/** A range [from, to) of starts. */
interface Span {
  from: number;
  to: number;
}

/** Index of the first row starting at or after `start` (rows sorted by start). */
function lowerBound(rows: LevelRow[], start: number): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid].start < start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * One level's rows of one app: `spans` (sorted, apart) are the ranges in which the store's rows are
 * all held, so a start inside a span with no row has no row in the store either.
 */
export class LevelRows {
  spans: Span[] = [];
  rows: LevelRow[] = [];

  /** The parts of [from, to) outside every span. */
  missing(from: number, to: number): Span[] {
    const out: Span[] = [];
    let at = from;
    for (const s of this.spans) {
      if (s.to <= at) continue;
      if (s.from >= to) break;
      if (s.from > at) out.push({ from: at, to: s.from });
      at = Math.max(at, s.to);
    }
    if (at < to) out.push({ from: at, to });
    return out;
  }

  /** Held rows with a start in [from, to), oldest first, onto `into`. */
  between(from: number, to: number, into: LevelRow[]): void {
    for (let i = lowerBound(this.rows, from); i < this.rows.length && this.rows[i].start < to; i++) into.push(this.rows[i]);
  }

  /**
   * Takes in the store's rows of [from, to) where none is held yet (another read may have filled
   * part of the range meanwhile: its rows stay, these are not added twice). Returns how many it added.
   */
  fill(from: number, to: number, rows: LevelRow[]): number {
    let added = 0;
    for (const m of this.missing(from, to)) {
      const part = rows.filter((r) => r.start >= m.from && r.start < m.to).sort((a, b) => a.start - b.start);
      const at = lowerBound(this.rows, m.from);
      // Not splice(at, 0, ...part): a spread of some 100,000 arguments throws.
      if (part.length > 0) this.rows = this.rows.slice(0, at).concat(part, this.rows.slice(at));
      this.cover(m.from, m.to);
      added += part.length;
    }
    return added;
  }

  /** Adds [from, to) to the spans, merged with the spans it touches. */
  private cover(from: number, to: number): void {
    let lo = 0;
    while (lo < this.spans.length && this.spans[lo].to < from) lo++;
    let hi = lo;
    let merged = { from, to };
    while (hi < this.spans.length && this.spans[hi].from <= to) {
      merged = { from: Math.min(merged.from, this.spans[hi].from), to: Math.max(merged.to, this.spans[hi].to) };
      hi++;
    }
    this.spans.splice(lo, hi - lo, merged);
  }

  /** Forgets [from, to): its rows and its place in the spans. Returns how many rows went. */
  drop(from: number, to: number): number {
    const at = lowerBound(this.rows, from);
    const gone = lowerBound(this.rows, to) - at;
    this.rows.splice(at, gone);
    const kept: Span[] = [];
    for (const s of this.spans) {
      if (s.to <= from || s.from >= to) kept.push(s);
      else {
        if (s.from < from) kept.push({ from: s.from, to: from });
        if (s.to > to) kept.push({ from: to, to: s.to });
      }
    }
    this.spans = kept;
    return gone;
  }
}

/** What is held of one app. */
class AppRows {
  readonly levels = new Map<Level, LevelRows>(LEVELS.map((l) => [l, new LevelRows()]));
  /** Bumped by every write of the app's samples: a read that saw another value keeps nothing. */
  generation = 0;
  rows = 0;
  /** The app's oldest sample, once the store has told it (null: it has none). */
  oldest: number | null | undefined;

  constructor(readonly bornAt: number) {}

  level(level: Level): LevelRows {
    return this.levels.get(level)!;
  }
}

/**
 * The stats store with the rows that pages read held in memory: minute, hour, day and month rollups
 * and 6-second samples, per app, by level and range (not by page: pages of any range or unit
 * share them). A page is served from memory when it was read before and nothing has been written
 * into its range since; otherwise only the ranges not held are read from the store, in one read.
 *
 * Exact: every write of samples goes through `write`, which drops every row its samples fall in,
 * at every level. When the instances share the writing (production mode), rows another instance
 * writes are dropped through `invalidate` (the stats reader, projections/stats/stats-reader.ts,
 * applies every partition and drops what each record changes), and `mayKeep` says whether what a
 * read of an app got may be kept (not while a record of the app waits for its rows in the store).
 * A read that a write overtook keeps nothing of what it read (the app's generation moved).
 * Writes by another process into the same store (a rebuild run beside the service) are not seen:
 * an app's rows are read again once they are `maxAgeMs` old.
 *
 * Bounded: at most `maxRows` rows, all apps together, a quarter of them for one app; the apps read
 * longest ago go first.
 */
export class CachedStatsStore implements StatsStore {
  readonly kind: string;
  private readonly clock: Clock;
  /** By app, read longest ago first. */
  private readonly apps = new Map<string, AppRows>();
  private rows = 0;
  /** Reads answered wholly from memory, and reads that went to the store (GET /metrics). */
  hits = 0;
  misses = 0;
  /** Whether what a read of the app got may be kept (set by the stats reader when writes are shared). */
  mayKeep: (appId: string) => boolean = () => true;

  constructor(
    private readonly inner: StatsStore,
    private readonly options: StatsCacheOptions,
  ) {
    this.kind = inner.kind;
    this.clock = options.clock ?? systemClock;
  }

  /** Rows held now. */
  get size(): number {
    return this.rows;
  }

  init(): Promise<void> {
    return this.inner.init();
  }

  loadCheckpoint(topic: string): Promise<StatsCheckpoint> {
    return this.inner.loadCheckpoint(topic);
  }

  /** The store's own (its rollups' writes change rows the cache may hold: the stats reader drops them). */
  get rollupWriter(): StatsRollups | undefined {
    return this.inner.rollupWriter;
  }

  async write(topic: string, rows: StatsRow[], checkpoint: StatsCheckpoint, options?: { rollUp?: boolean }): Promise<void> {
    try {
      await this.inner.write(topic, rows, checkpoint, options);
    } finally {
      // Whether or not it finished: a failed write may have changed some rows (ClickHouse writes
      // samples, then rollups, then the checkpoint).
      this.forget(rows);
    }
  }

  /** Drops every held row that samples of these (app, interval) fall in, at every level: written elsewhere. */
  invalidate(touched: { appId: string; interval: number }[]): void {
    this.forget(touched);
  }

  /** Drops every held row that samples of these rows fall in, at every level. */
  private forget(rows: { appId: string; interval: number }[]): void {
    const byApp = new Map<string, Set<number>>();
    for (const r of rows) {
      if (!this.apps.has(r.appId)) continue;
      let intervals = byApp.get(r.appId);
      if (!intervals) byApp.set(r.appId, (intervals = new Set()));
      intervals.add(r.interval);
    }
    for (const [appId, intervals] of byApp) {
      const app = this.apps.get(appId)!;
      app.generation++;
      let oldest = Infinity;
      for (const interval of intervals) if (interval < oldest) oldest = interval;
      if (app.oldest !== undefined) app.oldest = app.oldest === null ? oldest : Math.min(app.oldest, oldest);
      for (const level of LEVELS) {
        const starts = new Set<number>();
        for (const interval of intervals) starts.add(startOf(interval, level));
        const held = app.level(level);
        for (const start of starts) {
          const gone = held.drop(start, endOf(start, level));
          app.rows -= gone;
          this.rows -= gone;
        }
      }
    }
  }

  query(q: StatsQuery): Promise<StatsBucket[]> {
    return bucketsOf(q, (pieces) => this.readPieces(q.appId, pieces));
  }

  /** Held rows of the pieces, and the ranges not held read from the store in one read (and kept). */
  async readPieces(appId: string, pieces: Piece[]): Promise<LevelRow[]> {
    if (this.options.maxRows <= 0) return this.inner.readPieces(appId, pieces);
    const app = this.app(appId);
    const generation = app.generation;
    // Held rows are taken now: a write while the store is read drops them from the cache, not from this answer.
    const out: LevelRow[] = [];
    const wanted: Piece[] = [];
    for (const p of pieces) {
      const held = app.level(p.level);
      for (const m of held.missing(p.from, p.to)) wanted.push({ level: p.level, from: m.from, to: m.to });
      held.between(p.from, p.to, out);
    }
    if (wanted.length === 0) {
      this.hits++;
      return out;
    }
    this.misses++;
    const read = await this.inner.readPieces(appId, wanted);
    if (app.generation === generation && this.apps.get(appId) === app && this.mayKeep(appId)) {
      let added = 0;
      for (const w of wanted) added += app.level(w.level).fill(w.from, w.to, read.filter((r) => r.level === w.level && r.start >= w.from && r.start < w.to));
      app.rows += added;
      this.rows += added;
      this.evict(appId, app);
    }
    for (const r of read) out.push(r);
    return out;
  }

  appsWithData(): Promise<string[]> {
    return this.inner.appsWithData();
  }

  async oldestInterval(appId: string): Promise<number | undefined> {
    if (this.options.maxRows <= 0) return this.inner.oldestInterval(appId);
    const app = this.app(appId);
    if (app.oldest !== undefined) return app.oldest ?? undefined;
    const generation = app.generation;
    const oldest = await this.inner.oldestInterval(appId);
    if (app.generation === generation && this.apps.get(appId) === app && this.mayKeep(appId)) app.oldest = oldest ?? null;
    return oldest;
  }

  queryFromSamples(q: StatsQuery): Promise<StatsBucket[]> {
    return this.inner.queryFromSamples(q);
  }

  /** Forgets every row held (on close; a test starts from nothing held this way). */
  clear(): void {
    this.apps.clear();
    this.rows = 0;
  }

  close(): Promise<void> {
    this.clear();
    return this.inner.close();
  }

  /** The app's entry, now the one read last; a new one when its rows are older than maxAgeMs. */
  private app(appId: string): AppRows {
    const now = this.clock.now();
    let app = this.apps.get(appId);
    if (app) {
      this.apps.delete(appId);
      if (now - app.bornAt > this.options.maxAgeMs) {
        this.rows -= app.rows;
        app = undefined;
      }
    }
    app ??= new AppRows(now);
    this.apps.set(appId, app);
    return app;
  }

  /**
   * Drops the apps read longest ago until the rows fit. The app being read holds at most a quarter
   * of them: past that it starts over, so that one app's pages cannot push every other app out.
   */
  private evict(readingId: string, reading: AppRows): void {
    if (reading.rows > this.options.maxRows / 4) this.drop(readingId, reading);
    for (const [appId, app] of this.apps) {
      if (this.rows <= this.options.maxRows) return;
      this.drop(appId, app);
    }
  }

  private drop(appId: string, app: AppRows): void {
    this.apps.delete(appId);
    this.rows -= app.rows;
  }
}
