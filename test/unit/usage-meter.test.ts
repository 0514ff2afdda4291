// Issue 10, item 4: a usage flush the log refuses (a full disk) must not crash the process, lose
// the counters while the log recovers, or grow without bound while it stays down.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Writable } from 'node:stream';
import { UsageMeter } from '../../src/stats/usage-meter.js';
import type { AppendBatcher, PendingRecord } from '../../src/log/append-batcher.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import type { UsageReported } from '../../src/domain/events.js';
import { Base, intervalOf } from '../../src/domain/stats-sample.js';

const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);
const API_OK = Base.api('all', 'succeeded');

/** A meter on a log that refuses appends while `down`, with the lines it logs. */
function meterOnFlakyLog(clock: { now: () => number }, maxIntervals?: number) {
  const state = { down: false, appended: [] as UsageReported[] };
  const batcher = {
    append: async (_topic: string, records: PendingRecord[]) => {
      if (state.down) throw new Error('SQLITE_FULL: database or disk is full');
      state.appended.push(...records.map((r) => decodeEvent(r.build(clock.now())) as UsageReported));
      return records.map((_, offset) => ({ partition: 0, offset }));
    },
  };
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _e, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
  const meter = new UsageMeter(batcher as unknown as AppendBatcher, clock, 'i1', logger, maxIntervals);
  const total = (): number => state.appended.reduce((sum, e) => sum + (e.counters[API_OK] ?? 0), 0);
  return { meter, state, lines, total };
}

describe('usage meter: a log that refuses appends', () => {
  it('a refused flush keeps its counters and the next flush appends them, merged with later counts', async () => {
    let now = T0;
    const { meter, state, total } = meterOnFlakyLog({ now: () => now });
    meter.apiRequest('app', 200, false);
    meter.apiRequest('app', 200, false);
    state.down = true;
    await expect(meter.flush()).rejects.toThrow(/SQLITE_FULL/);
    meter.apiRequest('app', 200, false); // the same interval, counted while the log was down
    now += 6000;
    meter.apiRequest('app', 200, false); // a later interval
    await expect(meter.flush()).rejects.toThrow(/SQLITE_FULL/);
    state.down = false;
    await meter.flush();
    expect(total()).toBe(4);
    expect(state.appended.map((e) => e.intervalStart).sort()).toEqual([T0, T0 + 6000]);
  });

  it('while the log stays down, at most maxIntervals intervals are kept; the dropped ones are logged with their counts', async () => {
    let now = T0;
    const { meter, state, lines, total } = meterOnFlakyLog({ now: () => now }, 3);
    state.down = true;
    for (let i = 0; i < 5; i++) {
      meter.apiRequest('app', 200, false);
      await meter.flush().catch(() => {});
      now += 6000;
    }
    const dropped = lines.filter((l) => /usage of an interval dropped/.test(l.msg));
    expect(dropped.map((l) => l.intervalStart)).toEqual([new Date(T0).toISOString(), new Date(T0 + 6000).toISOString()]);
    expect(dropped[0].usage).toEqual({ app: { [API_OK]: 1 } });
    state.down = false;
    await meter.flush();
    expect(total()).toBe(3);
  });

  it('the periodic flush on a refusing log logs a warning, and no rejection goes unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      let now = T0;
      const { meter, state, lines } = meterOnFlakyLog({ now: () => now });
      state.down = true;
      meter.apiRequest('app', 200, false);
      now += 6000; // the interval is finished: the periodic flush takes it
      meter.start(10);
      await new Promise((r) => setTimeout(r, 100));
      await meter.close();
      expect(lines.some((l) => /usage flush failed/.test(l.msg))).toBe(true);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('close on a refusing log does not throw, and logs what it could not append', async () => {
    const { meter, state, lines } = meterOnFlakyLog({ now: () => T0 });
    meter.apiRequest('app', 503, false);
    state.down = true;
    await expect(meter.close()).resolves.toBeUndefined();
    expect(lines.some((l) => /refused it on close/.test(l.msg))).toBe(true);
  });
});

// Issue 11, stats: open realtime connections are a level each instance reads once per 6-second
// interval and reports once; the stats projection adds the instances' readings up.
describe('usage meter: open realtime connections', () => {
  const connectionsOf = (events: UsageReported[]) => events.map((e) => [e.intervalStart, e.appId, e.connections]);

  it('reports the reading of each interval per app, with or without counters, and nothing for an app with none open', async () => {
    let now = T0 + 3000;
    const { meter, state } = meterOnFlakyLog({ now: () => now });
    const open = new Map([['a', 2], ['b', 1], ['idle', 0]]);
    meter.measureConnections(() => open);
    meter.readConnections();
    meter.apiRequest('a', 200, false);
    meter.apiRequest('c', 200, false); // counters, no connection
    now += 6000;
    open.set('a', 5).delete('b');
    meter.readConnections();
    await meter.flush();
    expect(connectionsOf(state.appended).sort()).toEqual([
      [T0, 'a', 2],
      [T0, 'b', 1],
      [T0, 'c', undefined],
      [T0 + 6000, 'a', 5],
    ]);
    expect(state.appended.find((e) => e.appId === 'b')?.counters).toEqual({});
  });

  it('a later reading in the same interval replaces the earlier one; once a flush took the interval, none is added', async () => {
    let now = T0 + 1000;
    const { meter, state } = meterOnFlakyLog({ now: () => now });
    const open = new Map([['a', 4]]);
    meter.measureConnections(() => open);
    meter.readConnections();
    open.set('a', 3);
    now += 2000;
    meter.readConnections();
    await meter.flush(); // takes the current interval (as on close, or in tests)
    open.set('a', 9);
    now += 1000;
    meter.readConnections(); // same interval: its reading went already, this one would count twice
    meter.apiRequest('a', 200, false);
    await meter.flush();
    expect(connectionsOf(state.appended)).toEqual([
      [T0, 'a', 3],
      [T0, 'a', undefined],
    ]);
  });

  it('a reading the log refused goes with the next flush, once', async () => {
    let now = T0 + 3000;
    const { meter, state } = meterOnFlakyLog({ now: () => now });
    meter.measureConnections(() => new Map([['a', 7]]));
    meter.readConnections();
    now += 6000;
    state.down = true;
    await expect(meter.flush(false)).rejects.toThrow(/SQLITE_FULL/);
    meter.readConnections(); // the next interval
    state.down = false;
    now += 6000;
    await meter.flush(false);
    expect(connectionsOf(state.appended)).toEqual([
      [T0, 'a', 7],
      [T0 + 6000, 'a', 7],
    ]);
  });

  it('the meter reads by itself once per interval once started', async () => {
    // The real clock: readings fall in the middle of each interval.
    const { meter, state } = meterOnFlakyLog({ now: () => Date.now() });
    const readAt: number[] = [];
    meter.measureConnections(() => (readAt.push(Date.now()), new Map([['a', 1]])));
    meter.start(60_000);
    const deadline = Date.now() + 7000;
    while (readAt.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await meter.close();
    expect(readAt).toHaveLength(1);
    expect(connectionsOf(state.appended)).toEqual([[intervalOf(readAt[0]), 'a', 1]]);
  }, 10_000);
});
