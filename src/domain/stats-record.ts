import { Base, BASE_COUNTERS, type Counters, type StatsBucket } from './stats-sample.js';

// The spec's stats record (spec: Retrieve usage statistics) made from a bucket of samples: the
// flat entries of protocol 2+ and the nested sections of 0.8.

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
