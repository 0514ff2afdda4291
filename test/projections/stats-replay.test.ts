import { describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';
import { channelKey, encodeEvent, type LogEvent } from '../../src/log/events.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import { SqliteStatsStore } from '../../projections/stats/sqlite-stats-store.js';
import type { StatsStore } from '../../projections/stats/stats-store.js';

const T0 = Date.UTC(2030, 0, 1);
const TOPICS: Topic[] = [Topics.messages, Topics.presence, Topics.usage];
const isPersisted = (_app: string, channel: string) => channel.startsWith('persisted:');

/** A seeded pseudo-random generator, so every run builds the same log. */
function rng(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

/** About 3,000 events over 10 minutes: messages, presence, usage reports (some late), fixtures. */
async function buildLog(): Promise<EmbeddedLog> {
  const log = new EmbeddedLog({ path: ':memory:', partitions: 3 });
  const random = rng(42);
  for (let i = 0; i < 3000; i++) {
    const ts = T0 + i * 200 + Math.floor(random() * 150);
    const app = `app${Math.floor(random() * 3)}`;
    const channel = `${random() < 0.3 ? 'persisted:' : ''}ch${Math.floor(random() * 12)}`;
    const kind = random();
    let topic: Topic;
    let event: LogEvent;
    if (kind < 0.7) {
      topic = Topics.messages;
      const n = 1 + Math.floor(random() * 3);
      event = {
        type: 'messages.published',
        appId: app,
        channel,
        transport: 'rest',
        messages: Array.from({ length: n }, (_, j) => ({ id: `${i}:${j}`, timestamp: ts, data: 'x'.repeat(Math.floor(random() * 40)) })),
      };
    } else if (kind < 0.85) {
      topic = Topics.presence;
      event = { type: 'presence.changed', appId: app, channel, event: { action: 'enter', id: `p${i}`, timestamp: ts, clientId: 'c', connectionId: 'k', data: 'd' } };
    } else {
      topic = Topics.usage;
      // Some reports arrive minutes late; they still count in their own interval.
      const lag = random() < 0.2 ? 180_000 : 6000;
      event = { type: 'usage.reported', appId: app, intervalStart: ts - lag - ((ts - lag) % 6000), instanceId: 'i1', counters: { 'apiRequests.all.succeeded': 1 + Math.floor(random() * 5) } };
    }
    await log.append(topic, [{ key: topic === Topics.usage ? app : channelKey(app, channel), timestamp: ts, value: encodeEvent(event) }]);
  }
  return log;
}

async function allRecords(log: EmbeddedLog, topic: Topic, from = new Map<number, number>()): Promise<LogRecord[][]> {
  const out: LogRecord[][] = [];
  for (let p = 0; p < (await log.partitions(topic)); p++) out.push(await log.read(topic, p, from.get(p) ?? 0, 1e9));
  return out;
}

/** Every minute bucket of every app, as numbers to compare. */
async function snapshot(store: StatsStore): Promise<unknown> {
  const result: Record<string, unknown> = {};
  for (const app of ['app0', 'app1', 'app2']) {
    result[app] = await store.query({ appId: app, unit: 'minute', start: 0, end: T0 + 3600_000 });
  }
  return result;
}

/** Runs the projection over the whole log in batches; returns its store. */
async function runToEnd(log: EmbeddedLog, store: StatsStore, batch: () => number): Promise<void> {
  const projection = new StatsProjection({ store, isPersisted, flushIntervalMs: 1e9 });
  for (const topic of TOPICS) {
    const from = await projection.start(topic);
    for (const records of await allRecords(log, topic, from)) {
      for (let i = 0; i < records.length; ) {
        const n = batch();
        projection.apply(records.slice(i, i + n));
        i += n;
      }
    }
  }
  await projection.close();
}

describe('stats projection replay safety (issue: never lost, never counted twice)', () => {
  it('crashing at any moment and resuming, or rebuilding from offset 0, gives identical numbers', async () => {
    const log = await buildLog();
    const reference = new SqliteStatsStore(':memory:');
    await runToEnd(log, reference, () => 1000);
    const expected = await snapshot(reference);
    const totals = Object.values(expected as Record<string, { counters: Record<string, number> }[]>).flat();
    expect(totals.length).toBeGreaterThan(20);

    const random = rng(7);
    for (let run = 0; run < 8; run++) {
      const store = new SqliteStatsStore(':memory:');
      // First life: random batches and random flushes, then a crash (no final flush).
      const projection = new StatsProjection({ store, isPersisted, flushIntervalMs: 1e9 });
      const stopAfter = Math.floor(random() * 3000);
      let applied = 0;
      for (const topic of TOPICS) {
        await projection.start(topic);
        for (const records of await allRecords(log, topic)) {
          for (let i = 0; i < records.length && applied < stopAfter; ) {
            const n = 1 + Math.floor(random() * 50);
            projection.apply(records.slice(i, i + n));
            applied += n;
            i += n;
            if (random() < 0.3) await projection.flush();
          }
        }
      }
      // Second life: resume from the stored checkpoints.
      await runToEnd(log, store, () => 1 + Math.floor(random() * 200));
      expect(await snapshot(store), `run ${run}, crash after ${stopAfter} records`).toEqual(expected);
    }

    // Rebuild from offset 0 into a store that already holds the numbers: still identical.
    const rebuilt = new SqliteStatsStore(':memory:');
    await runToEnd(log, rebuilt, () => 1000);
    await runToEnd(log, rebuilt, () => 7); // checkpoints say "done": nothing changes
    expect(await snapshot(rebuilt)).toEqual(expected);
    await log.close();
  });

  it('counts every event exactly once in the totals', async () => {
    const log = await buildLog();
    const store = new SqliteStatsStore(':memory:');
    await runToEnd(log, store, () => 37);
    let messages = 0;
    let presence = 0;
    let api = 0;
    for (const topic of TOPICS) {
      for (const records of await allRecords(log, topic)) {
        for (const r of records) {
          const e = (await import('../../src/log/events.js')).decodeEvent(r.value);
          if (e.type === 'messages.published') messages += e.messages.length;
          if (e.type === 'presence.changed') presence += 1;
          if (e.type === 'usage.reported') api += e.counters['apiRequests.all.succeeded'];
        }
      }
    }
    const sum = (key: string) => ['app0', 'app1', 'app2'].reduce(async (acc, app) => {
      const buckets = await store.query({ appId: app, unit: 'month', start: 0, end: T0 + 3600_000 });
      return (await acc) + buckets.reduce((n, b) => n + (b.counters[key] ?? 0), 0);
    }, Promise.resolve(0));
    expect(await sum('messages.inbound.rest.messages.count')).toBe(messages);
    expect(await sum('messages.inbound.realtime.presence.count')).toBe(presence);
    expect(await sum('apiRequests.all.succeeded')).toBe(api);
    await log.close();
  });
});
