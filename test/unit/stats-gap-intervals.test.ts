// The sample intervals a start's gap falls in (projections/stats/stats-touches.ts): the stats
// reader's roller rolls a gap (samples written, rollups maybe not) up over them, by time range.
// On the embedded log (one partition), read as the reader reads it.
import { afterEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type Topic } from '../../src/log/port.js';
import type { LogEvent } from '../../src/domain/events.js';
import { SAMPLE_MS, intervalOf } from '../../src/domain/stats-sample.js';
import { GAP_MARGIN_MS, GAP_READ_ALL, gapIntervals } from '../../projections/stats/stats-touches.js';

const T0 = Date.UTC(2031, 2, 1, 12);
const summary = () => ({ appId: '', channel: '', transport: '', count: 0, data: 0 });

describe('a stats gap\'s sample intervals', () => {
  let log: EmbeddedLog;
  afterEach(async () => log?.close());

  const append = async (topic: Topic, events: { event: LogEvent; timestamp: number }[]) => {
    for (let i = 0; i < events.length; i += 1000) {
      await log.append(topic, events.slice(i, i + 1000).map(({ event, timestamp }) => ({ key: 'k', value: encodeEvent(event), timestamp })));
    }
  };
  const read = (topic: Topic, partition: number, from: number, max: number) => log.read(topic, partition, from, max);
  const presence = (i: number): LogEvent => ({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'enter', id: `p${i}`, timestamp: T0, clientId: `c${i}`, connectionId: 'x' } });

  it('a small gap: the first and last intervals of the records in it that stats counts, records outside it not read', async () => {
    log = new EmbeddedLog({ path: ':memory:', partitions: 1 });
    // offsets 0..99, one a second
    await append(Topics.presence, Array.from({ length: 100 }, (_, i) => ({ event: presence(i), timestamp: T0 + i * 1000 })));
    expect(await gapIntervals(read, Topics.presence, 0, { from: 10, to: 40 }, summary())).toEqual([intervalOf(T0 + 10_000), intervalOf(T0 + 39_000)]);
  });

  it('a gap of no record stats counts: none', async () => {
    log = new EmbeddedLog({ path: ':memory:', partitions: 1 });
    await append(Topics.connections, Array.from({ length: 5 }, (_, i) => ({ event: { type: 'channel.detached', appId: 'a', channel: 'c', connectionId: `x${i}` }, timestamp: T0 + i })));
    expect(await gapIntervals(read, Topics.connections, 0, { from: 0, to: 5 }, summary())).toBeUndefined();
  });

  it('a gap past GAP_READ_ALL records: its ends\' timestamps widened by GAP_MARGIN_MS', async () => {
    log = new EmbeddedLog({ path: ':memory:', partitions: 1 });
    const n = GAP_READ_ALL + 500;
    await append(Topics.presence, Array.from({ length: n }, (_, i) => ({ event: presence(i), timestamp: T0 + i * 10 })));
    const range = await gapIntervals(read, Topics.presence, 0, { from: 0, to: n }, summary());
    expect(range).toEqual([intervalOf(T0 - GAP_MARGIN_MS), intervalOf(T0 + (n - 1) * 10 + GAP_MARGIN_MS)]);
    // Every record's interval lies inside it.
    expect(range![0]).toBeLessThanOrEqual(intervalOf(T0));
    expect(range![1] + SAMPLE_MS).toBeGreaterThan(T0 + (n - 1) * 10);
  });

  it('usage: the intervals its reports and fixtures name, whatever their records\' timestamps', async () => {
    log = new EmbeddedLog({ path: ':memory:', partitions: 1 });
    const late = T0 - 3 * 3_600_000;
    await append(Topics.usage, [
      { event: { type: 'usage.reported', appId: 'a', intervalStart: T0, instanceId: 'i', counters: {} }, timestamp: T0 + 5000 },
      { event: { type: 'stats.fixture', appId: 'a', intervalStart: late, counters: {} }, timestamp: T0 + 6000 },
    ]);
    expect(await gapIntervals(read, Topics.usage, 0, { from: 0, to: 2 }, summary())).toEqual([intervalOf(late), intervalOf(T0)]);
  });
});
