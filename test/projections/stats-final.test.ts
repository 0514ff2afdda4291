// Two samples of a partition that close together, the older one changed since the last flush and
// the newer one written already: the newer one is the partition's final sample (the context of the
// next interval's channels.opened, and where the checkpoint goes back to). flush() used to take the
// older one (the last closed sample it wrote) for it.
import { describe, expect, it } from 'vitest';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { T0 } from '../helpers/stats-log.js';

const I10 = T0 + 60_000;
const I11 = I10 + 6_000;
const I12 = I11 + 6_000;

const publish = (offset: number, timestamp: number, channel: string): LogRecord => ({
  topic: Topics.messages,
  partition: 0,
  offset,
  key: channel,
  timestamp,
  value: encodeEvent({ type: 'messages.published', appId: 'a', channel, transport: 'rest', messages: [{ id: `m${offset}`, timestamp, data: 'x' }] }),
});

const projection = (store: SqliteStatsStore) => new StatsProjection({ store, isPersisted: () => false, flushIntervalMs: 1e9 });
const total = async (store: SqliteStatsStore, counter: string): Promise<number> =>
  (await store.query({ appId: 'a', unit: 'hour', start: 0, end: T0 + 3600_000 })).reduce((n, b) => n + (b.counters[counter] ?? 0), 0);

describe('stats: two samples closing together, the older one changed since the last flush', () => {
  it('a channel active in the newer one is not counted as opened again in the interval after it', async () => {
    const store = new SqliteStatsStore(':memory:');
    const stats = projection(store);
    await stats.start(Topics.messages);
    stats.apply([publish(0, I10 + 100, 'x'), publish(1, I11 + 100, 'a')]);
    await stats.flush(); // both written: clean
    stats.apply([publish(2, I10 + 200, 'y')]); // a late record: interval 10 changed, 11 not
    stats.apply([publish(3, I11 + 66_100, 'z')]); // 10 and 11 close together; 12 is still open
    await stats.flush();
    stats.apply([publish(4, I12 + 100, 'a')]); // `a` was active in 11: not opened in 12
    await stats.close();
    expect(await total(store, 'channels.opened')).toBe(4); // x, y, a, z
  });

  it('a restart after the flush rewrites no sample with fewer records than it had', async () => {
    const store = new SqliteStatsStore(':memory:');
    // Interval 11 starts before interval 10 in the log (record times are not in log order).
    const records = [publish(0, I11 + 100, 'a'), publish(1, I10 + 100, 'x'), publish(2, I11 + 200, 'b'), publish(3, I10 + 300, 'y'), publish(4, I11 + 66_100, 'z')];
    const first = projection(store);
    await first.start(Topics.messages);
    first.apply(records.slice(0, 3));
    await first.flush();
    first.apply(records.slice(3, 5)); // 10 changed, then 10 and 11 close together
    await first.flush();
    // A crash; the next life resumes from the stored checkpoint.
    const second = projection(store);
    const from = (await second.start(Topics.messages)).get(0)!;
    second.apply(records.slice(from));
    await second.close();
    expect(await total(store, 'messages.inbound.rest.messages.count')).toBe(5);
  });
});
