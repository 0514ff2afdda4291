import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../errors.js';
import { permitsAppWide } from '../auth/capability.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import { JsonText, serializeJson } from '../http/format.js';
import { directionParam, integerParam, limitParam } from '../http/query-params.js';
import { keptParams, relativeUrl, type LinkParams } from '../http/pagination.js';
import type { Clock } from '../clock.js';
import {
  bucketEnd,
  bucketStart,
  countersFromNested,
  flatEntries,
  intervalId,
  intervalOf,
  nestedSections,
  parseIntervalId,
  SAMPLE_MS,
  type StatsBucket,
  type Unit,
} from '../../projections/stats/stats-sample.js';
import { wholeRowOf } from '../../projections/stats/rollups.js';
import type { StatsQuery } from '../../projections/stats/stats-store.js';
import { resource } from './route-table.js';

export const STATS_SCHEMA = 'https://schemas.ably.com/json/app-stats-0.0.5.json';
const UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

export interface StatsReader {
  query(q: StatsQuery): Promise<StatsBucket[]>;
  /** The app's oldest sample's interval (see pageOfBuckets). */
  oldest(appId: string): Promise<number | undefined>;
  /** Resolves once query() includes everything this instance appended (README: Consistency of reads); rejects with 50003 past the limit. */
  ownWrites(): Promise<void>;
}

export interface StatsFixtureWriter {
  /** Appends fixture samples for an app to the log (sandbox only). */
  append(appId: string, fixtures: { intervalStart: number; counters: Record<string, number>; channels?: number; connections?: number }[]): Promise<void>;
}

/** `start` / `end`: ms since the epoch or an interval id, rounded down to the 6-second boundary. */
function statsTime(query: Record<string, unknown>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalidParameterValue', `${name} must be given once`);
  const ms = /^\d{1,16}$/.test(v) ? Number(v) : parseIntervalId(v);
  if (ms === undefined) {
    throw new ServiceError('invalidParameterValue', `${name} must be ms since the epoch or an interval id such as 2024-01-31:23:59`);
  }
  return intervalOf(ms);
}

function unitParam(query: Record<string, unknown>): Unit {
  const v = query.unit ?? query.by;
  if (v === undefined || v === '') return 'minute';
  if (!UNITS.includes(v as Unit)) throw new ServiceError('invalidParameterValue', 'unit must be minute, hour, day or month');
  return v as Unit;
}

/** Whether a bucket's interval has samples yet to come at `now`. */
const inProgressAt = (start: number, unit: Unit, now: number): boolean => bucketEnd(start, unit) > intervalOf(now) + SAMPLE_MS;

/** A bucket as the spec's record (0.8: nested sections) or the SDK's (2+: flat entries). */
function toRecord(bucket: StatsBucket, unit: Unit, now: number, appId: string, modern: boolean): Record<string, unknown> {
  const total = (bucketEnd(bucket.start, unit) - bucket.start) / SAMPLE_MS;
  const inProgress = inProgressAt(bucket.start, unit, now);
  const elapsed = inProgress ? Math.max(1, (intervalOf(now) + SAMPLE_MS - bucket.start) / SAMPLE_MS) : total;
  const entries = flatEntries(bucket, elapsed, total);
  const record: Record<string, unknown> = { intervalId: intervalId(bucket.start, unit), unit };
  if (modern) {
    record.schema = STATS_SCHEMA;
    record.appId = appId;
    record.entries = entries;
  } else {
    Object.assign(record, nestedSections(entries));
  }
  if (inProgress) record.inProgress = intervalId(bucket.lastSample, 'second');
  return record;
}

/** Records' JSON, made once per row a bucket was made of alone (rows the stats cache holds live on). */
const RECORD_TEXT = new WeakMap<object, Map<string, string>>();

/**
 * A record's JSON. A closed bucket that is one row (see wholeRowOf) has the same record every
 * time: its text is kept with the row, so a page of held rows is mostly joined, not made (a
 * bucket in progress changes with the clock, and is made every time).
 */
function recordText(bucket: StatsBucket, unit: Unit, now: number, appId: string, modern: boolean): string {
  const row = wholeRowOf(bucket);
  if (!row || inProgressAt(bucket.start, unit, now)) return serializeJson(toRecord(bucket, unit, now, appId, modern));
  let texts = RECORD_TEXT.get(row);
  if (!texts) RECORD_TEXT.set(row, (texts = new Map()));
  const key = modern ? `${unit} modern` : unit;
  let text = texts.get(key);
  if (text === undefined) texts.set(key, (text = serializeJson(toRecord(bucket, unit, now, appId, modern))));
  return text;
}

const UNIT_MS: Record<Unit, number> = { minute: 60_000, hour: 3600_000, day: 86_400_000, month: 31 * 86_400_000 };

/**
 * At least `wanted` buckets from the end of the range where the page starts (or all there are),
 * oldest first. Asks the store for a window just wide enough for a full page and widens it only
 * when buckets without data leave the page short, so a page of minutes does not read 30 days.
 */
async function pageOfBuckets(stats: StatsReader, asked: StatsQuery, direction: 'forwards' | 'backwards', wanted: number): Promise<StatsBucket[]> {
  // Nothing is older than the app's oldest sample: without this bound, a page of data younger
  // than the page (a new app, a fresh service) widened its window a dozen times back to 1970,
  // each query reading every sample again (12 queries per GET /stats?unit=minute). Backwards, it
  // is asked only when the first window is short (a page of an app with data enough is one read);
  // forwards, first (the page starts at the range's start, often the epoch).
  let oldestAsked = false;
  let q = asked;
  const bound = async (): Promise<boolean> => {
    oldestAsked = true;
    const oldest = await stats.oldest(asked.appId);
    if (oldest === undefined) return false;
    q = { ...q, start: Math.max(q.start, oldest) };
    return q.start <= q.end;
  };
  if (direction === 'forwards' && !(await bound())) return [];
  let span = wanted * UNIT_MS[q.unit];
  for (;;) {
    const window: StatsQuery =
      // Backwards, the window starts at a bucket's start, so its first bucket is whole (a page in one query).
      direction === 'backwards' ? { ...q, start: Math.max(q.start, bucketStart(q.end - span, q.unit)) } : { ...q, end: Math.min(q.end, q.start + span) };
    const whole = window.start === q.start && window.end === q.end;
    const buckets = await stats.query(window);
    // A window edge may cut a bucket; it is complete once the window moves past it.
    const complete = direction === 'backwards' ? buckets.filter((b) => whole || b.start >= window.start) : buckets.filter((b) => whole || bucketEnd(b.start, q.unit) <= window.end + 1);
    if (whole || complete.length >= wanted) return direction === 'backwards' ? complete.slice(-wanted) : complete.slice(0, wanted);
    if (!oldestAsked) {
      if (!(await bound())) return [];
      // The window reached back past the oldest sample: it held every bucket there is.
      if (q.start >= window.start) return complete.slice(-wanted);
    }
    span *= 4;
  }
}

export async function statsRoutes(
  app: FastifyInstance,
  opts: { stats: StatsReader; clock: Clock; fixtures?: StatsFixtureWriter },
): Promise<void> {
  resource(app, '/stats', {
    // spec: Retrieve usage statistics
    GET: {
      handler: async (request, reply) => {
        const credentials = credentialsOf(request);
        if (!permitsAppWide(credentials.capability, 'stats')) {
          throw new ServiceError('capabilityDenied', 'stats need the "stats" operation (or "*") on the resource "*": a right over the whole app');
        }
        const query = request.query as Record<string, unknown>;
        await opts.stats.ownWrites();
        const now = opts.clock.now();
        const start = statsTime(query, 'start');
        const givenEnd = statsTime(query, 'end');
        const unit = unitParam(query);
        const limit = limitParam(query);
        const direction = directionParam(query);
        const cursor = integerParam(query, 'cursor');
        if (start !== undefined && givenEnd !== undefined && start > givenEnd) {
          throw new ServiceError('invalidParameterValue', `start (${start}) is after end (${givenEnd})`);
        }
        const end = givenEnd ?? intervalOf(now);
        let from = start ?? 0;
        let to = end;
        if (cursor !== undefined) {
          if (direction === 'backwards') to = Math.min(to, cursor - 1);
          else from = Math.max(from, bucketEnd(cursor, unit));
        }
        const buckets = from > to ? [] : await pageOfBuckets(opts.stats, { appId: credentials.app.appId, unit, start: from, end: to }, direction, limit + 1);
        if (direction === 'backwards') buckets.reverse();
        const page = buckets.slice(0, limit);
        const base: LinkParams = { start, end, unit, limit, direction, ...keptParams(query, ['fields', 'flatten', 'select']) };
        const links: Record<string, string> = {
          first: relativeUrl('stats', base),
          current: relativeUrl('stats', { ...base, cursor }),
        };
        if (buckets.length > limit) links.next = relativeUrl('stats', { ...base, cursor: page[page.length - 1].start });
        const modern = request.ctx?.version.modern ?? false;
        const appId = credentials.app.appId;
        const ctx = request.ctx;
        // JSON as it is (most reads): records' text joined; every other form from the records.
        const asText = (ctx === undefined || ctx.format === 'json' || ctx.format === 'jsonp') && !ctx?.envelope && !ctx?.control;
        const body = asText
          ? new JsonText(`[${page.map((b) => recordText(b, unit, now, appId, modern)).join(',')}]`)
          : page.map((b) => toRecord(b, unit, now, appId, modern));
        return sendResult(request, reply, 200, body, links);
      },
    },
    // Sandbox only: merge fixture records (nested form, each with its intervalId) into the app's stats.
    ...(opts.fixtures
      ? {
          POST: {
            handler: async (request, reply) => {
              const credentials = credentialsOf(request);
              const body = Array.isArray(request.body) ? request.body : [request.body];
              const fixtures = body.map((record, i) => {
                if (typeof record !== 'object' || record === null) throw new ServiceError('invalidRequestBody', `stats record ${i} is not an object`);
                const id = (record as { intervalId?: unknown }).intervalId;
                const start = typeof id === 'string' ? parseIntervalId(id) : undefined;
                if (start === undefined) throw new ServiceError('invalidRequestBody', `stats record ${i} needs an intervalId such as 2024-01-31:23:59`);
                return { intervalStart: start, ...countersFromNested(record as Record<string, unknown>) };
              });
              await opts.fixtures!.append(credentials.app.appId, fixtures);
              return sendResult(request, reply, 201, { accepted: fixtures.length });
            },
          },
        }
      : {}),
  });
}
