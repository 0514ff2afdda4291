// Read-your-writes through the log (src/log/applied-positions.ts): a wait for appended positions
// resolves once the consumer has applied them, on every partition named, or false at its deadline.
import { describe, expect, it } from 'vitest';
import { AppliedPositions, positionsAfter } from '../../src/log/applied-positions.js';
import type { LogPosition, LogRecord } from '../../src/log/port.js';

const wait = (applied: AppliedPositions, positions: LogPosition[], ms: number): Promise<boolean> => applied.until('apps', positionsAfter(positions), ms);
const covers = (applied: AppliedPositions, positions: LogPosition[]): boolean => applied.reached('apps', positionsAfter(positions));

const records = (partition: number, from: number, to: number): LogRecord[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ topic: 'apps', partition, offset: from + i, key: 'a', value: new Uint8Array(), timestamp: 0 }));

describe('AppliedPositions', () => {
  it('resolves true once every position named is applied, whichever partition applies last', async () => {
    const applied = new AppliedPositions();
    let done = false;
    const waiting = wait(applied, [{ partition: 0, offset: 3 }, { partition: 2, offset: 0 }], 10_000).then((ok) => ((done = true), ok));
    applied.advance(records(0, 0, 2));
    applied.advance(records(2, 0, 0));
    await Promise.resolve();
    expect(done).toBe(false); // partition 0 is applied up to offset 2 only
    applied.advance(records(0, 3, 5));
    expect(await waiting).toBe(true);
  });

  it('resolves at once for positions already applied; an older batch applied again does not move it back', async () => {
    const applied = new AppliedPositions();
    applied.advance(records(1, 0, 9));
    applied.advance(records(1, 0, 2));
    expect(covers(applied, [{ partition: 1, offset: 9 }])).toBe(true);
    expect(await wait(applied, [{ partition: 1, offset: 9 }], 0)).toBe(true);
  });

  it('resolves false at its deadline when the consumer has not applied the position', async () => {
    const applied = new AppliedPositions();
    applied.advance(records(0, 0, 4));
    expect(await wait(applied, [{ partition: 0, offset: 5 }], 20)).toBe(false);
    // A late application after the deadline resolves nothing twice (the waiter is gone).
    applied.advance(records(0, 5, 5));
    expect(covers(applied, [{ partition: 0, offset: 5 }])).toBe(true);
  });
});
