import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../errors.js';
import { permitsAppWide } from '../auth/capability.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import { JsonText, serializeJson } from '../http/format.js';
import { directionParam, integerParam, limitParam } from '../http/query-params.js';
import { keptParams, relativeUrl, type LinkParams } from '../http/pagination.js';
import type { Clock } from '../clock.js';
import { bucketEnd, intervalId, intervalOf, parseIntervalId, SAMPLE_MS, type StatsBucket, type Unit } from '../domain/stats-sample.js';
import { flatEntries, nestedSections } from '../domain/stats-record.js';
import { readStatsPage, type StatsReader } from '../stats/stats-read.js';
import { parseStatsFixtures, type StatsFixtureWriter } from '../stats/stats-fixture.js';
import { wholeRowOf } from '../../projections/stats/rollups.js';
import { resource } from './route-table.js';

export const STATS_SCHEMA = 'https://schemas.ably.com/json/app-stats-0.0.5.json';
const UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

/**
 * The last ms an interval id can name (9999-12-31:23:59:59.999). Past it a day or month has no
 * date (past 8.64e15 ms, Date.UTC gives NaN), and a page of days or months from such an end never
 * found the start of its window: one GET /stats?end=9999999999999999&unit=day spun the event loop
 * for good (review finding).
 */
const MAX_STATS_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** `start` / `end`: ms since the epoch or an interval id, rounded down to the 6-second boundary. */
function statsTime(query: Record<string, unknown>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalidParameterValue', `${name} must be given once`);
  const ms = /^\d{1,16}$/.test(v) ? Number(v) : parseIntervalId(v);
  // An interval id before the epoch (a year 0000) would put a negative time in the Link headers,
  // which this route then refuses.
  if (ms === undefined || ms < 0 || ms > MAX_STATS_TIME) {
    throw new ServiceError('invalidParameterValue', `${name} must be ms since the epoch (at most ${MAX_STATS_TIME}) or an interval id such as 2024-01-31:23:59`);
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

export async function statsRoutes(
  app: FastifyInstance,
  opts: { stats: StatsReader; clock: Clock; fixtures?: StatsFixtureWriter; maxFixtures: number },
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
        const start = statsTime(query, 'start');
        const givenEnd = statsTime(query, 'end');
        const unit = unitParam(query);
        const limit = limitParam(query);
        const direction = directionParam(query);
        const cursor = integerParam(query, 'cursor');
        if (start !== undefined && givenEnd !== undefined && start > givenEnd) {
          throw new ServiceError('invalidParameterValue', `start (${start}) is after end (${givenEnd})`);
        }
        // Checked before waiting for this instance's own writes: a bad request is a 400 at once,
        // also while the stats projection is behind its store (which would make it a 504).
        await opts.stats.ownWrites();
        const now = opts.clock.now();
        const appId = credentials.app.appId;
        const end = givenEnd ?? intervalOf(now);
        const { buckets: page, next } = await readStatsPage(opts.stats, { appId, unit, start: start ?? 0, end, limit, direction, cursor });
        const base: LinkParams = { start, end, unit, limit, direction, ...keptParams(query) };
        const links: Record<string, string> = {
          first: relativeUrl('stats', base),
          current: relativeUrl('stats', { ...base, cursor }),
        };
        if (next !== undefined) links.next = relativeUrl('stats', { ...base, cursor: next });
        const modern = request.ctx?.version.modern ?? false;
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
              // The app's usage, written: every right over the whole app (a key or token for one
              // channel's subscribers could add a million messages to the app's stats).
              if (!permitsAppWide(credentials.capability, '*')) {
                throw new ServiceError('capabilityDenied', 'stats fixtures need every operation ("*") on the resource "*": a key over the whole app');
              }
              const fixtures = parseStatsFixtures(request.body, opts.maxFixtures);
              await opts.fixtures!.append(credentials.app.appId, fixtures);
              return sendResult(request, reply, 201, { accepted: fixtures.length });
            },
          },
        }
      : {}),
  });
}
