// One contract for the HistoryStore port, run against the SQLite and ClickHouse adapters.
import { afterEach, describe, expect, it } from 'vitest';
import type { StoredMessage } from '../../src/domain/message.js';
import type { HistoryEntry, HistoryQuery } from '../../projections/history/history-entry.js';
import { serialOf } from '../../projections/history/history-entry.js';
import type { HistoryStore, LogMark, PersistedEntry } from '../../projections/history/history-store.js';

export interface HistoryStoreHarness {
  /** Opens a store on this harness's tables (again, after a restart), for the given consumer. */
  open(consumer?: string): Promise<HistoryStore>;
  /** Closes every store opened and removes what the harness created. */
  cleanup(): Promise<void>;
}

const T0 = Date.UTC(2030, 0, 10, 12, 0, 0);
const HOUR = 3600_000;

function entry(appId: string, channel: string, offset: number, index: number, timestamp: number, message: Partial<StoredMessage> = {}, retentionHours = 24): PersistedEntry {
  return {
    appId,
    channel,
    serial: serialOf(offset, index),
    partition: 2,
    retentionHours,
    message: { id: `id-${offset}:${index}`, timestamp, name: 'event', data: `data-${offset}-${index}`, ...message },
  };
}

const query = (q: Partial<HistoryQuery> & Pick<HistoryQuery, 'appId' | 'channel'>): HistoryQuery => ({
  start: 0,
  end: Number.MAX_SAFE_INTEGER,
  limit: 100,
  direction: 'forwards',
  ...q,
});

/** Marks in a stable order: the port does not fix one. */
const sorted = (marks: LogMark[]): LogMark[] => [...marks].sort((a, b) => a.partition - b.partition || a.offset - b.offset);

const serials = (entries: HistoryEntry[]): number[] => entries.map((e) => e.serial);

export function historyStoreContract(name: string, makeHarness: () => Promise<HistoryStoreHarness>): void {
  describe(`HistoryStore contract: ${name}`, () => {
    let harness: HistoryStoreHarness | undefined;
    const open = async (consumer?: string): Promise<HistoryStore> => {
      harness ??= await makeHarness();
      const store = await harness.open(consumer);
      await store.init();
      return store;
    };

    afterEach(async () => {
      await harness?.cleanup();
      harness = undefined;
    });

    // 20 messages on one channel, one per second, two per log record.
    const channelRows = (appId = 'app1', channel = 'room'): PersistedEntry[] =>
      Array.from({ length: 20 }, (_, i) => entry(appId, channel, 100 + Math.floor(i / 2), i % 2, T0 + i * 1000));

    it('queries forwards and backwards, with an after-cursor, a limit and time bounds', async () => {
      const store = await open();
      const rows = channelRows();
      await store.write(rows, new Map([[2, 110]]), []);
      const all = serials(rows);

      expect(serials(await store.query(query({ appId: 'app1', channel: 'room' })))).toEqual(all);
      expect(serials(await store.query(query({ appId: 'app1', channel: 'room', direction: 'backwards' })))).toEqual([...all].reverse());

      // pages of 6, forwards then backwards, each continuing after the last serial seen
      const forwards: number[] = [];
      let after: number | undefined;
      for (;;) {
        const page = await store.query(query({ appId: 'app1', channel: 'room', limit: 6, after }));
        forwards.push(...serials(page));
        if (page.length < 6) break;
        after = page.at(-1)!.serial;
      }
      expect(forwards).toEqual(all);
      const backwards: number[] = [];
      after = undefined;
      for (;;) {
        const page = await store.query(query({ appId: 'app1', channel: 'room', limit: 6, after, direction: 'backwards' }));
        backwards.push(...serials(page));
        if (page.length < 6) break;
        after = page.at(-1)!.serial;
      }
      expect(backwards).toEqual([...all].reverse());

      // inclusive time bounds
      const window = await store.query(query({ appId: 'app1', channel: 'room', start: T0 + 5000, end: T0 + 9000 }));
      expect(window.map((e) => e.message.timestamp)).toEqual([5, 6, 7, 8, 9].map((s) => T0 + s * 1000));
      const latest3 = await store.query(query({ appId: 'app1', channel: 'room', start: T0 + 5000, end: T0 + 9000, direction: 'backwards', limit: 3 }));
      expect(latest3.map((e) => e.message.timestamp)).toEqual([9, 8, 7].map((s) => T0 + s * 1000));
      expect(await store.query(query({ appId: 'app1', channel: 'room', start: T0 + 30_000 }))).toEqual([]);
    });

    it('returns messages as written', async () => {
      const store = await open();
      const bytes = Uint8Array.from([0, 1, 2, 254, 255]);
      const written = [
        entry('app1', 'kinds', 1, 0, T0, { data: 'text with ünïcødé 😀 and \'quotes\' \\ and \n newline' }),
        entry('app1', 'kinds', 1, 1, T0, { data: bytes, encoding: 'cipher' }),
        entry('app1', 'kinds', 1, 2, T0, { data: { nested: [1, 'two', { three: null }] }, clientId: 'c1', connectionId: 'k1', extras: { headers: { a: 'b' } } }),
        entry('app1', 'kinds', 1, 3, T0, { data: undefined, name: undefined }),
      ];
      await store.write(written, new Map(), []);
      const read = await store.query(query({ appId: 'app1', channel: 'kinds' }));
      expect(read).toHaveLength(4);
      for (const [i, e] of read.entries()) {
        const { retentionHours: _r, ...expected } = written[i];
        expect(e.appId).toBe(expected.appId);
        expect(e.channel).toBe(expected.channel);
        expect(e.serial).toBe(expected.serial);
        expect(e.partition).toBe(expected.partition);
        const { data, ...rest } = e.message;
        const { data: expectedData, ...expectedRest } = expected.message;
        expect(rest).toEqual(JSON.parse(JSON.stringify(expectedRest)));
        if (expectedData instanceof Uint8Array) expect(Buffer.from(data as Uint8Array).equals(Buffer.from(expectedData))).toBe(true);
        else expect(data).toEqual(expectedData);
      }
    });

    it('keeps one row per (app, channel, serial) when rows are written again (replay)', async () => {
      const store = await open();
      const rows = channelRows();
      await store.write(rows.slice(0, 12), new Map([[2, 106]]), []);
      // a crash before the checkpoint: the next run writes the same rows again, and more
      await store.write(rows, new Map([[2, 110]]), []);
      await store.write(rows.slice(5, 8), new Map([[2, 110]]), []);
      const got = await store.query(query({ appId: 'app1', channel: 'room' }));
      expect(serials(got)).toEqual(serials(rows));
      const page = await store.query(query({ appId: 'app1', channel: 'room', limit: 5, direction: 'backwards' }));
      expect(serials(page)).toEqual(serials(rows).reverse().slice(0, 5));
    });

    it('stores the checkpoint and marks per partition; the latest write of a partition wins, the others keep theirs, and survives a restart', async () => {
      const store = await open();
      expect(await store.loadCheckpoint()).toEqual(new Map());
      expect(await store.loadMarks()).toEqual([]);

      const marks1: LogMark[] = [
        { partition: 0, offset: 10, timestamp: T0 },
        { partition: 1, offset: 4, timestamp: T0 + 1000 },
      ];
      await store.write([], new Map([[0, 10], [1, 4]]), marks1);
      expect(await store.loadCheckpoint()).toEqual(new Map([[0, 10], [1, 4]]));
      expect(sorted(await store.loadMarks())).toEqual(sorted(marks1));

      const marks2: LogMark[] = [{ partition: 0, offset: 25, timestamp: T0 + 5000 }];
      await store.write(channelRows().slice(0, 2), new Map([[0, 25], [2, 101]]), marks2);
      // partitions missing from a checkpoint keep their offsets and marks
      const kept = [...marks2, marks1[1]];
      expect(await store.loadCheckpoint()).toEqual(new Map([[0, 25], [1, 4], [2, 101]]));
      expect(sorted(await store.loadMarks())).toEqual(sorted(kept));

      const reopened = await open();
      expect(await reopened.loadCheckpoint()).toEqual(new Map([[0, 25], [1, 4], [2, 101]]));
      expect(sorted(await reopened.loadMarks())).toEqual(sorted(kept));
      await reopened.write([], new Map([[1, 9]]), []);
      expect(await reopened.loadCheckpoint()).toEqual(new Map([[0, 25], [1, 9], [2, 101]]));
      expect(await reopened.loadMarks()).toEqual(marks2);
    });

    it('keeps the progress of each consumer apart', async () => {
      const history = await open('history');
      const other = await open('other');
      await history.write([], new Map([[0, 5]]), [{ partition: 0, offset: 5, timestamp: T0 }]);
      await other.write([], new Map([[0, 99]]), []);
      expect(await history.loadCheckpoint()).toEqual(new Map([[0, 5]]));
      expect(await history.loadMarks()).toEqual([{ partition: 0, offset: 5, timestamp: T0 }]);
      expect(await other.loadCheckpoint()).toEqual(new Map([[0, 99]]));
      expect(await other.loadMarks()).toEqual([]);
    });

    it('keeps channels and apps apart, whatever their names hold', async () => {
      const store = await open();
      const names = ['room', 'room2', "it's", 'back\\slash', 'new\nline', 'nul\0byte', '日本語 😀', "x' OR '1'='1", '%', '_'];
      const rows: PersistedEntry[] = [];
      for (const [i, channel] of names.entries()) {
        rows.push(entry('app1', channel, 1, 0, T0 + i, { data: `app1/${channel}` }));
        rows.push(entry('app2', channel, 1, 0, T0 + i, { data: `app2/${channel}` }));
      }
      await store.write(rows, new Map(), []);
      for (const channel of names) {
        for (const appId of ['app1', 'app2']) {
          const got = await store.query(query({ appId, channel }));
          expect(got.map((e) => e.message.data)).toEqual([`${appId}/${channel}`]);
          expect(got[0].channel).toBe(channel);
          expect(got[0].appId).toBe(appId);
        }
      }
      expect(await store.query(query({ appId: 'app3', channel: 'room' }))).toEqual([]);
      expect(await store.query(query({ appId: 'app1', channel: 'ro' }))).toEqual([]);
    });

    it('dropExpired drops only the days that are fully past', async () => {
      const store = await open();
      const now = T0; // 2030-01-10 12:00 UTC
      const rows = [
        // expires on 2030-01-08 and 2030-01-09: both days are over
        entry('app1', 'r', 1, 0, now - 3 * 24 * HOUR, {}, 24),
        entry('app1', 'r', 2, 0, now - 2 * 24 * HOUR, {}, 24),
        entry('app1', 'r', 3, 0, now - 2 * 24 * HOUR + HOUR, {}, 24),
        // expires today (2030-01-10) and later: kept
        entry('app1', 'r', 4, 0, now - 24 * HOUR, {}, 24),
        entry('app1', 'r', 5, 0, now - HOUR, {}, 72),
        entry('app1', 'r', 6, 0, now, {}, 24),
      ];
      await store.write(rows, new Map(), []);
      expect(await store.dropExpired(now)).toBe(2);
      expect(serials(await store.query(query({ appId: 'app1', channel: 'r' })))).toEqual([4, 5, 6].map((o) => serialOf(o, 0)));
      expect(await store.dropExpired(now)).toBe(0);
      // a day later, today's partition goes too
      expect(await store.dropExpired(now + 24 * HOUR)).toBe(1);
      expect(serials(await store.query(query({ appId: 'app1', channel: 'r' })))).toEqual([5, 6].map((o) => serialOf(o, 0)));
    });
  });
}
