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
  if (Number.isNaN(ms) || back.getUTCMonth() !== +mo - 1 || back.getUTCDate() !== +d || +h > 23 || +mi > 59 || +s > 59) return undefined;
  return ms;
}

const get = (c: Counters, k: string): number => c[k] ?? 0;

// The keys of flatEntries, built once (it runs for every record of every page).
const DIRS = ['inbound', 'outbound'] as const;
const TRANSPORTS = ['rest', 'realtime'] as const;
const WHATS = (['count', 'data'] as const).map((what) => ({
  what,
  dirs: DIRS.map((dir) => ({
    transports: TRANSPORTS.map((transport) => ({
      msgs: `messages.${dir}.${transport}.messages.${what}`,
      pres: `messages.${dir}.${transport}.presence.${what}`,
      all: `messages.${dir}.${transport}.all.${what}`,
    })),
    allMsgs: `messages.${dir}.all.messages.${what}`,
    allPres: `messages.${dir}.all.presence.${what}`,
    allAll: `messages.${dir}.all.all.${what}`,
  })),
  stored: Base.stored('messages', what),
  storedPres: Base.stored('presence', what),
  retrieved: Base.retrieved(what),
  persistedMsgs: `messages.persisted.messages.${what}`,
  persistedPres: `messages.persisted.presence.${what}`,
  persistedAll: `messages.persisted.all.${what}`,
  allMsgs: `messages.all.messages.${what}`,
  allPres: `messages.all.presence.${what}`,
  allAll: `messages.all.all.${what}`,
}));
const API_KEYS = (['all', 'tokenRequests'] as const).flatMap((kind) => (['succeeded', 'failed', 'refused'] as const).map((o) => Base.api(kind, o)));

/**
 * The flat `entries` of a bucket (protocol 2+; schema app-stats-0.0.5), zeros left out, as the
 * spec derives them: `flatEntries` gives the same, key for key and in the same order, from a
 * table made of this one (it runs for every record of every page).
 */
export function specEntries(bucket: StatsBucket, elapsedSamples: number, totalSamples: number): Record<string, number> {
  const c = bucket.counters;
  const out: Record<string, number> = {};
  const put = (k: string, v: number): void => {
    if (v) out[k] = v;
  };
  for (const w of WHATS) {
    let inMsgs = 0;
    let inPres = 0;
    let outMsgs = 0;
    let outPres = 0;
    w.dirs.forEach((d, i) => {
      let dirMsgs = 0;
      let dirPres = 0;
      for (const t of d.transports) {
        const msgs = get(c, t.msgs);
        const pres = get(c, t.pres);
        put(t.msgs, msgs);
        put(t.pres, pres);
        put(t.all, msgs + pres);
        dirMsgs += msgs;
        dirPres += pres;
      }
      put(d.allMsgs, dirMsgs);
      put(d.allPres, dirPres);
      put(d.allAll, dirMsgs + dirPres);
      if (i === 0) [inMsgs, inPres] = [dirMsgs, dirPres];
      else [outMsgs, outPres] = [dirMsgs, dirPres];
    });
    const storedMsgs = get(c, w.stored);
    const storedPres = get(c, w.storedPres);
    const retrieved = get(c, w.retrieved);
    put(w.persistedMsgs, storedMsgs + retrieved);
    put(w.persistedPres, storedPres);
    put(w.persistedAll, storedMsgs + retrieved + storedPres);
    const allMsgs = inMsgs + outMsgs + storedMsgs;
    const allPres = inPres + outPres + storedPres;
    put(w.allMsgs, allMsgs);
    put(w.allPres, allPres);
    put(w.allAll, allMsgs + allPres);
  }
  const gauge = (prefix: string, samples: number, sum: number, max: number, min: number): void => {
    if (samples === 0) return;
    out[`${prefix}.peak`] = max;
    // A sample with no data had none (no active channel, no open connection).
    out[`${prefix}.min`] = samples >= totalSamples ? min : 0;
    out[`${prefix}.mean`] = Math.round((sum / Math.max(1, elapsedSamples)) * 1000) / 1000;
  };
  gauge('channels', bucket.channelSamples, bucket.channelSum, bucket.channelMax, bucket.channelMin);
  put('channels.opened', get(c, Base.channelsOpened));
  gauge('connections.all', bucket.connectionSamples, bucket.connectionSum, bucket.connectionMax, bucket.connectionMin);
  put('connections.all.opened', get(c, Base.connectionsOpened));
  for (const k of API_KEYS) put(k, get(c, k));
  return out;
}

/** One entry of a record: a sum of base counters (by position in BASE_COUNTERS, each times a factor), or a gauge's three. */
type Slot = { key: string; terms: number[]; gauge?: undefined } | { gauge: 'channels' | 'connections.all'; keys: [peak: string, min: string, mean: string] };

/** The entries of specEntries in its order, each as what it is made of (entries are linear in the counters). */
const SLOTS: Slot[] = (() => {
  const bucket = (counters: Counters, samples: number): StatsBucket => ({
    start: 0,
    counters,
    channelSamples: samples,
    channelSum: samples,
    channelMax: samples,
    channelMin: samples,
    connectionSamples: samples,
    connectionSum: samples,
    connectionMax: samples,
    connectionMin: samples,
    lastSample: 0,
  });
  const every = specEntries(bucket(Object.fromEntries(BASE_COUNTERS.map((k) => [k, 1])), 1), 1, 1);
  const alone = BASE_COUNTERS.map((k) => specEntries(bucket({ [k]: 1 }, 0), 1, 1));
  const slots: Slot[] = [];
  for (const key of Object.keys(every)) {
    const gauge = (['channels', 'connections.all'] as const).find((g) => key.startsWith(`${g}.`) && /\.(peak|min|mean)$/.test(key) && !key.slice(g.length + 1).includes('.'));
    if (gauge) {
      if (key.endsWith('.peak')) slots.push({ gauge, keys: [`${gauge}.peak`, `${gauge}.min`, `${gauge}.mean`] });
      continue;
    }
    const terms: number[] = [];
    alone.forEach((entries, i) => {
      if (entries[key]) terms.push(i, entries[key]);
    });
    slots.push({ key, terms });
  }
  return slots;
})();
const COUNTER_INDEX = new Map(BASE_COUNTERS.map((k, i) => [k, i]));
/** The counters of the record being made, by position (records are made one at a time). */
const values = new Float64Array(BASE_COUNTERS.length);

/**
 * specEntries, from the table: the same keys in the same order, three times faster. It adds in
 * another order; counters are whole numbers (counts, bytes), exact in doubles up to 2^53, so the
 * sums are the same (a fractional counter, which only a sandbox fixture can give, may differ in
 * its last bit).
 */
export function flatEntries(bucket: StatsBucket, elapsedSamples: number, totalSamples: number): Record<string, number> {
  values.fill(0);
  const c = bucket.counters;
  for (const k in c) {
    const i = COUNTER_INDEX.get(k);
    if (i !== undefined) values[i] = c[k];
  }
  const out: Record<string, number> = {};
  for (const slot of SLOTS) {
    if (slot.gauge !== undefined) {
      const channels = slot.gauge === 'channels';
      const samples = channels ? bucket.channelSamples : bucket.connectionSamples;
      if (samples === 0) continue;
      out[slot.keys[0]] = channels ? bucket.channelMax : bucket.connectionMax;
      // A sample with no data had none (no active channel, no open connection).
      out[slot.keys[1]] = samples >= totalSamples ? (channels ? bucket.channelMin : bucket.connectionMin) : 0;
      out[slot.keys[2]] = Math.round(((channels ? bucket.channelSum : bucket.connectionSum) / Math.max(1, elapsedSamples)) * 1000) / 1000;
      continue;
    }
    const t = slot.terms;
    let v = 0;
    for (let j = 0; j < t.length; j += 2) v += values[t[j]] * t[j + 1];
    if (v) out[slot.key] = v;
  }
  return out;
}

const PATHS = new Map<string, string[]>();

/** The spec's nested record (version 0.8) from flat entries; sections with nothing are left out. */
export function nestedSections(entries: Record<string, number>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in entries) {
    let path = PATHS.get(key);
    if (!path) {
      if (key.startsWith('messages.')) path = key.slice('messages.'.length).split('.');
      else if (key.startsWith('apiRequests.tokenRequests.')) path = ['tokenRequests', key.split('.')[2]];
      else if (key.startsWith('apiRequests.all.')) path = ['apiRequests', key.split('.')[2]];
      else path = key.split('.');
      if (PATHS.size < 1000) PATHS.set(key, path);
    }
    let node = out as Record<string, unknown>;
    for (let i = 0; i < path.length - 1; i++) node = (node[path[i]] ??= {}) as Record<string, unknown>;
    node[path[path.length - 1]] = entries[key];
  }
  return out;
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
