// The projection runner (projections/runner.ts) against the embedded log: where each projection
// starts, that a start resolves once all caught up, the consumers' lag, failed batches and store
// writes reported and retried, stop; and the one flush timer the projections with a store share.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type LogRecord, type Topic } from '../../src/log/port.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { FlushTimer } from '../../projections/flush-timer.js';

const value = (s: string): Uint8Array => Buffer.from(s);
const text = (r: LogRecord): string => Buffer.from(r.value).toString();

/** A logger whose lines the test reads. */
function capturedLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

/** Resolves once `check` holds (polled every few ms; the test's own timeout bounds it). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

/** `log`, but each consume is written down as `consumer:topic` in `consumed`. */
function recordingConsumes(log: EmbeddedLog): { consumed: string[]; recording: EmbeddedLog } {
  const consumed: string[] = [];
  const recording = new Proxy(log, {
    get(target, property) {
      if (property === 'consume') return (options: Parameters<EmbeddedLog['consume']>[0]) => (consumed.push(`${options.consumer}:${options.topic}`), target.consume(options));
      const v: unknown = Reflect.get(target, property, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return { consumed, recording };
}

describe('ProjectionRunner on the embedded log', () => {
  let dir: string;
  let log: EmbeddedLog;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'projection-runner-'));
    log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 1 });
  });
  afterEach(async () => {
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const append = async (topic: Topic, ...values: string[]): Promise<void> => {
    await log.append(topic, values.map((v) => ({ key: 'k', value: value(v), timestamp: Date.now() })));
  };

  it('starts each projection on each of its topics from the checkpoint its from() gives, and resolves once every one applied what the log held', async () => {
    await append(Topics.messages, 'm0', 'm1', 'm2');
    await append(Topics.presence, 'p0', 'p1');
    const { logger } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger });
    const seen: string[] = [];
    const fromCalls: string[] = [];
    await runner.start(
      {
        name: 'a',
        topics: [Topics.messages],
        from: () => {
          fromCalls.push('a-messages');
          return new Map([[0, 2]]);
        },
        handle: (records) => void seen.push(...records.map((r) => `a:${text(r)}`)),
      },
      {
        name: 'b',
        topics: [Topics.messages, Topics.presence],
        from: (topic) => {
          fromCalls.push(`b-${topic}`);
          return new Map();
        },
        // Asynchronous: start() still waits for it.
        handle: async (records) => {
          await new Promise((r) => setTimeout(r, 20));
          seen.push(...records.map((r) => `b:${text(r)}`));
        },
      },
    );
    expect(fromCalls).toEqual(['a-messages', 'b-messages', 'b-presence']);
    expect(seen.filter((s) => s.startsWith('a:'))).toEqual(['a:m2']);
    expect(seen.filter((s) => s.startsWith('b:')).sort()).toEqual(['b:m0', 'b:m1', 'b:m2', 'b:p0', 'b:p1']);
    expect([...runner.lag().keys()].sort()).toEqual(['a', 'b-messages', 'b-presence']);
    expect([...runner.lag().values()]).toEqual([0, 0, 0]);
    await runner.stop();
  });

  it('lists every consumer in lag() with the records it has yet to apply, a follower only while it runs', async () => {
    const { logger } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await runner.start({ name: 'slow', topics: [Topics.usage], handle: () => held });
    await append(Topics.usage, 'u0');
    await append(Topics.usage, 'u1', 'u2');
    // The first batch waits in handle(); the log's end is 3.
    await until(() => runner.lag().get('slow') === 3);

    const followed: string[] = [];
    const follower = runner.follow('slow-tail', Topics.usage, new Map([[0, 1]]), (records) => void followed.push(...records.map(text)));
    await until(() => followed.length === 2);
    expect(followed).toEqual(['u1', 'u2']);
    expect(runner.lag().get('slow-tail')).toBe(0);
    await follower.stop();
    expect(runner.lag().has('slow-tail')).toBe(false);

    release();
    await until(() => runner.lag().get('slow') === 0);
    await runner.stop();
  });

  it('retries a batch that failed until it applies, counting and logging each failure under its consumer', async () => {
    await append(Topics.connections, 'c0');
    const { logger, lines } = capturedLogger();
    const failures: string[] = [];
    const runner = new ProjectionRunner({ log, logger, onBatchFailed: (consumer) => failures.push(consumer) });
    let attempts = 0;
    const applied: string[] = [];
    await runner.start({
      name: 'flaky',
      topics: [Topics.connections, Topics.usage],
      handle: (records) => {
        if (++attempts <= 2) throw new Error('store unavailable');
        applied.push(...records.map(text));
      },
    });
    expect(applied).toEqual(['c0']);
    expect(failures).toEqual(['flaky-connections', 'flaky-connections']);
    const logged = lines.filter((l) => l.msg === 'projection failed on a batch; retrying');
    expect(logged.map((l) => [l.consumer, l.topic, (l.err as { message: string }).message])).toEqual([
      ['flaky-connections', 'connections', 'store unavailable'],
      ['flaky-connections', 'connections', 'store unavailable'],
    ]);
    await runner.stop();
  });

  it('reports a failed store write of a projection as a count and a warning', () => {
    const { logger, lines } = capturedLogger();
    const failed: string[] = [];
    const runner = new ProjectionRunner({ log, logger, onStoreWriteFailed: (projection) => failed.push(projection) });
    runner.storeWriteFailed('history')(new Error('disk full'));
    expect(failed).toEqual(['history']);
    expect(lines.find((l) => l.msg === 'projection store write failed; retrying')).toMatchObject({ projection: 'history', level: 40 });
  });

  it('names each consumer to the log through consumerName, and refuses a second consumer of the same name', async () => {
    const { logger } = capturedLogger();
    const names: string[] = [];
    const recording = new Proxy(log, {
      get(target, property) {
        if (property === 'consume') return (options: Parameters<EmbeddedLog['consume']>[0]) => (names.push(options.consumer), target.consume(options));
        const v: unknown = Reflect.get(target, property, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const runner = new ProjectionRunner({ log: recording, logger, consumerName: (name) => `${name}-instance-1` });
    await runner.start({ name: 'stats', topics: [Topics.messages, Topics.usage], handle: () => undefined });
    expect(names).toEqual(['stats-messages-instance-1', 'stats-usage-instance-1']);
    expect(() => runner.follow('stats-usage', Topics.usage, new Map(), () => undefined)).toThrow(/runs already/);
    await runner.stop();
  });

  it('with shareConsumers, reads a topic once for the projections of all its partitions, each from its own checkpoint, and lists each in lag()', async () => {
    await append(Topics.messages, 'm0', 'm1', 'm2');
    const { logger } = capturedLogger();
    const { consumed, recording } = recordingConsumes(log);
    const runner = new ProjectionRunner({ log: recording, logger, shareConsumers: true });
    const seen = { a: [] as string[], b: [] as string[], c: [] as string[] };
    await runner.start(
      { name: 'a', topics: [Topics.messages], from: () => new Map([[0, 2]]), handle: (records) => void seen.a.push(...records.map(text)) },
      { name: 'b', topics: [Topics.messages], from: () => new Map([[0, 1]]), handle: (records) => void seen.b.push(...records.map(text)) },
      { name: 'c', topics: [Topics.presence], handle: (records) => void seen.c.push(...records.map(text)) },
    );
    expect(consumed).toEqual(['messages-feed:messages', 'c:presence']);
    expect(seen).toEqual({ a: ['m2'], b: ['m1', 'm2'], c: [] });
    await append(Topics.messages, 'm3');
    await until(() => seen.a.length === 2 && seen.b.length === 3);
    expect(seen.a).toEqual(['m2', 'm3']);
    expect(seen.b).toEqual(['m1', 'm2', 'm3']);
    expect(Object.fromEntries(runner.lag())).toEqual({ a: 0, b: 0, c: 0 });
    expect(runner.consumer('a').positions()).toEqual(new Map([[0, 4]]));
    await runner.stop();
  });

  it('with shareConsumers, a projection behind the log\'s start (retention deleted what it had yet to apply) is told where it goes on, once, before the records kept; one past it is not', async () => {
    await append(Topics.messages, 'm0', 'm1');
    await append(Topics.messages, 'm2');
    await append(Topics.messages, 'm3', 'm4');
    expect(await log.enforceRetention(Date.now() + 30 * 24 * 3600_000)).toBe(2); // the newest segment stays
    // Read again from the file: the log's in-memory window no longer has what retention deleted.
    await log.close();
    log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 1 });
    const { logger } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger, shareConsumers: true });
    const seen: string[] = [];
    const wiring = (name: string, from: number) => ({
      name,
      topics: [Topics.messages],
      from: () => new Map([[0, from]]),
      handle: (records: LogRecord[]) => void seen.push(...records.map((r) => `${name} ${text(r)}`)),
      lost: (topic: Topic, partition: number, next: number) => void seen.push(`${name} lost ${topic}/${partition} before ${next}`),
    });
    await runner.start(wiring('a', 0), wiring('b', 2), wiring('c', 4));
    expect(seen).toEqual(['a lost messages/0 before 3', 'b lost messages/0 before 3', 'a m3', 'a m4', 'b m3', 'b m4', 'c m4']);
    expect(Object.fromEntries(runner.lag())).toEqual({ a: 0, b: 0, c: 0 });
    expect(log.lostRecords()).toEqual([{ topic: Topics.messages, count: 3 }]);
    await runner.stop();
  });

  it('with shareConsumers, retries a batch one projection failed on without giving it again to the one that applied it, and counts the failure under the failing one', async () => {
    await append(Topics.usage, 'u0', 'u1');
    const { logger } = capturedLogger();
    const failures: string[] = [];
    const runner = new ProjectionRunner({ log, logger, shareConsumers: true, onBatchFailed: (consumer) => failures.push(consumer) });
    const steady: string[] = [];
    const flaky: string[] = [];
    let attempts = 0;
    await runner.start(
      { name: 'steady', topics: [Topics.usage], handle: (records) => void steady.push(...records.map(text)) },
      {
        name: 'flaky',
        topics: [Topics.usage],
        handle: (records) => {
          if (++attempts <= 2) throw new Error('store unavailable');
          flaky.push(...records.map(text));
        },
      },
    );
    expect(steady).toEqual(['u0', 'u1']);
    expect(flaky).toEqual(['u0', 'u1']);
    expect(failures).toEqual(['flaky', 'flaky']);
    await runner.stop();
  });

  it('join: a reader of a topic the projections share a consumer of is handed its records from its start on, through that consumer; stopped, it gets nothing more while they go on', async () => {
    await append(Topics.messages, 'm0', 'm1');
    const { logger } = capturedLogger();
    const { consumed, recording } = recordingConsumes(log);
    const runner = new ProjectionRunner({ log: recording, logger, shareConsumers: true });
    const projected: string[] = [];
    await runner.start(
      { name: 'a', topics: [Topics.messages], handle: (records) => void projected.push(...records.map(text)) },
      { name: 'b', topics: [Topics.messages], handle: () => undefined },
    );
    const joined: string[] = [];
    const reader = runner.join({ topic: Topics.messages, consumer: 'delivery', from: await log.endOffsets(Topics.messages), handle: (records) => void joined.push(...records.map(text)) });
    expect(reader.positions()).toEqual(new Map([[0, 2]]));
    await append(Topics.messages, 'm2', 'm3');
    await until(() => joined.length === 2);
    expect(joined).toEqual(['m2', 'm3']);
    expect(reader.positions()).toEqual(new Map([[0, 4]]));
    await reader.stop();
    await append(Topics.messages, 'm4');
    await until(() => projected.length === 5);
    expect(joined).toEqual(['m2', 'm3']);
    // A topic no projections share a consumer of: a consumer of its own.
    const own: string[] = [];
    const alone = runner.join({ topic: Topics.usage, consumer: 'usage-reader', from: new Map(), handle: (records) => void own.push(...records.map(text)) });
    await append(Topics.usage, 'u0');
    await until(() => own.length === 1);
    expect(consumed).toEqual(['messages-feed:messages', 'usage-reader:usage']);
    await alone.stop();
    await runner.stop();
  });

  it('stop with drainMs: the other consumers stop first, then the writers apply the log up to its end before they stop, saying what it waits for', async () => {
    await append(Topics.presence, 'p0', 'p1', 'p2');
    const { logger, lines } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const written: string[] = [];
    const read: string[] = [];
    const shared = { from: () => new Map<number, number>() };
    await runner.start(
      { name: 'reader', topics: [Topics.presence], handle: (records) => void read.push(...records.map(text)) },
      {
        name: 'writer',
        topics: [Topics.presence],
        shared,
        handle: async (records) => {
          await held;
          written.push(...records.map(text));
        },
      },
    );
    const stopped = runner.stop({ drainMs: 60_000 });
    await until(() => lines.some((l) => l.msg === 'stop: waiting for the shared writers to apply the log up to its end before their stores are written'));
    expect(lines.find((l) => String(l.msg).startsWith('stop: waiting'))!.writers).toEqual([{ consumer: 'writer', topic: Topics.presence, recordsBehind: 3 }]);
    // The reader has stopped: what is appended now reaches it no more.
    await append(Topics.presence, 'p3');
    release();
    await stopped;
    expect(read).toEqual(['p0', 'p1', 'p2']);
    expect(written.slice(0, 3)).toEqual(['p0', 'p1', 'p2']);
    expect(lines.some((l) => l.msg === 'stop: the shared writers applied the log up to its end')).toBe(true);
    expect(lines.filter((l) => String(l.msg).startsWith('stop: gave up'))).toEqual([]);
  });

  it('stop with drainMs: a writer that cannot apply the log up to its end is given up on after drainMs, with a warning naming it; without drainMs, nothing waits', async () => {
    await append(Topics.presence, 'p0', 'p1');
    const { logger, lines } = capturedLogger();
    const failing = (): ProjectionRunner => new ProjectionRunner({ log, logger });
    const wiring = (name: string) => ({ name, topics: [Topics.presence] as Topic[], shared: { from: () => new Map<number, number>() }, handle: () => Promise.reject(new Error('store down')) });
    const runner = failing();
    await runner.start(wiring('writer'));
    await runner.stop({ drainMs: 150 });
    const gaveUp = lines.filter((l) => String(l.msg).startsWith('stop: gave up waiting for the shared writers'));
    expect(gaveUp.map((l) => [l.level, l.writers, l.drainMs])).toEqual([[40, [{ consumer: 'writer', topic: Topics.presence, recordsBehind: 2 }], 150]]);
    const other = failing();
    await other.start(wiring('writer'));
    const before = lines.length;
    await other.stop();
    expect(lines.slice(before).filter((l) => String(l.msg).startsWith('stop:'))).toEqual([]);
  });

  it('join: a reader that joins while the shared consumer hands out a batch it starts in is handed that batch too', async () => {
    await append(Topics.messages, 'm0');
    const { logger } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger, shareConsumers: true });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    await runner.start(
      {
        name: 'a',
        topics: [Topics.messages],
        handle: async (records) => {
          if (records.some((r) => text(r) === 'm1')) {
            holding = true;
            await held;
          }
        },
      },
      { name: 'b', topics: [Topics.messages], handle: () => undefined },
    );
    await append(Topics.messages, 'm1', 'm2');
    await until(() => holding);
    const joined: string[] = [];
    const reader = runner.join({ topic: Topics.messages, consumer: 'delivery', from: new Map([[0, 2]]), handle: (records) => void joined.push(...records.map(text)) });
    expect(reader.positions()).toEqual(new Map([[0, 2]]));
    release();
    await until(() => joined.length === 1);
    expect(joined).toEqual(['m2']);
    await runner.stop();
  });

  it('applies nothing appended after stop(), and lists no consumer', async () => {
    const { logger } = capturedLogger();
    const runner = new ProjectionRunner({ log, logger });
    const applied: string[] = [];
    await runner.start({ name: 'p', topics: [Topics.messages], handle: (records) => void applied.push(...records.map(text)) });
    await append(Topics.messages, 'before');
    await until(() => applied.length === 1);
    await runner.stop();
    await append(Topics.messages, 'after');
    // A consumer still running would have been woken by the append's commit, which has resolved.
    await new Promise((r) => setImmediate(r));
    expect(applied).toEqual(['before']);
    expect(runner.lag().size).toBe(0);
  });
});

describe('FlushTimer', () => {
  it('writes once for every change within the interval, and again after a later change', async () => {
    let writes = 0;
    const timer = new FlushTimer(10, async () => void writes++);
    timer.schedule();
    timer.schedule();
    timer.schedule();
    await until(() => writes === 1);
    await new Promise((r) => setTimeout(r, 30));
    expect(writes).toBe(1);
    timer.schedule();
    await until(() => writes === 2);
    timer.cancel();
  });

  it('reports a failed write and tries again at the next tick, until one succeeds', async () => {
    let attempts = 0;
    const errors: string[] = [];
    const timer = new FlushTimer(
      5,
      async () => {
        if (++attempts < 3) throw new Error(`write ${attempts} failed`);
      },
      (err) => errors.push((err as Error).message),
    );
    timer.schedule();
    await until(() => attempts === 3);
    expect(errors).toEqual(['write 1 failed', 'write 2 failed']);
    timer.cancel();
  });

  it('writes nothing once cancelled', async () => {
    let writes = 0;
    const timer = new FlushTimer(5, async () => void writes++);
    timer.schedule();
    timer.cancel();
    await new Promise((r) => setTimeout(r, 30));
    expect(writes).toBe(0);
  });

  it('a write that fails after cancel (a close waiting for it) schedules none again', async () => {
    let fail!: (err: Error) => void;
    let writes = 0;
    const errors: string[] = [];
    const timer = new FlushTimer(
      5,
      () => {
        writes++;
        return new Promise<void>((_, reject) => (fail = reject));
      },
      (err) => errors.push((err as Error).message),
    );
    timer.schedule();
    await until(() => writes === 1);
    // The projection's close(): cancel, then its own last write (which waits for this one).
    timer.cancel();
    fail(new Error('the store is down'));
    await until(() => errors.length === 1);
    // Before: the failure scheduled the next tick's write, after the close, against a closed store, again at every failure.
    await new Promise((r) => setTimeout(r, 30));
    expect(writes).toBe(1);
  });
});
