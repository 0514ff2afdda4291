// Read-your-writes through the log (src/log/applied-positions.ts): a wait for appended positions
// resolves once the consumer has applied them, on every partition named, or false at its deadline.
import { describe, expect, it } from 'vitest';
import { AppliedPositions } from '../../src/log/applied-positions.js';
import type { LogRecord } from '../../src/log/port.js';

const records = (partition: number, from: number, to: number): LogRecord[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ topic: 'apps', partition, offset: from + i, key: 'a', value: new Uint8Array(), timestamp: 0 }));

describe('AppliedPositions', () => {
  it('resolves true once every position named is applied, whichever partition applies last', async () => {
    const applied = new AppliedPositions();
    let done = false;
    const wait = applied.wait([{ partition: 0, offset: 3 }, { partition: 2, offset: 0 }], 10_000).then((ok) => ((done = true), ok));
    applied.applied(records(0, 0, 2));
    applied.applied(records(2, 0, 0));
    await Promise.resolve();
    expect(done).toBe(false); // partition 0 is applied up to offset 2 only
    applied.applied(records(0, 3, 5));
    expect(await wait).toBe(true);
  });

  it('resolves at once for positions already applied; an older batch applied again does not move it back', async () => {
    const applied = new AppliedPositions();
    applied.applied(records(1, 0, 9));
    applied.applied(records(1, 0, 2));
    expect(applied.covers([{ partition: 1, offset: 9 }])).toBe(true);
    expect(await applied.wait([{ partition: 1, offset: 9 }], 0)).toBe(true);
  });

  it('resolves false at its deadline when the consumer has not applied the position', async () => {
    const applied = new AppliedPositions();
    applied.applied(records(0, 0, 4));
    expect(await applied.wait([{ partition: 0, offset: 5 }], 20)).toBe(false);
    // A late application after the deadline resolves nothing twice (the waiter is gone).
    applied.applied(records(0, 5, 5));
    expect(applied.covers([{ partition: 0, offset: 5 }])).toBe(true);
  });
});
