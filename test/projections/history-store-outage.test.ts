// Issue 10 (resources stay bounded, faults are survived): while the history store refuses writes
// (ClickHouse down), the history projection keeps at most maxUnstoredRows persisted rows in memory;
// past that it refuses batches unapplied, the log delivers them again, and once the store takes
// writes again every message is stored exactly once.
import { describe, expect, it } from 'vitest';
import type { Checkpoint, LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/events.js';
import { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryEntry, HistoryQuery } from '../../projections/history/history-entry.js';
import type { HistoryStore, LogMark, PersistedEntry } from '../../projections/history/history-store.js';

const NOW = 1_900_000_000_000;

/** A store that refuses every write while `down`. */
class FlakyStore implements HistoryStore {
  readonly kind = 'flaky';
  down = true;
  readonly rows: PersistedEntry[] = [];
  checkpoint: Checkpoint = new Map();
  async init(): Promise<void> {}
  async write(rows: PersistedEntry[], checkpoint: Checkpoint): Promise<void> {
    if (this.down) throw new Error('store down');
    this.rows.push(...rows);
    this.checkpoint = checkpoint;
  }
  async loadCheckpoint(): Promise<Checkpoint> {
    return this.checkpoint;
  }
  async loadMarks(): Promise<LogMark[]> {
    return [];
  }
  async query(_q: HistoryQuery): Promise<HistoryEntry[]> {
    return [];
  }
  async dropExpired(): Promise<number> {
    return 0;
  }
  async close(): Promise<void> {}
}

const record = (offset: number): LogRecord => ({
  topic: 'messages',
  partition: 0,
  offset,
  key: 'app:persisted:c',
  timestamp: NOW + offset,
  value: encodeEvent({
    type: 'messages.published',
    appId: 'app',
    channel: 'persisted:c',
    transport: 'rest',
    messages: [{ id: `m${offset}:0`, timestamp: NOW + offset, data: `d${offset}` }],
  }),
});

describe('history projection while its store is down', () => {
  it('holds at most maxUnstoredRows rows, refuses later batches unapplied, and stores every message once when the store is back', async () => {
    const store = new FlakyStore();
    const history = new HistoryProjection({
      store,
      clock: { now: () => NOW + 100 },
      tailMs: 120_000,
      retentionOf: () => 24,
      flushIntervalMs: 60_000, // flushed by hand below
      maxUnstoredRows: 3,
    });
    await history.start();

    // What a log does with a refused batch: deliver it again later, in order.
    const log = Array.from({ length: 6 }, (_, i) => record(i));
    let next = 0;
    const deliver = (): boolean => {
      try {
        history.apply([log[next]]);
        next++;
        return true;
      } catch {
        return false;
      }
    };

    while (next < log.length && deliver());
    expect(next).toBe(3);
    await expect(history.flush()).rejects.toThrow('store down');
    expect(deliver()).toBe(false);
    // Refused means unapplied: not in the tail, not in the checkpoint.
    expect(history.applied().get(0)).toBe(3);
    expect(history.tail.query({ appId: 'app', channel: 'persisted:c', start: 0, end: NOW * 2, limit: 100, direction: 'forwards' })).toHaveLength(3);

    store.down = false;
    await history.flush();
    while (next < log.length) {
      expect(deliver()).toBe(true);
      if (next % 3 === 0) await history.flush();
    }
    await history.flush();
    expect(store.rows.map((r) => r.message.data)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(store.checkpoint.get(0)).toBe(6);
    await history.close();
  });
});
