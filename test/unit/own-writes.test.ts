// Read your own writes (src/log/own-writes.ts): every append this instance acknowledged is noted, so
// that a read after it waits for the projection to apply it. An append the log wrote only in part
// (PartialAppendError: with KAFKA_PRODUCERS >= 2 one producer's request failed, another's did not)
// acknowledges the writes that landed (src/log/append-batcher.ts): those are noted too.
import { describe, expect, it } from 'vitest';
import { AppendBatcher } from '../../src/log/append-batcher.js';
import { OwnWrites } from '../../src/log/own-writes.js';
import { MonotonicClock } from '../../src/clock.js';
import { PartialAppendError, Topics, type Log } from '../../src/log/port.js';

describe('own writes', () => {
  it('an append written in part: the write acknowledged is noted, the failed one gets its error', async () => {
    // A log that writes the record keyed `a` (partition 0, offset 41) and fails the other.
    const log = {
      kind: 'kafka',
      maxAppendsInFlight: 3,
      async append(_topic: string, records: { key: string }[]) {
        throw new PartialAppendError('wrote 1 of 2 partitions', records.map((r) => (r.key === 'a' ? { partition: 0, offset: 41 } : undefined)), { cause: new Error('broker said no') });
      },
    } as unknown as Log;
    const own = new OwnWrites(5_000);
    const batcher = new AppendBatcher(own.recording(log), new MonotonicClock());
    const a = batcher.append(Topics.messages, [{ key: 'a', build: () => new Uint8Array([1]) }]);
    const b = batcher.append(Topics.messages, [{ key: 'b', build: () => new Uint8Array([2]) }]);
    expect(await a).toEqual([{ partition: 0, offset: 41 }]);
    await expect(b).rejects.toThrow();
    expect(own.of(Topics.messages)).toEqual(new Map([[0, 42]]));
  });
});
