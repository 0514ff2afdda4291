// One contract for the Log port (STYLE: one port, one contract suite, several adapters).
// Every adapter test file calls logContract() with a factory that gives each test a log of its own
// (a fresh SQLite file, or Kafka topics with a unique prefix).
import { afterEach, describe, expect, it } from 'vitest';
import { Topics, type AppendRecord, type Checkpoint, type Log, type LogPosition, type LogRecord, type Subscription } from '../../src/log/port.js';
import { offsetAtTime } from '../../src/log/offset-at-time.js';

export interface LogHarness {
  log: Log;
  cleanup(): Promise<void>;
}

export interface LogContractOptions {
  /** How long to wait for asynchronous delivery before a test fails (Kafka joins groups first). */
  deliveryTimeoutMs?: number;
  /** How long to watch for records that should not arrive. */
  quietMs?: number;
}

const topic = Topics.messages;
const enc = new TextEncoder();
const dec = new TextDecoder();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function rec(key: string, value: string | Uint8Array, timestamp = 1_700_000_000_000): AppendRecord {
  return { key, value: typeof value === 'string' ? enc.encode(value) : value, timestamp };
}

async function until(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Collects what a subscription delivers. */
class Collector {
  readonly batches: LogRecord[][] = [];
  get records(): LogRecord[] {
    return this.batches.flat();
  }
  handle = (records: LogRecord[]): void => {
    this.batches.push(records);
  };
}

const positionKey = (p: LogPosition): string => `${p.partition}:${p.offset}`;

export function logContract(name: string, makeLog: () => Promise<LogHarness>, options: LogContractOptions = {}): void {
  const timeout = options.deliveryTimeoutMs ?? 10_000;
  const quietMs = options.quietMs ?? 500;

  describe(`Log contract: ${name}`, () => {
    let harness: LogHarness | undefined;
    const subscriptions: Subscription[] = [];

    const open = async (): Promise<Log> => {
      harness = await makeLog();
      return harness.log;
    };
    const consume = (log: Log, from: Checkpoint, collector: Collector, extra: Partial<Parameters<Log['consume']>[0]> = {}): Subscription => {
      const sub = log.consume({
        topic,
        consumer: `contract-${Math.random().toString(36).slice(2, 10)}`,
        from,
        handle: collector.handle,
        ...extra,
      });
      subscriptions.push(sub);
      return sub;
    };

    afterEach(async () => {
      for (const s of subscriptions.splice(0)) await s.stop();
      await harness?.cleanup();
      harness = undefined;
    });

    it('append resolves one position per record, in input order, keeping per-key order', async () => {
      const log = await open();
      const keys = ['app:a', 'app:b', 'app:c', 'app:d', 'app:e'];
      const records = Array.from({ length: 40 }, (_, i) => rec(keys[i % keys.length], `v${i}`));
      const positions = await log.append(topic, records);
      expect(positions).toHaveLength(records.length);
      expect(new Set(positions.map(positionKey)).size).toBe(records.length);
      const partitions = await log.partitions(topic);
      for (const key of keys) {
        const mine = positions.filter((_, i) => records[i].key === key);
        expect(new Set(mine.map((p) => p.partition)).size).toBe(1);
        expect(mine[0].partition).toBeGreaterThanOrEqual(0);
        expect(mine[0].partition).toBeLessThan(partitions);
        for (let i = 1; i < mine.length; i++) expect(mine[i].offset).toBeGreaterThan(mine[i - 1].offset);
      }
      // each position holds the record appended there
      for (const [i, p] of positions.entries()) {
        const [stored] = await log.read(topic, p.partition, p.offset, 1);
        expect(stored.key).toBe(records[i].key);
        expect(dec.decode(stored.value)).toBe(`v${i}`);
      }
      // a later append continues after the earlier one
      const [next] = await log.append(topic, [rec('app:a', 'after')]);
      const lastOfA = positions.filter((_, i) => records[i].key === 'app:a').at(-1)!;
      expect(next.partition).toBe(lastOfA.partition);
      expect(next.offset).toBeGreaterThan(lastOfA.offset);
      expect(await log.append(topic, [])).toEqual([]);
    });

    it('consume from an empty checkpoint delivers everything, each batch one partition in offset order', async () => {
      const log = await open();
      const records = Array.from({ length: 60 }, (_, i) => rec(`ch-${i % 7}`, `m${i}`));
      await log.append(topic, records.slice(0, 25));
      await log.append(topic, records.slice(25));
      const got = new Collector();
      consume(log, new Map(), got);
      await until('60 records', () => got.records.length >= 60, timeout);
      await sleep(quietMs);
      expect(got.records).toHaveLength(60);
      for (const batch of got.batches) {
        expect(new Set(batch.map((r) => r.partition)).size).toBe(1);
        for (let i = 1; i < batch.length; i++) expect(batch[i].offset).toBe(batch[i - 1].offset + 1);
        expect(batch.every((r) => r.topic === topic)).toBe(true);
      }
      // per partition: offsets 0..n-1, exactly once, in order
      const byPartition = new Map<number, number[]>();
      for (const r of got.records) byPartition.set(r.partition, [...(byPartition.get(r.partition) ?? []), r.offset]);
      for (const offsets of byPartition.values()) expect(offsets).toEqual(offsets.map((_, i) => i));
      // per key: the order of appends
      for (let k = 0; k < 7; k++) {
        const expected = records.filter((r) => r.key === `ch-${k}`).map((r) => dec.decode(r.value));
        expect(got.records.filter((r) => r.key === `ch-${k}`).map((r) => dec.decode(r.value))).toEqual(expected);
      }
    });

    it('consume from a checkpoint delivers only the records after it', async () => {
      const log = await open();
      const first = await log.append(topic, Array.from({ length: 20 }, (_, i) => rec(`k${i % 5}`, `old${i}`)));
      const checkpoint: Checkpoint = new Map();
      for (const p of first) checkpoint.set(p.partition, Math.max(checkpoint.get(p.partition) ?? 0, p.offset + 1));
      const later = await log.append(topic, Array.from({ length: 10 }, (_, i) => rec(`k${i % 5}`, `new${i}`)));
      const got = new Collector();
      consume(log, checkpoint, got);
      await until('10 new records', () => got.records.length >= 10, timeout);
      await sleep(quietMs);
      expect(got.records.map((r) => dec.decode(r.value)).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `new${i}`).sort());
      expect(new Set(got.records.map((r) => `${r.partition}:${r.offset}`))).toEqual(new Set(later.map(positionKey)));
    });

    it('a consumer started again under the same name resumes from the checkpoint it is given', async () => {
      const log = await open();
      const consumer = `restart-${Math.random().toString(36).slice(2, 10)}`;
      const positions = await log.append(topic, Array.from({ length: 10 }, (_, i) => rec('r', `a${i}`)));
      const first = new Collector();
      const sub = consume(log, new Map(), first, { consumer });
      await until('10 records', () => first.records.length >= 10, timeout);
      await sub.stop();
      // the projection had stored progress up to a3 only: the log serves everything after it again
      const { partition, offset } = positions[3];
      const second = new Collector();
      consume(log, new Map([[partition, offset + 1]]), second, { consumer });
      await until('6 records', () => second.records.length >= 6, timeout);
      await sleep(quietMs);
      expect(second.records.map((r) => dec.decode(r.value))).toEqual(['a4', 'a5', 'a6', 'a7', 'a8', 'a9']);
    });

    it('records keep their key, value bytes and timestamp', async () => {
      const log = await open();
      const allBytes = Uint8Array.from({ length: 256 }, (_, i) => i);
      const sent = [
        rec('app:ch', allBytes, 1_700_000_000_123),
        rec('ünïcødé 日本 😀', 'x', 1_700_000_000_124),
        rec('k', new Uint8Array(0), 1_700_000_000_125),
        rec('k', new Uint8Array(300_000).fill(7), 1_700_000_000_126),
      ];
      const positions = await log.append(topic, sent);
      const got = new Collector();
      consume(log, new Map(), got);
      await until('4 records', () => got.records.length >= 4, timeout);
      for (const [i, p] of positions.entries()) {
        const r = got.records.find((x) => x.partition === p.partition && x.offset === p.offset)!;
        expect(r.key).toBe(sent[i].key);
        expect(r.timestamp).toBe(sent[i].timestamp);
        expect(Buffer.from(r.value).equals(Buffer.from(sent[i].value))).toBe(true);
        const [read] = await log.read(topic, p.partition, p.offset, 1);
        expect(read.key).toBe(sent[i].key);
        expect(read.timestamp).toBe(sent[i].timestamp);
        expect(Buffer.from(read.value).equals(Buffer.from(sent[i].value))).toBe(true);
      }
    });

    it('concurrent appends all arrive exactly once', async () => {
      const log = await open();
      const got = new Collector();
      const sub = consume(log, new Map(), got);
      await sub.caughtUp;
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, c) => log.append(topic, Array.from({ length: 5 }, (_, i) => rec(`c${(c + i) % 6}`, `${c}-${i}`)))),
      );
      const positions = results.flat();
      expect(new Set(positions.map(positionKey)).size).toBe(100);
      await until('100 records', () => got.records.length >= 100, timeout);
      await sleep(quietMs);
      expect(got.records).toHaveLength(100);
      expect(new Set(got.records.map((r) => dec.decode(r.value))).size).toBe(100);
      for (const [c, result] of results.entries()) {
        for (const [i, p] of result.entries()) {
          const r = got.records.find((x) => x.partition === p.partition && x.offset === p.offset)!;
          expect(dec.decode(r.value)).toBe(`${c}-${i}`);
        }
      }
    });

    it('read() replays a range of one partition in offset order', async () => {
      const log = await open();
      const positions = await log.append(topic, Array.from({ length: 30 }, (_, i) => rec('one-channel', `r${i}`)));
      const partition = positions[0].partition;
      const base = positions[0].offset;
      const all = await log.read(topic, partition, base, 100);
      expect(all.map((r) => dec.decode(r.value))).toEqual(Array.from({ length: 30 }, (_, i) => `r${i}`));
      expect(all.map((r) => r.offset)).toEqual(positions.map((p) => p.offset));
      expect(all.every((r) => r.partition === partition && r.topic === topic)).toBe(true);
      const middle = await log.read(topic, partition, base + 10, 5);
      expect(middle.map((r) => dec.decode(r.value))).toEqual(['r10', 'r11', 'r12', 'r13', 'r14']);
      expect(await log.read(topic, partition, base + 30, 10)).toEqual([]);
      // the reader can go back
      expect((await log.read(topic, partition, base, 2)).map((r) => dec.decode(r.value))).toEqual(['r0', 'r1']);
    });

    it('offsetAtTime() finds a partition\'s first offset at or after a time with reads alone (a start without a mark: issue 22)', async () => {
      const log = await open();
      const t0 = 1_900_000_000_000;
      const positions = await log.append(topic, Array.from({ length: 60 }, (_, i) => rec('one-channel', `t${i}`, t0 + i * 1000)));
      const partition = positions[0].partition;
      const base = positions[0].offset;
      expect(await offsetAtTime(log, topic, partition, t0 + 41_500)).toBe(base + 42);
      expect(await offsetAtTime(log, topic, partition, t0 + 42_000)).toBe(base + 42);
      expect(await offsetAtTime(log, topic, partition, 0)).toBe(base);
      expect(await offsetAtTime(log, topic, partition, t0 + 3_600_000)).toBe(base + 60);
    });

    it('partitions() and endOffsets() describe the topic', async () => {
      const log = await open();
      const partitions = await log.partitions(topic);
      expect(partitions).toBeGreaterThanOrEqual(1);
      const empty = await log.endOffsets(topic);
      expect([...empty.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: partitions }, (_, i) => i));
      expect([...empty.values()].every((o) => o === 0)).toBe(true);
      const positions = await log.append(topic, Array.from({ length: 25 }, (_, i) => rec(`e${i % 9}`, `x${i}`)));
      const expected = new Map(Array.from({ length: partitions }, (_, i) => [i, 0]));
      for (const p of positions) expected.set(p.partition, Math.max(expected.get(p.partition)!, p.offset + 1));
      expect(await log.endOffsets(topic)).toEqual(expected);
      // topics are independent
      expect([...(await log.endOffsets(Topics.usage)).values()].every((o) => o === 0)).toBe(true);
    });

    it('caughtUp resolves once everything present at the start was delivered', async () => {
      const log = await open();
      const empty = consume(log, new Map(), new Collector());
      await empty.caughtUp;

      const positions = await log.append(topic, Array.from({ length: 30 }, (_, i) => rec(`u${i % 4}`, `y${i}`)));
      const got = new Collector();
      const sub = consume(log, new Map(), got);
      await sub.caughtUp;
      expect(got.records.length).toBeGreaterThanOrEqual(30);
      const ends = await log.endOffsets(topic);
      for (const [p, end] of ends) expect(sub.highWatermarks().get(p) ?? 0).toBe(end);
      expect(new Set(got.records.map((r) => `${r.partition}:${r.offset}`))).toEqual(new Set(positions.map(positionKey)));
      // positions(): the next offset to deliver; caught up, it is the end (no lag: GET /metrics)
      for (const [p, end] of ends) expect(sub.positions().get(p) ?? 0).toBe(end);

      // a checkpoint already at the end is caught up at once
      const atEnd = consume(log, new Map(ends), new Collector());
      await atEnd.caughtUp;

      // high watermarks follow later appends
      const [p] = await log.append(topic, [rec('u0', 'later')]);
      await until('the high watermark to move', () => (sub.highWatermarks().get(p.partition) ?? 0) === p.offset + 1, timeout);
      await until('the position to follow it', () => (sub.positions().get(p.partition) ?? 0) === p.offset + 1, timeout);
    });

    it('stop() stops delivery', async () => {
      const log = await open();
      await log.append(topic, [rec('s', 'before')]);
      const got = new Collector();
      const sub = consume(log, new Map(), got);
      await until('the first record', () => got.records.length === 1, timeout);
      await sub.stop();
      await log.append(topic, [rec('s', 'after')]);
      await sleep(quietMs * 2);
      expect(got.records.map((r) => dec.decode(r.value))).toEqual(['before']);
    });

    it('a failing handle() gets the same batch again, and nothing is skipped', async () => {
      const log = await open();
      await log.append(topic, Array.from({ length: 12 }, (_, i) => rec('same-key', `f${i}`)));
      const attempts: number[] = [];
      const errors: unknown[] = [];
      const applied: LogRecord[] = [];
      let failures = 2;
      consume(log, new Map(), new Collector(), {
        handle: (records) => {
          attempts.push(records[0].offset);
          if (failures > 0) {
            failures--;
            throw new Error('projection failed');
          }
          applied.push(...records);
        },
        onError: (err) => errors.push(err),
      });
      await until('12 applied records', () => applied.length >= 12, timeout);
      await sleep(quietMs);
      expect(errors).toHaveLength(2);
      expect((errors[0] as Error).message).toBe('projection failed');
      // the failed batch came back from its first record
      expect(attempts.slice(0, 3)).toEqual([attempts[0], attempts[0], attempts[0]]);
      expect(applied.map((r) => dec.decode(r.value))).toEqual(Array.from({ length: 12 }, (_, i) => `f${i}`));
    });

    it('a handle() that returns a promise gets no other batch until it settles, and a rejected one is retried', async () => {
      const log = await open();
      await log.append(topic, Array.from({ length: 6 }, (_, i) => rec('async-key', `a${i}`)));
      let active = 0;
      let mostAtOnce = 0;
      let failures = 1;
      const applied: string[] = [];
      const errors: unknown[] = [];
      consume(log, new Map(), new Collector(), {
        handle: async (records) => {
          active++;
          mostAtOnce = Math.max(mostAtOnce, active);
          await sleep(5);
          active--;
          if (failures > 0) {
            failures--;
            throw new Error('async projection failed');
          }
          applied.push(...records.map((r) => dec.decode(r.value)));
        },
        onError: (err) => errors.push(err),
      });
      // appended while the first batch is being handled
      await log.append(topic, [rec('async-key', 'a6')]);
      await until('7 applied records', () => applied.length >= 7, timeout);
      await sleep(quietMs);
      expect(mostAtOnce).toBe(1);
      expect((errors as Error[]).map((e) => e.message)).toEqual(['async projection failed']);
      expect(applied).toEqual(Array.from({ length: 7 }, (_, i) => `a${i}`));
    });
  });
}
