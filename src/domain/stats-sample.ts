/**
 * The stats model. A 6-second sample holds base counters (a flat map), the number of active
 * channels and the number of open realtime connections. Reads sum counters, take peak/min/mean of
 * the channel and connection samples, and derive the `all` and `persisted` sections (spec: Limits,
 * quota rules):
 * - a published message in a persisted channel counts twice (inbound + persisted);
 * - a message read from persisted history counts once more (outbound), and also shows in the
 *   persisted section (persisted = stored + retrieved) without being counted twice in `all`.
 */

export const SAMPLE_MS = 6000;

/** Base counter keys written by the projection. */
export const Base = {
  inbound: (transport: 'rest' | 'realtime', type: 'messages' | 'presence', what: 'count' | 'data') =>
    `messages.inbound.${transport}.${type}.${what}`,
  outbound: (transport: 'rest' | 'realtime', type: 'messages' | 'presence', what: 'count' | 'data') =>
    `messages.outbound.${transport}.${type}.${what}`,
  stored: (type: 'messages' | 'presence', what: 'count' | 'data') => `persisted.stored.${type}.${what}`,
  retrieved: (what: 'count' | 'data') => `persisted.retrieved.messages.${what}`,
  channelsOpened: 'channels.opened',
  /** realtime connections made (not resumed) */
  connectionsOpened: 'connections.all.opened',
  api: (kind: 'all' | 'tokenRequests', outcome: 'succeeded' | 'failed' | 'refused') => `apiRequests.${kind}.${outcome}`,
} as const;

export type Counters = Record<string, number>;

/**
 * Every base counter, in a fixed order: a store may keep a counter by its position + 1
 * (ClickHouse 18.16's sumMap takes numeric keys only). Append new counters; never reorder.
 */
export const BASE_COUNTERS: readonly string[] = [
  ...(['inbound', 'outbound'] as const).flatMap((dir) =>
    (['rest', 'realtime'] as const).flatMap((transport) =>
      (['messages', 'presence'] as const).flatMap((type) => (['count', 'data'] as const).map((what) => `messages.${dir}.${transport}.${type}.${what}`)),
    ),
  ),
  ...(['messages', 'presence'] as const).flatMap((type) => (['count', 'data'] as const).map((what) => Base.stored(type, what))),
  Base.retrieved('count'),
  Base.retrieved('data'),
  Base.channelsOpened,
  ...(['all', 'tokenRequests'] as const).flatMap((kind) => (['succeeded', 'failed', 'refused'] as const).map((o) => Base.api(kind, o))),
  Base.connectionsOpened,
];

/** Adds n to one counter (no object built per call: this runs for every publish). */
export function addCounter(into: Counters, key: string, n: number): void {
  if (n) into[key] = (into[key] ?? 0) + n;
}

export function addCounters(into: Counters, from: Counters): Counters {
  for (const [k, v] of Object.entries(from)) if (v) into[k] = (into[k] ?? 0) + v;
  return into;
}

export const intervalOf = (timestamp: number): number => timestamp - (((timestamp % SAMPLE_MS) + SAMPLE_MS) % SAMPLE_MS);

/** A unit bucket of samples, as the stores return it. */
export interface StatsBucket {
  /** start of the bucket (ms, UTC) */
  start: number;
  counters: Counters;
  /** channel samples in the bucket: how many samples had data, their sum, max and min */
  channelSamples: number;
  channelSum: number;
  channelMax: number;
  channelMin: number;
  /** connection samples (open realtime connections, summed over instances), as for channels */
  connectionSamples: number;
  connectionSum: number;
  connectionMax: number;
  connectionMin: number;
  /** start of the newest 6-second sample included */
  lastSample: number;
}

export type Unit = 'minute' | 'hour' | 'day' | 'month';

export function bucketStart(ms: number, unit: Unit): number {
  const d = new Date(ms);
  switch (unit) {
    case 'minute':
      return ms - (ms % 60_000);
    case 'hour':
      return ms - (ms % 3600_000);
    case 'day':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    case 'month':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  }
}

export function bucketEnd(start: number, unit: Unit): number {
  const d = new Date(start);
  switch (unit) {
    case 'minute':
      return start + 60_000;
    case 'hour':
      return start + 3600_000;
    case 'day':
      return start + 86_400_000;
    case 'month':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
}

const pad = (n: number): string => String(n).padStart(2, '0');

/** Interval ids (spec: stats): yyyy-mm-dd:hh:mm, yyyy-mm-dd:hh, yyyy-mm-dd, yyyy-mm. */
export function intervalId(ms: number, unit: Unit | 'second'): string {
  const d = new Date(ms);
  const day = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  switch (unit) {
    case 'month':
      return day.slice(0, 7);
    case 'day':
      return day;
    case 'hour':
      return `${day}:${pad(d.getUTCHours())}`;
    case 'minute':
      return `${day}:${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
    case 'second':
      return `${day}:${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  }
}

/** Parses an interval id of any unit (or undefined if it is not one). */
export function parseIntervalId(id: string): number | undefined {
  const m = /^(\d{4})-(\d{2})(?:-(\d{2})(?::(\d{2})(?::(\d{2})(?::(\d{2}))?)?)?)?$/.exec(id);
  if (!m) return undefined;
  const [, y, mo, d = '01', h = '00', mi = '00', s = '00'] = m;
  const ms = Date.UTC(+y, +mo - 1, +d, +h, +mi, +s);
  const back = new Date(ms);
  // Date.UTC reads a year 0 to 99 as 1900 to 1999: 0099-12 is not 1999-12.
  if (Number.isNaN(ms) || back.getUTCFullYear() !== +y || back.getUTCMonth() !== +mo - 1 || back.getUTCDate() !== +d || +h > 23 || +mi > 59 || +s > 59) return undefined;
  return ms;
}

/**
 * Whether the stores hold a sample of this interval: from 1970 and before 2106, ClickHouse's
 * DateTime. Only sandbox fixtures name an interval outside (review findings): ClickHouse refused a
 * sample of 1950 (a negative sample_start), and the stats projection retried it for ever; a month
 * from 2106 on was rolled up into a wrapped one (2162-12 into 2026-11, the app's own month of real
 * traffic, whose row the larger version replaced).
 */
export const fixtureIntervalHeld = (ms: number): boolean => ms >= 0 && ms < Date.UTC(2106, 0, 1);

/** A read of an app's stats: buckets of `unit` with a sample in [start, end]. */
export interface StatsQuery {
  appId: string;
  unit: Unit;
  /** inclusive, 6-second aligned */
  start: number;
  end: number;
}
