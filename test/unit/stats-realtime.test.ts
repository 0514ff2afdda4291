// Issue 11, stats: what the realtime gateway adds to an app's stats, through the projection and
// the embedded store: connections made (connection events on the log), open connections (the
// instances' readings in their usage reports, added up per 6-second sample), and presence.
import { describe, expect, it } from 'vitest';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { flatEntries } from '../../src/domain/stats-record.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';

const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);

/** Applies events as log records (one partition per topic, offsets in order) and returns the app's minute buckets. */
async function minutes(events: [Topic, LogEvent, number][], appId = 'app') {
  const store = new SqliteStatsStore(':memory:');
  const projection = new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9 });
  for (const topic of new Set(events.map(([t]) => t))) await projection.start(topic);
  const offsets = new Map<string, number>();
  for (const [topic, event, timestamp] of events) {
    const offset = offsets.get(topic) ?? 0;
    offsets.set(topic, offset + 1);
    const record: LogRecord = { topic, partition: 0, offset, key: appId, value: encodeEvent(event), timestamp };
    projection.apply([record]);
  }
  await projection.close();
  const buckets = await store.query({ appId, unit: 'minute', start: 0, end: T0 + 3600_000 });
  await store.close();
  return buckets;
}

const usage = (intervalStart: number, instanceId: string, connections: number | undefined): LogEvent => ({
  type: 'usage.reported',
  appId: 'app',
  intervalStart,
  instanceId,
  counters: {},
  ...(connections === undefined ? {} : { connections }),
});

describe('stats of realtime connections', () => {
  it('open connections: the instances of one interval add up; peak, min and mean are over the 6-second samples', async () => {
    const buckets = await minutes([
      [Topics.usage, usage(T0, 'i1', 2), T0 + 6100],
      [Topics.usage, usage(T0, 'i2', 3), T0 + 6200],
      [Topics.usage, usage(T0 + 6000, 'i1', 1), T0 + 12_100],
      [Topics.usage, usage(T0 + 6000, 'i2', undefined), T0 + 12_200], // counters only: no reading
      [Topics.usage, usage(T0 + 60_000, 'i1', 4), T0 + 66_100], // the next minute
      // i2's report for T0 + 6000, late: the sample had closed; a row of its own, the same interval
      [Topics.usage, usage(T0 + 6000, 'i2', 2), T0 + 200_000],
    ]);
    expect(buckets.map((b) => [b.start, b.connectionSamples, b.connectionSum, b.connectionMax, b.connectionMin])).toEqual([
      [T0, 2, 5 + 3, 5, 3],
      [T0 + 60_000, 1, 4, 4, 4],
    ]);
    const entries = flatEntries(buckets[0], 10, 10);
    expect(entries['connections.all.peak']).toBe(5);
    expect(entries['connections.all.min']).toBe(0); // 8 of the minute's 10 samples had none open
    expect(entries['connections.all.mean']).toBe(0.8);
  });

  it('a connection made counts as opened, a resumed one does not; instances saying they are alive count nothing', async () => {
    const opened = (connectionId: string, resumed: boolean): LogEvent => ({ type: 'connection.opened', appId: 'app', connectionId, instanceId: 'i1', resumed });
    const buckets = await minutes([
      [Topics.connections, opened('k1', false), T0 + 100],
      [Topics.connections, opened('k2', false), T0 + 200],
      [Topics.connections, { type: 'instance.alive', instanceId: 'i1' }, T0 + 300],
      [Topics.connections, opened('k1', true), T0 + 7000], // k1 resumed
      [Topics.connections, { type: 'connection.closed', appId: 'app', connectionId: 'k2', instanceId: 'i1' }, T0 + 8000],
      [Topics.connections, opened('k3', false), T0 + 61_000],
    ]);
    expect(buckets.map((b) => [b.start, flatEntries(b, 10, 10)])).toEqual([
      [T0, { 'connections.all.opened': 2 }],
      [T0 + 60_000, { 'connections.all.opened': 1 }],
    ]);
  });

  it('presence: a member entering counts as inbound realtime presence; the leaves the service makes for a gone connection do not', async () => {
    const change = (action: 'enter' | 'leave' | 'drop', id: string): LogEvent => ({
      type: 'presence.changed',
      appId: 'app',
      channel: 'ch',
      event: { action, id, timestamp: T0, clientId: 'c', connectionId: 'k', data: 'hi' },
    });
    const [bucket] = await minutes([
      [Topics.presence, change('enter', 'p1'), T0 + 100],
      [Topics.presence, change('leave', 'p2'), T0 + 200],
      [Topics.presence, change('enter', 'p3'), T0 + 300],
      [Topics.presence, change('drop', 'p4'), T0 + 400],
    ]);
    expect(bucket.counters['messages.inbound.realtime.presence.count']).toBe(3);
    expect(bucket.counters['messages.inbound.realtime.presence.data']).toBe(6);
  });
});
