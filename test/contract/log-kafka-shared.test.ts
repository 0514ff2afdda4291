// Shared consumers (ConsumeOptions.shared) on Kafka: the processes running a consumer of one name
// share the topic's partitions through a consumer group, each partition delivered to one of them,
// starting where `from` says at each hand-over. What each row written once (issue 23) stands on.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import pino from 'pino';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { drainWriters } from '../../projections/writer-drain.js';
import { lagOf, Topics, type Checkpoint, type LogRecord, type Subscription } from '../../src/log/port.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();

/** Resolves once `check` holds (the test's timeout bounds it). */
async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describeWithInfra('KafkaLog shared consumers', 'Kafka', kafka, ({ brokers, mock }) => {
  /** The logs of one test's processes: one topic prefix, short fetch waits and sessions. */
  const opener =
    (topicPrefix: string, extra: { retryDelayMs?: number } = {}) =>
    (clientId: string): KafkaLog =>
      new KafkaLog({ brokers, clientId, topicPrefix, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 100, sessionTimeoutMs: 6_000, ...extra });
  it('two members of one shared consumer split the partitions, each starting where from() says, and apply each later record once between them', async () => {
    const open = opener(`shared-${randomBytes(4).toString('hex')}-`);
    const logA = open('shared-a');
    const logB = open('shared-b');
    // What the members have applied, the "store" both read their starts from.
    const stored: Checkpoint = new Map();
    const applied: { member: string; record: LogRecord }[] = [];
    const asked: { member: string; partitions: number[] }[] = [];
    const revoked: { member: string; partitions: number[] }[] = [];
    const member = (log: KafkaLog, name: string): Subscription =>
      log.consume({
        topic: Topics.usage,
        consumer: 'writer',
        from: new Map(),
        handle: (records) => {
          for (const record of records) applied.push({ member: name, record });
          const last = records[records.length - 1];
          stored.set(last.partition, last.offset + 1);
        },
        shared: {
          from: (partitions) => {
            asked.push({ member: name, partitions: [...partitions].sort() });
            return new Map(partitions.map((p) => [p, stored.get(p) ?? 0]));
          },
          revoked: (partitions) => revoked.push({ member: name, partitions: [...partitions].sort() }),
        },
      });
    const append = async (from: number, n: number): Promise<void> => {
      await logA.append(
        Topics.usage,
        Array.from({ length: n }, (_, i) => ({ key: `k${from + i}`, value: Buffer.from(`v${from + i}`), timestamp: Date.now() })),
      );
    };
    try {
      await append(0, 40);
      const a = member(logA, 'a');
      await a.caughtUp;
      expect(applied.map((x) => x.member)).toEqual(Array(40).fill('a'));
      expect(asked).toEqual([{ member: 'a', partitions: [0, 1, 2, 3] }]);

      const b = member(logB, 'b');
      // Split, and settled: each holds two and together all four (mid-rebalance one may still hold a partition the other was given).
      await until('the partitions split between a and b', () => a.positions().size === 2 && b.positions().size === 2 && new Set([...a.positions().keys(), ...b.positions().keys()]).size === 4);
      await b.caughtUp;
      const aHolds = [...a.positions().keys()].sort();
      const bHolds = [...b.positions().keys()].sort();
      expect([...aHolds, ...bHolds].sort()).toEqual([0, 1, 2, 3]);
      // One rebalance as a rule; on a loaded machine a late heartbeat can make it several (once:
      // a let go of 0 and 2, then 3, then 1, and b of 2). Whatever the steps: a let go of every
      // partition b holds, and b was asked where to start each.
      const lostByA = new Set(revoked.filter((r) => r.member === 'a').flatMap((r) => r.partitions));
      expect(bHolds.filter((p) => !lostByA.has(p))).toEqual([]);
      const askedB = new Set(asked.filter((x) => x.member === 'b').flatMap((x) => x.partitions));
      expect(bHolds.filter((p) => !askedB.has(p))).toEqual([]);
      // b started where a had got to: none of the first 40 again.
      expect(applied.filter((x) => x.member === 'b')).toEqual([]);
      expect([...b.highWatermarks().keys()].sort()).toEqual(bHolds);

      const before = applied.length;
      await append(40, 40);
      await until('the later 40 applied', () => applied.length >= before + 40);
      const later = applied.slice(before);
      expect(later).toHaveLength(40);
      expect(new Set(later.map((x) => Buffer.from(x.record.value).toString())).size).toBe(40);
      for (const { member: m, record } of later) expect(m === 'a' ? aHolds : bHolds).toContain(record.partition);

      // b leaves: a is given its partitions back, from where b stored them.
      await b.stop();
      await until('a holding every partition again', () => a.positions().size === 4);
      expect(asked.at(-1)).toEqual({ member: 'a', partitions: bHolds });
      const afterLeave = applied.length;
      await append(80, 8);
      await until('the last 8 applied by a', () => applied.length >= afterLeave + 8);
      expect(applied.slice(afterLeave).map((x) => x.member)).toEqual(Array(8).fill('a'));
      await a.stop();
    } finally {
      await logB.close();
      await logA.close();
    }
  }, 120_000);

  it('a hand-over whose start is answered after its consumer crashed and was replaced is dropped: no retries against the gone consumer, each record applied once', async () => {
    const log = opener(`shared-${randomBytes(4).toString('hex')}-`, { retryDelayMs: 100 })('crash-a');
    const append = (n: number) => log.append(Topics.usage, Array.from({ length: n }, (_, i) => ({ key: `k${i}-${randomBytes(2).toString('hex')}`, timestamp: Date.now(), value: Buffer.from([i]) })));
    let calls = 0;
    let release: () => void = () => undefined;
    const firstHeld = new Promise<void>((resolve) => (release = resolve));
    const applied = new Map<string, number>();
    try {
      await append(8);
      const sub = log.consume({
        topic: Topics.usage,
        consumer: 'crash-writers',
        from: new Map(),
        handle: (records) => {
          for (const r of records) applied.set(`${r.partition}:${r.offset}`, (applied.get(`${r.partition}:${r.offset}`) ?? 0) + 1);
        },
        onError: () => undefined,
        shared: {
          from: async (partitions) => {
            // The first hand-over's start is slow (ClickHouse slow or down) and outlives its consumer.
            if (++calls === 1) await firstHeld;
            return new Map(partitions.map((p) => [p, 0]));
          },
        },
      });
      await until('the first hand-over', () => calls === 1);
      // What kafkajs' CRASH event makes the subscription do: a new consumer, handed the partitions again.
      const internal = sub as unknown as { consumer: unknown; restart(crashed: unknown, err: unknown): void };
      internal.restart(internal.consumer, new Error('a crash'));
      await until("the new consumer's hand-over", () => calls === 2);
      await sub.caughtUp;
      release();
      await append(8);
      await until('the later 8 applied', () => applied.size === 16);
      // Before, the late start was retried against the crashed consumer every 250 ms to 2 s, for
      // ever, each retry resetting the new consumer's positions: give it the time to show.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(calls).toBe(2);
      expect([...applied.values()].every((n) => n === 1)).toBe(true);
      await sub.stop();
    } finally {
      release();
      await log.close();
    }
  }, 120_000);

  it('partitions handed over after the start, their start still being asked, are starting() and not drained: a stop\'s drain waits for them to be applied up to the end', async () => {
    const open = opener(`shared-${randomBytes(4).toString('hex')}-`);
    const logA = open('drain-a');
    const logB = open('drain-b');
    const stored: Checkpoint = new Map();
    const applied = new Map<string, number>();
    // b's starts answer at once until `hold` is set, then wait for `release`.
    let hold = false;
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const member = (log: KafkaLog, name: string): Subscription =>
      log.consume({
        topic: Topics.usage,
        consumer: 'writer',
        from: new Map(),
        handle: (records) => {
          for (const record of records) applied.set(`${record.partition}:${record.offset}`, (applied.get(`${record.partition}:${record.offset}`) ?? 0) + 1);
          const last = records[records.length - 1];
          stored.set(last.partition, last.offset + 1);
        },
        shared: {
          from: async (partitions) => {
            if (name === 'b' && hold) await held;
            return new Map(partitions.map((p) => [p, stored.get(p) ?? 0]));
          },
        },
      });
    const append = async (n: number): Promise<void> => {
      await logA.append(Topics.usage, Array.from({ length: n }, (_, i) => ({ key: `k${i}-${randomBytes(2).toString('hex')}`, value: Buffer.from(`v${i}`), timestamp: Date.now() })));
    };
    try {
      await append(40);
      const a = member(logA, 'a');
      await a.caughtUp;
      const b = member(logB, 'b');
      // Split, and settled: each holds two and together all four (mid-rebalance one may still hold a partition the other was given).
      await until('the partitions split between a and b', () => a.positions().size === 2 && b.positions().size === 2 && new Set([...a.positions().keys(), ...b.positions().keys()]).size === 4);
      await b.caughtUp;
      const aHolds = [...a.positions().keys()].sort();
      // a leaves while b's next starts wait: b is handed a's partitions, their start being asked.
      hold = true;
      await a.stop();
      await until("b handed a's partitions", () => (b.starting?.() ?? []).length === 2);
      expect(b.starting!().sort()).toEqual(aHolds);
      expect([...b.positions().keys()].sort()).not.toEqual([0, 1, 2, 3]);
      await append(40);
      const ends = await logB.endOffsets(Topics.usage);
      const bHolds = [...b.positions().keys()];
      await until('b applied its own partitions up to the end', () => bHolds.every((p) => b.positions().get(p) === ends.get(p)));
      // The drain (b's instance stopping) starts now, with all b has started applied; the starts
      // of a's partitions are answered a little later.
      const drained = drainWriters(logB, pino({ level: 'silent' }), [{ name: 'writer', topic: Topics.usage, subscription: b }], 60_000);
      setTimeout(release, 200);
      await drained;
      // Before, the drain ended at once (b's own partitions applied, a's counted as drained).
      expect(b.starting!()).toEqual([]);
      for (const [p, end] of ends) expect(b.positions().get(p)).toBe(end);
      expect([...applied.values()].every((n) => n === 1)).toBe(true);
      expect(applied.size).toBe(80);
      await b.stop();
    } finally {
      release();
      await logB.close();
      await logA.close();
    }
  }, 120_000);
});

describeWithInfra('KafkaLog shared consumers: hand-overs', 'Kafka', kafka, ({ brokers, mock }) => {
  const open = (topicPrefix: string, clientId: string): KafkaLog =>
    new KafkaLog({ brokers, clientId, topicPrefix, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 100, sessionTimeoutMs: 6_000 });
  /**
   * A writer as the projections are (HistoryProjection.handOver / revoke): its start reads the
   * store (held back by `gate`: slow, as a presence writer loading a snapshot is), then takes the
   * partitions' checkpoints as its own; revoke forgets them; its flushes write the ones it keeps.
   */
  const writerOf = (gate?: Promise<void>) => {
    const kept: Checkpoint = new Map();
    let asked = 0;
    return {
      kept,
      asked: () => asked,
      shared: {
        from: async (partitions: number[]) => {
          asked++;
          await gate;
          for (const p of partitions) kept.set(p, 0);
          return new Map(partitions.map((p) => [p, 0]));
        },
        revoked: (partitions: number[]) => {
          for (const p of partitions) kept.delete(p);
        },
      },
    };
  };
  const member = (log: KafkaLog, writer: ReturnType<typeof writerOf>): Subscription =>
    log.consume({ topic: Topics.usage, consumer: 'writer', from: new Map(), handle: () => undefined, shared: writer.shared });
  /** Two processes' logs on a topic prefix of their own, closed after `test`. */
  const withTwoLogs = async (name: string, test: (logA: KafkaLog, logB: KafkaLog) => Promise<void>): Promise<void> => {
    const prefix = `shared-${name}-${randomBytes(4).toString('hex')}-`;
    const logA = open(prefix, `${name}-a`);
    const logB = open(prefix, `${name}-b`);
    try {
      await test(logA, logB);
    } finally {
      await logB.close();
      await logA.close();
    }
  };

  it('partitions taken away while their start is being asked are told revoked after that answer, so the writer keeps nothing of them', async () => {
    let release!: () => void;
    const writerA = writerOf(new Promise<void>((resolve) => (release = resolve)));
    await withTwoLogs('late', async (logA, logB) => {
      await logA.append(Topics.usage, [{ key: 'k', value: Buffer.from('v'), timestamp: Date.now() }]);
      const a = member(logA, writerA);
      await until('a asked where its partitions start', () => writerA.asked() === 1);
      const b = member(logB, writerOf());
      // The group rebalances while a's answer waits: some of a's partitions go to b.
      await until('b started its partitions', () => b.positions().size > 0);
      release();
      await a.caughtUp;
      await until('a holds what b does not', () => a.positions().size + b.positions().size === 4 && a.positions().size > 0);
      const aHolds = [...a.positions().keys()].sort();
      // Before: the partitions b took were told revoked before a's start answered, and that answer
      // made them a's again: its flushes went on writing their checkpoints (b's moved back).
      expect([...writerA.kept.keys()].sort()).toEqual(aHolds);
      await b.stop();
      await a.stop();
    });
  }, 120_000);

  it('partitions whose start is being asked count in no lag (GET /ready, /metrics): they are starting, not the whole partition behind', async () => {
    const prefix = `shared-lag-${randomBytes(4).toString('hex')}-`;
    const log = open(prefix, 'lag-a');
    let release!: () => void;
    const writer = writerOf(new Promise<void>((resolve) => (release = resolve)));
    try {
      await log.append(Topics.usage, Array.from({ length: 400 }, (_, i) => ({ key: `k${i}`, value: Buffer.from('v'), timestamp: Date.now() })));
      const a = member(log, writer);
      await until('a asked where its partitions start', () => writer.asked() === 1);
      expect(a.starting?.().sort()).toEqual([0, 1, 2, 3]);
      // Before: 400, every record of the partitions, while the store was being asked where they start.
      expect(lagOf(a)).toBe(0);
      release();
      await a.caughtUp;
      await log.append(Topics.usage, [{ key: 'k', value: Buffer.from('v'), timestamp: Date.now() }]);
      await until('a applied the record appended', () => [...a.positions().values()].reduce((x, y) => x + y, 0) === 401);
      expect(lagOf(a)).toBe(0);
      await a.stop();
    } finally {
      await log.close();
    }
  }, 120_000);

  it('a partition a member keeps through a rebalance is fetched from its position on, not from the log\'s start again', async () => {
    const stored: Checkpoint = new Map();
    const member = (log: KafkaLog): Subscription =>
      log.consume({
        topic: Topics.usage,
        consumer: 'writer',
        from: new Map(),
        handle: (records) => {
          const last = records[records.length - 1];
          stored.set(last.partition, last.offset + 1);
        },
        shared: { from: (partitions) => new Map(partitions.map((p) => [p, stored.get(p) ?? 0])) },
      });
    const append = (log: KafkaLog, from: number, n: number) =>
      log.append(Topics.usage, Array.from({ length: n }, (_, i) => ({ key: `k${from + i}`, value: Buffer.from(`v${from + i}`), timestamp: Date.now() })));
    await withTwoLogs('kept', async (logA, logB) => {
      await append(logA, 0, 400);
      const a = member(logA);
      await a.caughtUp;
      // Every batch kafkajs fetches for a from here on: its partition and first offset (the consumer's instrumentation).
      const fetched: { partition: number; firstOffset: number }[] = [];
      const consumer = (a as unknown as { consumer: import('kafkajs').Consumer }).consumer;
      consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => fetched.push({ partition: payload.partition, firstOffset: Number(payload.firstOffset) }));
      const b = member(logB);
      await until('the partitions split between a and b', () => a.positions().size === 2 && b.positions().size === 2 && new Set([...a.positions().keys(), ...b.positions().keys()]).size === 4);
      const kept = a.positions();
      await append(logA, 400, 40);
      const ends = await logA.endOffsets(Topics.usage);
      await until('a applied the new records of the partitions it kept', () => [...kept.keys()].every((p) => (a.positions().get(p) ?? 0) >= (ends.get(p) ?? 0)));
      // Before: kafkajs starts each generation with no offsets of its own (nothing is committed), so
      // the partitions a kept were fetched from offset 0 again, their 100 records read and dropped.
      const refetched = fetched.filter((f) => kept.has(f.partition) && f.firstOffset < kept.get(f.partition)!);
      expect(refetched).toEqual([]);
      await b.stop();
      await a.stop();
    });
  }, 120_000);
});
