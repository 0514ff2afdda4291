// LostRecords (src/log/lost-records.ts): records the log deleted before a consumer of this process
// applied them. Several consumers of a process meet the same deletion (the projections' feed, the
// shared writers, realtime delivery), each from where it stood: each range is logged once, each
// record counted once.
import { describe, expect, it } from 'vitest';
import { LostRecords } from '../../src/log/lost-records.js';

describe('LostRecords', () => {
  const make = () => {
    const lines: Record<string, unknown>[] = [];
    return { lines, lost: new LostRecords({ error: (obj) => void lines.push(obj as Record<string, unknown>) }) };
  };

  it('logs and counts a range once however many consumers meet it, and only the part not told of yet', () => {
    const { lines, lost } = make();
    lost.lost('messages', 't-messages', 2, 0, 10, 'history');
    lost.lost('messages', 't-messages', 2, 5, 10, 'history-writer'); // within what was told
    lost.lost('messages', 't-messages', 2, 0, 10, 'realtime-delivery');
    expect(lines).toEqual([{ topic: 't-messages', partition: 2, from: 0, to: 10, records: 10, consumer: 'history' }]);
    // Retention went on: the part past what was told.
    lost.lost('messages', 't-messages', 2, 5, 14, 'history');
    expect(lines.at(-1)).toEqual({ topic: 't-messages', partition: 2, from: 10, to: 14, records: 4, consumer: 'history' });
    // Another partition, another topic: their own ranges.
    lost.lost('messages', 't-messages', 1, 0, 3, 'history');
    lost.lost('presence', 't-presence', 2, 0, 2, 'presence');
    expect(lost.counted()).toEqual([
      { topic: 'messages', count: 17 },
      { topic: 'presence', count: 2 },
    ]);
  });

  it('tells only the gaps of a range that straddles ranges told of, and nothing of an empty one', () => {
    const { lines, lost } = make();
    lost.lost('messages', 'm', 0, 10, 20, 'a');
    lost.lost('messages', 'm', 0, 30, 40, 'a');
    lost.lost('messages', 'm', 0, 5, 45, 'b');
    lost.lost('messages', 'm', 0, 7, 7, 'b');
    expect(lines.map((l) => [l.from, l.to])).toEqual([[10, 20], [30, 40], [5, 10], [20, 30], [40, 45]]);
    expect(lost.counted()).toEqual([{ topic: 'messages', count: 40 }]);
    lost.lost('messages', 'm', 0, 0, 45, 'c');
    expect(lines.at(-1)).toMatchObject({ from: 0, to: 5 });
  });
});
