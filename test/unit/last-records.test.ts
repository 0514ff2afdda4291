// LastRecords (src/realtime/last-records.ts): what tells a resume that its channel had nothing after
// the client's position without reading the log. It may say "not known", never "nothing" wrongly.
import { describe, expect, it } from 'vitest';
import { LastRecords } from '../../src/realtime/last-records.js';

describe('LastRecords', () => {
  it('knows nothing before where delivery started, nor of a partition it does not read', () => {
    const last = new LastRecords(10);
    last.start(0, 100);
    expect(last.nothingSince(0, 'a', 99)).toBe(false);
    expect(last.nothingSince(0, 'a', 100)).toBe(true);
    expect(last.nothingSince(1, 'a', 100)).toBe(false);
  });

  it('a key with a record at or after the offset had something; one whose last record is before it had nothing', () => {
    const last = new LastRecords(10);
    last.start(0, 0);
    last.seen(0, 'a', 5);
    last.seen(0, 'b', 6);
    expect(last.nothingSince(0, 'a', 5)).toBe(false);
    expect(last.nothingSince(0, 'a', 6)).toBe(true);
    last.seen(0, 'a', 7);
    expect(last.nothingSince(0, 'a', 6)).toBe(false);
  });

  it('past its bound it forgets the keys not written lately and knows nothing before where the kept ones begin', () => {
    const last = new LastRecords(4); // generations of 2 keys
    last.start(0, 0);
    last.seen(0, 'a', 1);
    last.seen(0, 'b', 2); // a generation full: it becomes the older one
    last.seen(0, 'a', 3);
    last.seen(0, 'c', 4); // again: {a, b} dropped, b (last at 2) with it; the horizon moves to 3
    expect(last.nothingSince(0, 'b', 2)).toBe(false);
    expect(last.nothingSince(0, 'b', 3)).toBe(true);
    expect(last.nothingSince(0, 'a', 3)).toBe(false);
    expect(last.nothingSince(0, 'c', 5)).toBe(true);
    expect(last.nothingSince(0, 'zzz', 1)).toBe(false);
  });
});
