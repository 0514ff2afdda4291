import { ServiceError } from '../errors.js';
import { Base, fixtureIntervalHeld, parseIntervalId, type Counters } from '../domain/stats-sample.js';

/** One fixture sample: base counters of one 6-second interval, with its peaks of channels and connections. */
export interface StatsFixtureSample {
  intervalStart: number;
  counters: Counters;
  channels?: number;
  connections?: number;
}

export interface StatsFixtureWriter {
  /** Appends fixture samples for an app to the log (sandbox only). */
  append(appId: string, fixtures: StatsFixtureSample[]): Promise<void>;
}

/**
 * The largest channels or connections peak of a fixture (UInt32 in ClickHouse). Counters are at
 * most Number.MAX_SAFE_INTEGER: a 1e308 made the sums Infinity (null in JSON).
 */
const MAX_FIXTURE_PEAK = 2 ** 32 - 1;

/**
 * The body of a sandbox POST /stats: fixture records in the spec's nested form (0.8), each with
 * its intervalId, one record or an array of them.
 */
export function parseStatsFixtures(body: unknown, maxRecords: number): StatsFixtureSample[] {
  const records = Array.isArray(body) ? body : [body];
  if (records.length > maxRecords) throw new ServiceError('invalidRequestBody', `at most ${maxRecords} stats records a call (${records.length} sent)`);
  return records.map((record, i) => {
    if (typeof record !== 'object' || record === null) throw new ServiceError('invalidRequestBody', `stats record ${i} is not an object`);
    const id = (record as { intervalId?: unknown }).intervalId;
    const start = typeof id === 'string' ? parseIntervalId(id) : undefined;
    if (start === undefined) throw new ServiceError('invalidRequestBody', `stats record ${i} needs an intervalId such as 2024-01-31:23:59`);
    if (!fixtureIntervalHeld(start)) throw new ServiceError('invalidRequestBody', `stats record ${i}: the intervalId must be from 1970 and before 2106 (ClickHouse's dates)`);
    const figures = countersFromNested(record as Record<string, unknown>);
    const too =
      Object.entries(figures.counters).find(([, v]) => v > Number.MAX_SAFE_INTEGER)?.[0] ??
      (['channels', 'connections'] as const).find((k) => (figures[k] ?? 0) > MAX_FIXTURE_PEAK);
    if (too !== undefined) throw new ServiceError('invalidRequestBody', `stats record ${i}: ${too} is above the largest a stats record holds`);
    return { intervalStart: start, ...figures };
  });
}

/**
 * Base counters from a nested fixture record (sandbox POST /stats); derived sections are ignored.
 * `channels` and `connections` are the peaks, kept as one sample's count.
 */
export function countersFromNested(record: Record<string, unknown>): { counters: Counters; channels?: number; connections?: number } {
  const counters: Counters = {};
  const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  const section = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' ? (v as Record<string, unknown>) : {});
  for (const dir of ['inbound', 'outbound'] as const) {
    for (const transport of ['rest', 'realtime'] as const) {
      for (const type of ['messages', 'presence'] as const) {
        const s = section(section(section(record[dir])[transport])[type]);
        for (const what of ['count', 'data'] as const) if (num(s[what])) counters[`messages.${dir}.${transport}.${type}.${what}`] = num(s[what]);
      }
    }
  }
  for (const type of ['messages', 'presence'] as const) {
    const s = section(section(record.persisted)[type]);
    for (const what of ['count', 'data'] as const) if (num(s[what])) counters[Base.stored(type, what)] = num(s[what]);
  }
  for (const [section_, kind] of [['apiRequests', 'all'], ['tokenRequests', 'tokenRequests']] as const) {
    const s = section(record[section_]);
    for (const outcome of ['succeeded', 'failed', 'refused'] as const) if (num(s[outcome])) counters[Base.api(kind, outcome)] = num(s[outcome]);
  }
  const channels = section(record.channels);
  if (num(channels.opened)) counters[Base.channelsOpened] = num(channels.opened);
  // Connections of every kind: `all`, or else the sum of its parts (plain and tls).
  const conns = section(record.connections);
  const parts = conns.all !== undefined ? [section(conns.all)] : [section(conns.plain), section(conns.tls)];
  const opened = parts.reduce((n, p) => n + num(p.opened), 0);
  const peak = parts.reduce((n, p) => n + num(p.peak), 0);
  if (opened) counters[Base.connectionsOpened] = opened;
  return { counters, channels: num(channels.peak) || undefined, connections: peak || undefined };
}
