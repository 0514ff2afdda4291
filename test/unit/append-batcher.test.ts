import { describe, expect, it } from 'vitest';
import { AppendBatcher } from '../../src/log/append-batcher.js';
import { MonotonicClock } from '../../src/clock.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { PartialAppendError, type AppendRecord, type Log, type LogPosition, type Topic } from '../../src/log/port.js';

/** The embedded log, counting the appends that reach it. */
function countingLog(): { log: Log; calls: AppendRecord[][] } {
  const inner = new EmbeddedLog({ path: ':memory:' });
  const calls: AppendRecord[][] = [];
  const log = Object.create(inner) as Log;
  log.append = (topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> => {
    calls.push(records);
    return inner.append(topic, records);
  };
  return { log, calls };
}

const record = (n: number) => ({ key: `k${n % 3}`, build: (ts: number) => new TextEncoder().encode(`${n}@${ts}`) });

describe('group commit (issue: many concurrent publishes share one append)', () => {
  it('appends made in the same event-loop turn go to the log as one append, each caller getting its own positions', async () => {
    const { log, calls } = countingLog();
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => batcher.append('messages', [record(i)])));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toHaveLength(200);
    const positions = results.map((r) => `${r[0].partition}:${r[0].offset}`);
    expect(new Set(positions).size).toBe(200);
  });

  it('while one append is in flight, the next ones gather into the following append', async () => {
    const { log, calls } = countingLog();
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const first = batcher.append('messages', [record(0)]);
    await new Promise((r) => setImmediate(r));
    const rest = Promise.all(Array.from({ length: 50 }, (_, i) => batcher.append('messages', [record(i + 1)])));
    await Promise.all([first, rest]);
    expect(calls.map((c) => c.length)).toEqual([1, 50]);
  });

  it('assigns timestamps in append order, never going backwards', async () => {
    const { log, calls } = countingLog();
    let now = 1000;
    const batcher = new AppendBatcher(log, new MonotonicClock({ now: () => (now -= 7) }));
    await Promise.all(Array.from({ length: 20 }, (_, i) => batcher.append('messages', [record(i)])));
    const stamps = calls.flat().map((r) => r.timestamp);
    expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
  });
});

/** A log whose appends stay in flight until the test settles them. */
function manualLog(maxAppendsInFlight: number) {
  const pending: { records: AppendRecord[]; settle: (err?: Error) => void }[] = [];
  let next = 0;
  const log = {
    kind: 'embedded',
    maxAppendsInFlight,
    append: (_topic: Topic, records: AppendRecord[]) =>
      new Promise<LogPosition[]>((resolve, reject) => {
        const positions = records.map(() => ({ partition: 0, offset: next++ }));
        pending.push({ records, settle: (err) => (err ? reject(err) : resolve(positions)) });
      }),
  } as unknown as Log;
  return { log, pending };
}

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('group commit with appends in flight at once (the embedded log takes two)', () => {
  it('sends the next batch while one is in flight, up to the log limit, and oldestInFlight is the oldest', async () => {
    const { log, pending } = manualLog(2);
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const first = batcher.append('messages', [record(0)]);
    await turn();
    const second = batcher.append('messages', [record(1)]);
    await turn();
    const third = batcher.append('messages', [record(2)]);
    await turn();
    expect(pending.map((p) => p.records.length)).toEqual([1, 1]); // the third waits for room
    const oldest = batcher.oldestInFlight('messages');
    expect(oldest).toBe(pending[0].records[0].timestamp);
    pending[0].settle();
    await first;
    await turn();
    expect(pending).toHaveLength(3);
    expect(batcher.oldestInFlight('messages')).toBe(pending[1].records[0].timestamp);
    pending[1].settle();
    pending[2].settle();
    expect((await second)[0].offset).toBe(1);
    expect((await third)[0].offset).toBe(2);
    expect(batcher.oldestInFlight('messages')).toBeUndefined();
  });

  it('a log without the property gets one append at a time', async () => {
    const { log, pending } = manualLog(1);
    const batcher = new AppendBatcher(log, new MonotonicClock());
    void batcher.append('messages', [record(0)]);
    await turn();
    void batcher.append('messages', [record(1)]);
    await turn();
    expect(pending).toHaveLength(1);
  });
});

describe('group commit fails per record, not per batch (issue 10: no input of one request may fail another)', () => {
  it('a record whose value cannot be built fails its own append only; the others in the same append are durable', async () => {
    const { log, calls } = countingLog();
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const poisoned = { key: 'k0', build: (): Uint8Array => { throw new RangeError('Too deep objects'); } };
    const results = await Promise.allSettled([
      batcher.append('messages', [record(1)]),
      batcher.append('messages', [record(2), poisoned]),
      batcher.append('messages', [record(3)]),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(RangeError);
    // The poisoned request's good record is not appended either: a request is all or nothing.
    expect(calls).toHaveLength(1);
    expect(calls[0].map((r) => new TextDecoder().decode(r.value).split('@')[0])).toEqual(['1', '3']);
  });

  it('a batch of only unbuildable records makes no append', async () => {
    const { log, calls } = countingLog();
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const poisoned = { key: 'k0', build: (): Uint8Array => { throw new Error('no'); } };
    await expect(batcher.append('messages', [poisoned])).rejects.toThrow('no');
    expect(calls).toHaveLength(0);
    await expect(batcher.append('messages', [record(1)])).resolves.toHaveLength(1);
  });

  it('an append the log wrote in part (PartialAppendError) fails only the callers with a record not written', async () => {
    const { log, pending } = manualLog(1);
    const batcher = new AppendBatcher(log, new MonotonicClock());
    const results = Promise.allSettled([
      batcher.append('messages', [record(0)]),
      batcher.append('messages', [record(1), record(2)]),
      batcher.append('messages', [record(3)]),
      batcher.append('messages', [record(4), record(5)]),
    ]);
    await turn();
    expect(pending).toHaveLength(1);
    const refused = new Error('partition 1 refused the request');
    // Records 2 and 3 not written: the second and third callers fail, the first and fourth hold positions.
    const positions = [0, 1, undefined, undefined, 4, 5].map((offset) => (offset === undefined ? undefined : { partition: 0, offset }));
    pending[0].settle(new PartialAppendError('some written', positions, { cause: refused }));
    const settled = await results;
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((settled[0] as PromiseFulfilledResult<LogPosition[]>).value).toEqual([{ partition: 0, offset: 0 }]);
    expect((settled[3] as PromiseFulfilledResult<LogPosition[]>).value).toEqual([{ partition: 0, offset: 4 }, { partition: 0, offset: 5 }]);
    expect((settled[1] as PromiseRejectedResult).reason).toBe(refused);
  });
});
