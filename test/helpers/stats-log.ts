import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';
import { channelKey } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { StatsProjection } from '../../projections/stats/stats-projection.js';
import type { StatsRow, StatsStore } from '../../projections/stats/stats-store.js';
import type { Unit } from '../../src/domain/stats-sample.js';
import { expect } from 'vitest';

// A synthetic log for stats replay tests: seeded, so every run builds the same one.
export const T0 = Date.UTC(2030, 0, 1);
export const TOPICS: Topic[] = [Topics.messages, Topics.presence, Topics.usage, Topics.connections];
export const isPersisted = (_app: string, channel: string) => channel.startsWith('persisted:');

/** One sample row of app `a` at T0, one message counted; `over` changes any of it. */
export const statsRow = (over: Partial<StatsRow>): StatsRow => ({
  appId: 'a',
  interval: T0,
  topic: 'messages',
  partition: 0,
  slot: 0,
  version: 1,
  counters: { 'messages.inbound.rest.messages.count': 1 },
  channels: 1,
  connections: 0,
  ...over,
});

/** A seeded pseudo-random generator, so every run builds the same log. */
export function rng(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

/** About 3,000 events over 10 minutes: messages, presence, usage reports (some late), connections made and resumed. */
export async function buildLog(events = 3000, path = ':memory:'): Promise<EmbeddedLog> {
  const log = new EmbeddedLog({ path, partitions: 3 });
  const random = rng(42);
  for (let i = 0; i < events; i++) {
    const ts = T0 + i * 200 + Math.floor(random() * 150);
    const app = `app${Math.floor(random() * 3)}`;
    const channel = `${random() < 0.3 ? 'persisted:' : ''}ch${Math.floor(random() * 12)}`;
    const kind = random();
    let topic: Topic;
    let event: LogEvent;
    if (kind < 0.65) {
      topic = Topics.messages;
      const n = 1 + Math.floor(random() * 3);
      event = {
        type: 'messages.published',
        appId: app,
        channel,
        transport: 'rest',
        messages: Array.from({ length: n }, (_, j) => ({ id: `${i}:${j}`, timestamp: ts, data: 'x'.repeat(Math.floor(random() * 40)) })),
      };
    } else if (kind < 0.8) {
      topic = Topics.presence;
      event = { type: 'presence.changed', appId: app, channel, event: { action: 'enter', id: `p${i}`, timestamp: ts, clientId: 'c', connectionId: 'k', data: 'd' } };
    } else if (kind < 0.93) {
      topic = Topics.usage;
      // Some reports arrive minutes late; they still count in their own interval.
      const lag = random() < 0.2 ? 180_000 : 6000;
      const connections = random() < 0.5 ? 1 + Math.floor(random() * 9) : undefined;
      event = {
        type: 'usage.reported',
        appId: app,
        intervalStart: ts - lag - ((ts - lag) % 6000),
        instanceId: `i${i % 2}`,
        counters: { 'apiRequests.all.succeeded': 1 + Math.floor(random() * 5) },
        ...(connections === undefined ? {} : { connections }),
      };
    } else {
      topic = Topics.connections;
      event = { type: 'connection.opened', appId: app, connectionId: `k${i}`, instanceId: 'i1', resumed: random() < 0.3 };
    }
    const key = topic === Topics.usage ? app : topic === Topics.connections ? `k${i}` : channelKey(app, channel);
    await log.append(topic, [{ key, timestamp: ts, value: encodeEvent(event) }]);
  }
  return log;
}

export async function allRecords(log: EmbeddedLog, topic: Topic, from = new Map<number, number>()): Promise<LogRecord[][]> {
  const out: LogRecord[][] = [];
  for (let p = 0; p < (await log.partitions(topic)); p++) out.push(await log.read(topic, p, from.get(p) ?? 0, 1e9));
  return out;
}

const UNITS: Unit[] = ['minute', 'hour', 'day', 'month'];

/**
 * Every bucket of every unit of every app, as numbers to compare, read from the rollups; each
 * checked first against the same buckets folded from the 6-second samples (issue 14: the rollups
 * always equal summing the samples), over the whole range and over windows that cut buckets.
 */
export async function snapshot(store: StatsStore): Promise<unknown> {
  const result: Record<string, unknown> = {};
  for (const app of ['app0', 'app1', 'app2']) {
    for (const unit of UNITS) {
      const q = { appId: app, unit, start: 0, end: T0 + 3600_000 };
      const buckets = await store.query(q);
      expect(buckets, `${app} by ${unit}: rollups = samples`).toEqual(await store.queryFromSamples(q));
      result[`${app} ${unit}`] = buckets;
    }
    // A window cutting minutes (and so every larger unit) at both ends.
    const cut = { appId: app, unit: 'hour' as const, start: T0 + 126_000, end: T0 + 546_000 };
    expect(await store.query(cut), `${app}: a window that cuts buckets`).toEqual(await store.queryFromSamples(cut));
  }
  return result;
}

/**
 * A first life that crashes: applies the log in random batches (up to maxBatch records), flushing
 * now and then (with the given chance), and stops without a final flush after `stopAfter` records.
 */
export async function crashAfter(
  log: EmbeddedLog,
  store: StatsStore,
  stopAfter: number,
  random: () => number,
  maxBatch: number,
  flushChance: number,
): Promise<void> {
  const projection = new StatsProjection({ store, isPersisted, flushIntervalMs: 1e9 });
  let applied = 0;
  for (const topic of TOPICS) {
    await projection.start(topic);
    for (const records of await allRecords(log, topic)) {
      for (let i = 0; i < records.length && applied < stopAfter; ) {
        const n = 1 + Math.floor(random() * maxBatch);
        projection.apply(records.slice(i, i + n));
        applied += n;
        i += n;
        if (random() < flushChance) await projection.flush();
      }
    }
  }
}

/** Runs the projection over the whole log in batches; returns its store. */
export async function runToEnd(log: EmbeddedLog, store: StatsStore, batch: () => number): Promise<void> {
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


/**
 * One instance in production mode: a projection over the partitions `mine` picks (the others
 * belong to other instances), in random batches with random flushes, to the end of the log.
 */
export async function runInstance(
  log: EmbeddedLog,
  store: StatsStore,
  mine: (topic: Topic, partition: number) => boolean,
  random: () => number,
): Promise<void> {
  const projection = new StatsProjection({ store, isPersisted, flushIntervalMs: 1e9 });
  for (const topic of TOPICS) {
    const from = await projection.start(topic);
    const partitions = await allRecords(log, topic, from);
    for (let p = 0; p < partitions.length; p++) {
      if (!mine(topic, p)) continue;
      const records = partitions[p];
      for (let i = 0; i < records.length; ) {
        const n = 1 + Math.floor(random() * 60);
        projection.apply(records.slice(i, i + n));
        i += n;
        if (random() < 0.3) await projection.flush();
      }
    }
  }
  await projection.close();
}
