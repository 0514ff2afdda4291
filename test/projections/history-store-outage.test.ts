// Issue 10 (resources stay bounded, faults are survived): while the history store refuses writes
// (ClickHouse down), the history projection keeps at most maxUnstoredRows persisted rows in memory;
// past that it refuses batches unapplied, the log delivers them again, and once the store takes
// writes again every message is stored exactly once.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters } from '../../src/service.js';
import { basic, removeDir, startTestService } from '../helpers/service.js';
import type { Checkpoint, LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
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

/**
 * What a log does with a batch the projection refuses: delivers it again later, in order.
 * `deliver()` hands on the next record and says whether it was taken; `next` counts those taken.
 */
function redelivering(history: HistoryProjection, records: LogRecord[]) {
  const log = {
    next: 0,
    get done(): boolean {
      return log.next >= records.length;
    },
    deliver(): boolean {
      try {
        history.apply([records[log.next]]);
        log.next++;
        return true;
      } catch {
        return false;
      }
    },
  };
  return log;
}

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
    const log = redelivering(history, Array.from({ length: 6 }, (_, i) => record(i)));

    while (!log.done && log.deliver());
    expect(log.next).toBe(3);
    await expect(history.flush()).rejects.toThrow('store down');
    expect(log.deliver()).toBe(false);
    // Refused means unapplied: not in the tail, not in the checkpoint.
    expect(history.applied().get(0)).toBe(3);
    expect(history.tail.query({ appId: 'app', channel: 'persisted:c', start: 0, end: NOW * 2, limit: 100, direction: 'forwards' })).toHaveLength(3);

    store.down = false;
    await history.flush();
    while (!log.done) {
      expect(log.deliver()).toBe(true);
      if (log.next % 3 === 0) await history.flush();
    }
    await history.flush();
    expect(store.rows.map((r) => r.message.data)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(store.checkpoint.get(0)).toBe(6);
    await history.close();
  });

  it('holds at most maxUnstoredBytes of large messages, fewer rows than maxUnstoredRows, and stores every one once when the store is back', async () => {
    const store = new FlakyStore();
    const big = (offset: number): LogRecord => {
      const r = record(offset);
      return { ...r, value: encodeEvent({ type: 'messages.published', appId: 'app', channel: 'persisted:c', transport: 'rest', messages: [{ id: `m${offset}:0`, timestamp: NOW + offset, data: `d${offset}:${'x'.repeat(60_000)}` }] }) };
    };
    const history = new HistoryProjection({ store, clock: { now: () => NOW + 100 }, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000, maxUnstoredRows: 1000, maxUnstoredBytes: 200_000 });
    await history.start();
    const log = redelivering(history, Array.from({ length: 8 }, (_, i) => big(i)));
    while (!log.done && log.deliver());
    // 60 KB each: the fourth passes 200,000 bytes, and the fifth is refused.
    expect(log.next).toBe(4);
    expect(history.unstoredBytes).toBeGreaterThanOrEqual(200_000);
    await expect(history.flush()).rejects.toThrow('store down');
    expect(history.unstoredBytes).toBeGreaterThanOrEqual(200_000);
    expect(log.deliver()).toBe(false);
    store.down = false;
    await history.flush();
    expect(history.unstoredBytes).toBe(0);
    while (!log.done) {
      expect(log.deliver()).toBe(true);
      await history.flush();
    }
    expect(store.rows.map((r) => String(r.message.data).split(':')[0])).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7']);
    await history.close();
  });
});

describe('rows of a write in flight (a store that does not answer)', () => {
  it('counts them as unstored (GET /metrics cm_store_unstored_rows) and within maxUnstoredRows until the write settles', async () => {
    const store = new FlakyStore();
    let answer: (() => void) | undefined;
    store.write = (rows: PersistedEntry[], checkpoint: Checkpoint) =>
      new Promise<void>((resolve) => {
        answer = () => {
          store.rows.push(...rows);
          store.checkpoint = checkpoint;
          resolve();
        };
      });
    const history = new HistoryProjection({ store, clock: { now: () => NOW + 100 }, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000, maxUnstoredRows: 3 });
    await history.start();
    const log = redelivering(history, Array.from({ length: 5 }, (_, i) => record(i)));
    expect(log.deliver() && log.deliver()).toBe(true);
    const flushed = history.flush();
    // The two rows are on their way to the store, not in it.
    expect(history.unstored).toBe(2);
    expect(log.deliver()).toBe(true);
    expect(history.unstored).toBe(3);
    // Three held (two of them in flight): the bound is reached.
    expect(log.deliver()).toBe(false);
    answer!();
    await flushed;
    expect(history.unstored).toBe(1);
    while (!log.done) expect(log.deliver()).toBe(true);
    const last = history.flush();
    answer!();
    await last;
    expect(history.unstored).toBe(0);
    expect(store.rows.map((r) => r.message.data)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4']);
  });
});

describe('history of every channel while the history store is down (issue 22, item 6)', () => {
  it('stores a message the tail took while the store was behind once, and a repeat of its id not at all', async () => {
    const store = new FlakyStore();
    const history = new HistoryProjection({ store, clock: { now: () => NOW + 100 }, tailMs: 120_000, retentionOf: () => 24, flushIntervalMs: 60_000, maxUnstoredRows: 3 });
    await history.start();
    const withId = (offset: number, id: string): LogRecord => {
      const r = record(offset);
      return { ...r, value: encodeEvent({ type: 'messages.published', appId: 'app', channel: 'persisted:c', transport: 'rest', clientIds: true, messages: [{ id, timestamp: NOW + offset, data: `d${offset}` }] }) };
    };
    const log = [record(0), record(1), record(2), withId(3, 'client-1'), withId(4, 'client-1'), withId(5, 'client-2')];
    for (let i = 0; i < 3; i++) history.apply([log[i]]);
    expect(() => history.apply([log[3]])).toThrow('behind');
    // What the service's follower does meanwhile.
    history.followTail(log.slice(3));
    const tail = () => history.tail.query({ appId: 'app', channel: 'persisted:c', start: 0, end: NOW * 2, limit: 100, direction: 'forwards' }).map((e) => e.message.data);
    expect(tail()).toEqual(['d0', 'd1', 'd2', 'd3', 'd5']);
    expect(history.applied().get(0)).toBe(3);

    store.down = false;
    await history.flush();
    for (const r of log.slice(3)) history.apply([r]);
    await history.flush();
    expect(store.rows.map((r) => r.message.data)).toEqual(['d0', 'd1', 'd2', 'd3', 'd5']);
    expect(tail()).toEqual(['d0', 'd1', 'd2', 'd3', 'd5']);
    await history.close();
  });

  it('serves a channel without persistence its recent messages while the projection refuses batches for the store', async () => {
    // 1,000 persisted rows fill what the projection holds for a store that refuses writes.
    const ts = await startTestService(
      { MAX_UNSTORED_ROWS: '1000', APPS_FILE: appsFile() },
      {
        adapters: (dataDir) => {
          const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' }));
          return { ...adapters, historyStore: refusing(adapters.historyStore) };
        },
      },
    );
    const auth = basic(KEY);
    const post = async (channel: string, body: unknown): Promise<void> => {
      const res = await ts.service.app.inject({ method: 'POST', url: `/channels/${encodeURIComponent(channel)}/messages`, headers: { authorization: auth }, payload: body as Record<string, unknown> });
      expect(res.statusCode, res.body).toBe(201);
    };
    const historyOf = async (channel: string): Promise<string[]> => {
      const res = await ts.service.app.inject({ url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards&limit=1000`, headers: { authorization: auth } });
      return (res.json() as { name: string }[]).map((m) => m.name);
    };
    try {
      for (let i = 0; i < 11; i++) await post('persisted:pf', Array.from({ length: 100 }, (_, j) => ({ name: `p${i}-${j}` })));
      const names = ['a', 'b', 'c'];
      for (const name of names) await post('pf', { name });
      await untilTrue('pf in history', async () => (await historyOf('pf')).length === names.length);
      expect(await historyOf('pf')).toEqual(names);
      // The persisted channel's recent messages too, from memory.
      expect(await historyOf('persisted:pf')).toHaveLength(1000);
      // The tail follower is a consumer like the others while it runs (GET /metrics, GET /ready),
      // and the refused batches and store writes are counted.
      const metrics = (await ts.service.app.inject({ url: '/metrics' })).body;
      expect(metrics).toMatch(/^cm_consumer_lag_records\{consumer="history-tail"\} \d+$/m);
      expect(Number(/^cm_consumer_batch_failures_total\{consumer="history"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
      expect(Number(/^cm_store_write_failures_total\{projection="history"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    } finally {
      await ts.close().catch(() => undefined);
      removeDir(ts.dataDir);
    }
  }, 30_000);
});

const KEY = 'outageapp.k1:outage-secret-outage-secret';

function appsFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cm-outage-apps-'));
  const file = join(dir, 'apps.json');
  writeFileSync(file, JSON.stringify({ apps: [{ appId: 'outageapp', keys: [{ key: KEY }], namespaces: [{ id: 'persisted', persisted: true }] }] }));
  return file;
}

/** The store, with every write refused (ClickHouse down). */
function refusing(store: HistoryStore): HistoryStore {
  return Object.assign(Object.create(store) as HistoryStore, {
    write: async () => {
      throw new Error('store down');
    },
  });
}

async function untilTrue(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
