import { describe, expect, it } from 'vitest';
import { AppendBatcher } from '../../src/log/append-batcher.js';
import { MonotonicClock } from '../../src/clock.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import type { AppendRecord, Log, LogPosition, Topic } from '../../src/log/port.js';

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
