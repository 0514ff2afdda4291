// The stats counter keys: everything the projection, the usage meter and the sandbox fixtures can
// write is a BASE_COUNTERS key (ClickHouse stores a counter by its position there and drops
// unknown ones), and the flat entries of a bucket turn into the spec's nested record.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { BASE_COUNTERS, Base, type Counters, type StatsBucket } from '../../src/domain/stats-sample.js';
import { countersFromNested } from '../../src/stats/stats-fixture.js';
import { flatEntries, nestedSections } from '../../src/domain/stats-record.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import type { StatsRow, StatsWriter } from '../../projections/stats/stats-store.js';
import { UsageMeter } from '../../src/stats/usage-meter.js';
import type { AppendBatcher, PendingRecord } from '../../src/log/append-batcher.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent, UsageReported } from '../../src/domain/events.js';
import { Topics, type LogRecord } from '../../src/log/port.js';

const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);
const KNOWN = new Set(BASE_COUNTERS);

/** Every key the Base helpers can produce, over every argument they take. */
function allBaseKeys(): string[] {
  const keys: string[] = [];
  for (const transport of ['rest', 'realtime'] as const) {
    for (const type of ['messages', 'presence'] as const) {
      for (const what of ['count', 'data'] as const) keys.push(Base.inbound(transport, type, what), Base.outbound(transport, type, what));
    }
  }
  for (const type of ['messages', 'presence'] as const) for (const what of ['count', 'data'] as const) keys.push(Base.stored(type, what));
  for (const what of ['count', 'data'] as const) keys.push(Base.retrieved(what));
  keys.push(Base.channelsOpened, Base.connectionsOpened);
  for (const kind of ['all', 'tokenRequests'] as const) {
    for (const outcome of ['succeeded', 'failed', 'refused'] as const) keys.push(Base.api(kind, outcome));
  }
  return keys;
}

/** A nested fixture record (sandbox POST /stats) with every section the service reads, all distinct values. */
const FULL_FIXTURE = {
  intervalId: '2030-01-15:10:20',
  inbound: {
    rest: { messages: { count: 1, data: 2 }, presence: { count: 3, data: 4 } },
    realtime: { messages: { count: 5, data: 6 }, presence: { count: 7, data: 8 } },
    all: { messages: { count: 999, data: 999 } }, // derived: ignored
  },
  outbound: {
    rest: { messages: { count: 9, data: 10 }, presence: { count: 11, data: 12 } },
    realtime: { messages: { count: 13, data: 14 }, presence: { count: 15, data: 16 } },
  },
  persisted: { messages: { count: 17, data: 18 }, presence: { count: 19, data: 20 } },
  all: { all: { count: 999, data: 999 } }, // derived: ignored
  channels: { peak: 21, opened: 23, mean: 999 },
  apiRequests: { succeeded: 24, failed: 25, refused: 26 },
  tokenRequests: { succeeded: 27, failed: 28, refused: 29 },
  connections: { all: { peak: 31, opened: 30, mean: 999 }, tls: { peak: 999, opened: 999 } }, // `all` wins over its parts
};

/** A usage meter on a batcher that keeps what it is given. */
function meterWithLog(clock: { now: () => number }): { meter: UsageMeter; reported: () => UsageReported[] } {
  const appended: { topic: string; records: PendingRecord[] }[] = [];
  const batcher = {
    append: async (topic: string, records: PendingRecord[]) => {
      appended.push({ topic, records });
      return records.map((_, offset) => ({ partition: 0, offset }));
    },
  };
  const meter = new UsageMeter(batcher as unknown as AppendBatcher, clock, 'instance-1', pino({ level: 'silent' }));
  const reported = (): UsageReported[] =>
    appended.flatMap(({ topic, records }) => {
      expect(topic).toBe(Topics.usage);
      return records.map((r) => decodeEvent(r.build(clock.now())) as UsageReported);
    });
  return { meter, reported };
}

/** A stats store that keeps the rows the projection writes. */
function rowStore(): { store: StatsWriter; rows: StatsRow[] } {
  const rows: StatsRow[] = [];
  const store: StatsWriter = {
    init: async () => {},
    write: async (_topic, written) => {
      rows.push(...written);
    },
    loadCheckpoint: async () => new Map(),
  };
  return { store, rows };
}

describe('BASE_COUNTERS', () => {
  it('has no duplicates', () => {
    expect(new Set(BASE_COUNTERS).size).toBe(BASE_COUNTERS.length);
  });

  it('keeps the positions the README documents for ClickHouse (ids are position + 1; append only)', () => {
    expect(BASE_COUNTERS.slice(0, 29)).toEqual([
      'messages.inbound.rest.messages.count',
      'messages.inbound.rest.messages.data',
      'messages.inbound.rest.presence.count',
      'messages.inbound.rest.presence.data',
      'messages.inbound.realtime.messages.count',
      'messages.inbound.realtime.messages.data',
      'messages.inbound.realtime.presence.count',
      'messages.inbound.realtime.presence.data',
      'messages.outbound.rest.messages.count',
      'messages.outbound.rest.messages.data',
      'messages.outbound.rest.presence.count',
      'messages.outbound.rest.presence.data',
      'messages.outbound.realtime.messages.count',
      'messages.outbound.realtime.messages.data',
      'messages.outbound.realtime.presence.count',
      'messages.outbound.realtime.presence.data',
      'persisted.stored.messages.count',
      'persisted.stored.messages.data',
      'persisted.stored.presence.count',
      'persisted.stored.presence.data',
      'persisted.retrieved.messages.count',
      'persisted.retrieved.messages.data',
      'channels.opened',
      'apiRequests.all.succeeded',
      'apiRequests.all.failed',
      'apiRequests.all.refused',
      'apiRequests.tokenRequests.succeeded',
      'apiRequests.tokenRequests.failed',
      'apiRequests.tokenRequests.refused',
    ]);
    expect(BASE_COUNTERS.slice(29)).toEqual(['connections.all.opened']);
  });

  it('holds every key the Base helpers can make, and nothing else', () => {
    const keys = allBaseKeys();
    expect(keys.filter((k) => !KNOWN.has(k))).toEqual([]);
    expect(new Set(keys)).toEqual(KNOWN);
  });

  it('holds every counter countersFromNested gives for a fully populated fixture', () => {
    const { counters, channels, connections } = countersFromNested(FULL_FIXTURE);
    expect(Object.keys(counters).filter((k) => !KNOWN.has(k))).toEqual([]);
    // Every base counter except `retrieved` (the spec's persisted section has no such split).
    expect(Object.keys(counters).sort()).toEqual(BASE_COUNTERS.filter((k) => !k.startsWith('persisted.retrieved.')).sort());
    expect(counters).toMatchObject({
      'messages.inbound.rest.messages.count': 1,
      'messages.outbound.realtime.presence.data': 16,
      'persisted.stored.messages.count': 17,
      'persisted.stored.presence.data': 20,
      'channels.opened': 23,
      'apiRequests.all.refused': 26,
      'apiRequests.tokenRequests.succeeded': 27,
      'connections.all.opened': 30,
    });
    expect(channels).toBe(21);
    expect(connections).toBe(31);
  });

  it('takes a fixture\'s connections from their parts (plain + tls) when it has no `all`', () => {
    const { counters, connections } = countersFromNested({ connections: { plain: { peak: 2, opened: 3 }, tls: { peak: 20, opened: 10 } } });
    expect(counters).toEqual({ 'connections.all.opened': 13 });
    expect(connections).toBe(22);
  });

  it('holds every counter the usage meter reports', async () => {
    let now = T0 + 1000;
    const { meter, reported } = meterWithLog({ now: () => now });
    for (const status of [200, 201, 302, 400, 404, 500, 401, 403, 429]) {
      meter.apiRequest('app', status, false);
      meter.apiRequest('app', status, true);
    }
    meter.historyRead('app', 3, 30, false);
    meter.realtimeOutbound('app', 'messages', 2, 7);
    meter.realtimeOutbound('app', 'messages', 1, 3);
    meter.realtimeOutbound('app', 'presence', 4, 8);
    now += 6000;
    meter.historyRead('app', 2, 20, true);
    meter.historyRead('app', 0, 0, true); // nothing read: nothing counted
    meter.realtimeOutbound('app', 'presence', 0, 0); // nothing sent: nothing counted
    await meter.flush();
    const events = reported();
    expect(events.map((e) => [e.appId, e.intervalStart])).toEqual([
      ['app', T0],
      ['app', T0 + 6000],
    ]);
    const keys = new Set(events.flatMap((e) => Object.keys(e.counters)));
    expect([...keys].filter((k) => !KNOWN.has(k))).toEqual([]);
    expect(events[0].counters).toEqual({
      'apiRequests.all.succeeded': 6,
      'apiRequests.all.failed': 6,
      'apiRequests.all.refused': 6,
      'apiRequests.tokenRequests.succeeded': 3,
      'apiRequests.tokenRequests.failed': 3,
      'apiRequests.tokenRequests.refused': 3,
      'messages.outbound.rest.messages.count': 3,
      'messages.outbound.rest.messages.data': 30,
      'messages.outbound.realtime.messages.count': 3,
      'messages.outbound.realtime.messages.data': 10,
      'messages.outbound.realtime.presence.count': 4,
      'messages.outbound.realtime.presence.data': 8,
    });
    expect(events[1].counters).toEqual({
      'messages.outbound.rest.messages.count': 2,
      'messages.outbound.rest.messages.data': 20,
      'persisted.retrieved.messages.count': 2,
      'persisted.retrieved.messages.data': 20,
    });
  });

  it('holds every counter the stats projection writes, from every event it handles', async () => {
    // Usage reports as the meter makes them, with every kind of request and read.
    const { meter, reported } = meterWithLog({ now: () => T0 + 2000 });
    for (const status of [200, 400, 401]) meter.apiRequest('app', status, true);
    meter.historyRead('app', 1, 5, true);
    await meter.flush();

    const ts = T0 + 1000;
    const events: [string, LogEvent][] = [
      [Topics.messages, { type: 'messages.published', appId: 'app', channel: 'plain', transport: 'rest', messages: [{ id: 'a:0', timestamp: ts, data: 'abc' }] }],
      [Topics.messages, { type: 'messages.published', appId: 'app', channel: 'persisted:x', transport: 'realtime', messages: [{ id: 'b:0', timestamp: ts, data: new Uint8Array(4) }] }],
      [Topics.presence, { type: 'presence.changed', appId: 'app', channel: 'persisted:p', event: { action: 'enter', id: 'p:0', timestamp: ts, clientId: 'c', connectionId: 'k', data: 'hi' } }],
      [Topics.presence, { type: 'presence.changed', appId: 'app', channel: 'plain', event: { action: 'leave', id: 'p:1', timestamp: ts, clientId: 'c', connectionId: 'k' } }],
      ...reported().map((e): [string, LogEvent] => [Topics.usage, e]),
      [Topics.usage, { type: 'stats.fixture', appId: 'app', intervalStart: T0, ...countersFromNested(FULL_FIXTURE) }],
      [Topics.connections, { type: 'connection.opened', appId: 'app', connectionId: 'k1', instanceId: 'i1', resumed: false }],
      [Topics.connections, { type: 'connection.opened', appId: 'app', connectionId: 'k1', instanceId: 'i2', resumed: true }],
      [Topics.connections, { type: 'instance.alive', instanceId: 'i1' }],
    ];
    const { store, rows } = rowStore();
    const projection = new StatsProjection({ store, isPersisted: (_app, channel) => channel.startsWith('persisted:'), flushIntervalMs: 1e9 });
    const offsets = new Map<string, number>();
    for (const topic of new Set(events.map(([t]) => t))) await projection.start(topic);
    for (const [topic, event] of events) {
      const offset = offsets.get(topic) ?? 0;
      offsets.set(topic, offset + 1);
      const record: LogRecord = { topic, partition: 0, offset, key: 'app', value: encodeEvent(event), timestamp: ts };
      projection.apply([record]);
    }
    await projection.close();

    const written = new Set(rows.flatMap((r) => Object.keys(r.counters)));
    expect([...written].filter((k) => !KNOWN.has(k))).toEqual([]);
    // Between them, the events above exercise every base counter.
    expect(written).toEqual(KNOWN);
    const total = rows.reduce<Counters>((acc, r) => {
      for (const [k, v] of Object.entries(r.counters)) acc[k] = (acc[k] ?? 0) + v;
      return acc;
    }, {});
    expect(total['messages.inbound.rest.messages.count']).toBe(1 + 1); // a publish, and the fixture's 1
    expect(total['messages.inbound.realtime.messages.data']).toBe(4 + 6);
    expect(total['persisted.stored.messages.count']).toBe(1 + 17);
    expect(total['messages.inbound.realtime.presence.count']).toBe(2 + 7);
    expect(total['persisted.stored.presence.count']).toBe(1 + 19);
    expect(total['persisted.retrieved.messages.data']).toBe(5);
    expect(total['channels.opened']).toBe(2 + 23);
    expect(total['apiRequests.tokenRequests.refused']).toBe(1 + 29);
    expect(total['connections.all.opened']).toBe(1 + 30); // a connection made (its resume is not), and the fixture's
  });
});

describe('flatEntries and nestedSections', () => {
  // Every base counter populated, each with its ClickHouse id as its value.
  const counters: Counters = Object.fromEntries(BASE_COUNTERS.map((k, i) => [k, i + 1]));
  const bucket: StatsBucket = {
    start: T0,
    counters,
    channelSamples: 10,
    channelSum: 35,
    channelMax: 7,
    channelMin: 2,
    connectionSamples: 10,
    connectionSum: 120,
    connectionMax: 15,
    connectionMin: 9,
    lastSample: T0 + 54_000,
  };

  it("turn a populated bucket into the spec's nested record", () => {
    const entries = flatEntries(bucket, 10, 10);
    expect(nestedSections(entries)).toEqual({
      inbound: {
        rest: { messages: { count: 1, data: 2 }, presence: { count: 3, data: 4 }, all: { count: 4, data: 6 } },
        realtime: { messages: { count: 5, data: 6 }, presence: { count: 7, data: 8 }, all: { count: 12, data: 14 } },
        all: { messages: { count: 6, data: 8 }, presence: { count: 10, data: 12 }, all: { count: 16, data: 20 } },
      },
      outbound: {
        rest: { messages: { count: 9, data: 10 }, presence: { count: 11, data: 12 }, all: { count: 20, data: 22 } },
        realtime: { messages: { count: 13, data: 14 }, presence: { count: 15, data: 16 }, all: { count: 28, data: 30 } },
        all: { messages: { count: 22, data: 24 }, presence: { count: 26, data: 28 }, all: { count: 48, data: 52 } },
      },
      // persisted = stored + retrieved
      persisted: { messages: { count: 17 + 21, data: 18 + 22 }, presence: { count: 19, data: 20 }, all: { count: 57, data: 60 } },
      // all = inbound + outbound + stored
      all: { messages: { count: 6 + 22 + 17, data: 8 + 24 + 18 }, presence: { count: 10 + 26 + 19, data: 12 + 28 + 20 }, all: { count: 100, data: 110 } },
      channels: { peak: 7, min: 2, mean: 3.5, opened: 23 },
      connections: { all: { peak: 15, min: 9, mean: 12, opened: 30 } },
      apiRequests: { succeeded: 24, failed: 25, refused: 26 },
      tokenRequests: { succeeded: 27, failed: 28, refused: 29 },
    });
  });

  it('give every flat entry a leaf of its own', () => {
    const entries = flatEntries(bucket, 10, 10);
    const leaves = (node: unknown): number =>
      typeof node === 'object' && node !== null ? Object.values(node).reduce<number>((n, v) => n + leaves(v), 0) : 1;
    expect(leaves(nestedSections(entries))).toBe(Object.keys(entries).length);
    // The flat keys are the SDK's (app-stats-0.0.5) names.
    expect(entries).toMatchObject({
      'messages.inbound.rest.messages.count': 1,
      'messages.inbound.realtime.all.count': 12,
      'messages.all.all.count': 100,
      'channels.peak': 7,
      'apiRequests.all.succeeded': 24,
      'apiRequests.tokenRequests.succeeded': 27,
    });
  });

  it('round-trip through countersFromNested (retrieved folds into stored: the spec has one persisted section)', () => {
    const { counters: back, channels, connections } = countersFromNested(nestedSections(flatEntries(bucket, 10, 10)));
    expect(channels).toBe(7);
    expect(connections).toBe(15);
    const expected: Counters = { ...counters };
    expected['persisted.stored.messages.count'] += expected['persisted.retrieved.messages.count'];
    expected['persisted.stored.messages.data'] += expected['persisted.retrieved.messages.data'];
    delete expected['persisted.retrieved.messages.count'];
    delete expected['persisted.retrieved.messages.data'];
    expect(back).toEqual(expected);
  });

  it('leave out empty sections and zero entries', () => {
    const sparse: StatsBucket = {
      ...bucket,
      counters: { [Base.inbound('rest', 'messages', 'count')]: 2 },
      channelSamples: 0,
      channelSum: 0,
      channelMax: 0,
      channelMin: 0,
      connectionSamples: 0,
      connectionSum: 0,
      connectionMax: 0,
      connectionMin: 0,
    };
    const entries = flatEntries(sparse, 10, 10);
    expect(nestedSections(entries)).toEqual({
      inbound: { rest: { messages: { count: 2 }, all: { count: 2 } }, all: { messages: { count: 2 }, all: { count: 2 } } },
      all: { messages: { count: 2 }, all: { count: 2 } },
    });
  });
});
