// Issue 22, item 6 (ARCHITECTURE, Retention: two minutes of every channel's history in memory): a
// start rebuilds the in-memory tail from the log, reading back from a mark just older than the
// window in every partition, not from the start of a partition.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { offsetAtTime } from '../../src/log/offset-at-time.js';
import { Topics, type Topic } from '../../src/log/port.js';
import type { Checkpoint, LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryEntry, HistoryQuery } from '../../projections/history/history-entry.js';
import type { HistoryStore, LogMark, PersistedEntry } from '../../projections/history/history-store.js';

const T0 = 1_900_000_000_000;
const TAIL_MS = 120_000;

/** A store in memory that keeps what a restart reads back: checkpoint and marks. */
class MemoryStore implements HistoryStore {
  readonly kind = 'memory';
  checkpoint: Checkpoint = new Map();
  marks: LogMark[] = [];
  async init(): Promise<void> {}
  async write(_rows: PersistedEntry[], checkpoint: Checkpoint, marks: LogMark[]): Promise<void> {
    this.checkpoint = new Map([...this.checkpoint, ...checkpoint]);
    this.marks = [...marks];
  }
  async loadCheckpoint(): Promise<Checkpoint> {
    return new Map(this.checkpoint);
  }
  async loadMarks(): Promise<LogMark[]> {
    return [...this.marks];
  }
  async query(_q: HistoryQuery): Promise<HistoryEntry[]> {
    return [];
  }
  async dropExpired(): Promise<number> {
    return 0;
  }
  async close(): Promise<void> {}
}

const record = (partition: number, offset: number, timestamp: number, channel: string): LogRecord => ({
  topic: 'messages',
  partition,
  offset,
  key: `app:${channel}`,
  timestamp,
  value: encodeEvent({ type: 'messages.published', appId: 'app', channel, transport: 'rest', messages: [{ id: `p${partition}-${offset}:0`, timestamp, data: 'x' }] }),
});

describe('history projection: the in-memory tail after a restart', () => {
  it('reads back every partition from a mark just older than the window (marks are per partition)', async () => {
    const store = new MemoryStore();
    let now = T0;
    const clock = { now: () => now };
    const first = new HistoryProjection({ store, clock, tailMs: TAIL_MS, retentionOf: () => undefined, flushIntervalMs: 60_000 });
    await first.start();
    // Ten minutes of two channels on two partitions, a batch of each every 500 ms; a fetch hands
    // partition 0's batch over first, then partition 1's (as kafkajs does).
    const minutes = 10;
    for (let i = 0; i < minutes * 120; i++) {
      now = T0 + i * 500;
      first.apply([record(0, i, now, 'pf-a')]);
      first.apply([record(1, i, now, 'pf-b')]);
    }
    await first.close();

    now += 1_000;
    const second = new HistoryProjection({ store, clock, tailMs: TAIL_MS, retentionOf: () => undefined, flushIntervalMs: 60_000 });
    const from = await second.start();
    // The first batch inside the window; read back from at most a few seconds before it.
    const horizon = (now - TAIL_MS - T0) / 500;
    const end = minutes * 120;
    for (const partition of [0, 1]) {
      const start = from.get(partition) ?? 0;
      expect(start, `partition ${partition}`).toBeLessThanOrEqual(horizon);
      expect(start, `partition ${partition}`).toBeGreaterThanOrEqual(horizon - 10);
    }
    // Replaying from there gives both channels their whole window back.
    for (let i = Math.min(...from.values()); i < end; i++) {
      for (const [partition, channel] of [[0, 'pf-a'], [1, 'pf-b']] as const) {
        if (i >= (from.get(partition) ?? 0)) second.apply([record(partition, i, T0 + i * 500, channel)]);
      }
    }
    for (const channel of ['pf-a', 'pf-b']) {
      const held = second.tail.query({ appId: 'app', channel, start: now - TAIL_MS, end: now, limit: 1000, direction: 'forwards' });
      expect(held.length, channel).toBe(end - horizon);
    }
    await second.close();
  });

  it('reads a partition with no mark from its offset of the window\'s start (less a slack), found in the log, not from 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tail-no-mark-'));
    const log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 1 });
    try {
      // Ten minutes of one channel, a message every 500 ms; the store holds them all (a
      // checkpoint at the end) but lost its marks.
      const minutes = 10;
      const count = minutes * 120;
      for (let i = 0; i < count; i++) {
        const r = record(0, i, T0 + i * 500, 'pf-a');
        await log.append(Topics.messages, [{ key: r.key, timestamp: r.timestamp, value: r.value }]);
      }
      const store = new MemoryStore();
      store.checkpoint = new Map([[0, count]]);
      const now = T0 + minutes * 60_000;
      let reads = 0;
      const counted = { read: (...a: Parameters<EmbeddedLog['read']>) => (reads++, log.read(...a)), endOffsets: (t: Topic) => log.endOffsets(t) };
      const history = new HistoryProjection({
        store,
        clock: { now: () => now },
        tailMs: TAIL_MS,
        retentionOf: () => undefined,
        flushIntervalMs: 60_000,
        offsetAt: (partition, timestamp) => offsetAtTime(counted, Topics.messages, partition, timestamp),
      });
      const from = await history.start();
      // The window starts 2 minutes back, the read 30 s before that: at 7.5 minutes, offset 900.
      expect(from.get(0)).toBe((minutes * 60_000 - TAIL_MS - 30_000) / 500);
      expect(reads).toBeLessThan(2 * Math.log2(count) + 2);
      history.apply(await log.read(Topics.messages, 0, from.get(0)!, count));
      const kept = history.tail.query({ appId: 'app', channel: 'pf-a', start: 0, end: Number.MAX_SAFE_INTEGER, limit: 10_000, direction: 'forwards' });
      expect(kept.filter((e) => e.message.timestamp >= now - TAIL_MS)).toHaveLength(TAIL_MS / 500);
    } finally {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
