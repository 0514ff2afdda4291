// The embedded log stores one SQLite row per partition per append (a segment). These tests reopen
// the file, so every read comes from SQLite rather than from the in-memory window.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from '../../src/stores/sqlite/driver.mjs';
import type { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { packSegment, scanSegment } from '../../src/log/embedded/segment.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import { Topics, type AppendRecord, type Log, type ScanResult } from '../../src/log/port.js';
import { partitionFor } from '../../src/log/partitioner.js';

const records = (from: number, count: number, key = 'k'): AppendRecord[] =>
  Array.from({ length: count }, (_, i) => ({ key, timestamp: 1000 + from + i, value: Buffer.from(`v${from + i}`) }));

/** What scan visits, as [offset, timestamp, value text] (the value copied out of the log's buffer). */
async function scanned(log: Log, partition: number, from: number, max: number): Promise<{ seen: [number, number, string][]; result: ScanResult }> {
  const seen: [number, number, string][] = [];
  const result = await log.scan!(Topics.messages, partition, from, max, (offset, timestamp, bytes, start, end) => {
    seen.push([offset, timestamp, Buffer.from(bytes.subarray(start, end)).toString()]);
  });
  return { seen, result };
}

describe('embedded log segments (one row per partition per append)', () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'log-segments-'));
    path = join(dir, 'log.db');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a segment is MessagePack [key, timestamp, value] triples, in an ArrayBuffer of its own (moved to the writer thread)', () => {
    const segment = packSegment([
      { key: 'app:chän', timestamp: 1_795_271_006_361, value: new Uint8Array([1, 2, 3]) },
      { key: '', timestamp: 0, value: new Uint8Array(70_000).fill(7) },
    ]);
    expect(segment.byteOffset).toBe(0);
    expect(segment.buffer.byteLength).toBe(segment.byteLength);
    const decoded = unpackValue(segment) as [string, number, Uint8Array][];
    expect(decoded.map(([k, ts, v]) => [k, ts, v.byteLength, v[0]])).toEqual([
      ['app:chän', 1_795_271_006_361, 3, 1],
      ['', 0, 70_000, 7],
    ]);
    expect(() => packSegment([{ key: 'k', timestamp: 1.5, value: new Uint8Array(0) }])).toThrow(/whole number/);
  });

  it('after a reopen, read() starts inside a segment and crosses into the next ones', async () => {
    const log = new EmbeddedLog({ path });
    await log.append(Topics.messages, records(0, 5));
    await log.append(Topics.messages, records(5, 5));
    await log.append(Topics.messages, records(10, 5));
    await log.close();

    const reopened = new EmbeddedLog({ path });
    const read = await reopened.read(Topics.messages, 0, 3, 9);
    expect(read.map((r) => r.offset)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(read.map((r) => Buffer.from(r.value).toString())).toEqual(['v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9', 'v10', 'v11']);
    expect(read[0]).toMatchObject({ topic: Topics.messages, partition: 0, key: 'k', timestamp: 1003 });
    expect(await reopened.read(Topics.messages, 0, 15, 10)).toEqual([]);
    expect(await reopened.endOffsets(Topics.messages)).toEqual(new Map([[0, 15]]));
    // Appends continue at the end offset the segments give.
    expect(await reopened.append(Topics.messages, records(15, 1))).toEqual([{ partition: 0, offset: 15 }]);
    await reopened.close();
  });

  it('one append to several partitions is one segment per partition, and a consumer sees every record once', async () => {
    const log = new EmbeddedLog({ path, partitions: 3 });
    const batch = ['a', 'b', 'c', 'd', 'e', 'f'].flatMap((key, k) => records(k * 10, 4, key));
    const positions = await log.append(Topics.messages, batch);
    await log.close();

    const db = new Database(path, { readonly: true });
    const segments = db.prepare('SELECT partition, first_offset, count FROM log_segments ORDER BY partition').all() as { partition: number; count: number }[];
    db.close();
    expect(segments.length).toBe(new Set(positions.map((p) => p.partition)).size);
    expect(segments.reduce((n, s) => n + s.count, 0)).toBe(batch.length);

    const reopened = new EmbeddedLog({ path, partitions: 3 });
    const seen: string[] = [];
    const sub = reopened.consume({ topic: Topics.messages, consumer: 't', from: new Map(), handle: (rs) => void seen.push(...rs.map((r) => Buffer.from(r.value).toString())) });
    await sub.caughtUp;
    await sub.stop();
    await reopened.close();
    expect(seen.sort()).toEqual(batch.map((r) => Buffer.from(r.value).toString()).sort());
  });

  it('retention deletes whole segments past it but keeps the newest of each partition', async () => {
    const log = new EmbeddedLog({ path, retentionMs: 1000 });
    await log.append(Topics.messages, records(0, 3)); // timestamps 1000..1002
    await log.append(Topics.messages, records(100, 3)); // 1100..1102
    expect(await log.enforceRetention(2101)).toBe(1);
    expect(await log.enforceRetention(1_000_000)).toBe(0); // the newest segment stays
    await log.close();
    const reopened = new EmbeddedLog({ path });
    expect(await reopened.endOffsets(Topics.messages)).toEqual(new Map([[0, 6]]));
    expect((await reopened.read(Topics.messages, 0, 0, 10)).map((r) => r.offset)).toEqual([3, 4, 5]);
    await reopened.close();
  });

  it('a consumer behind retention (a checkpoint older than it, at a start) goes on from the first segment kept, told of the loss (ConsumeOptions.lost) before the records after it; the loss is logged once and counted', async () => {
    const log = new EmbeddedLog({ path, retentionMs: 1000 });
    await log.append(Topics.messages, records(0, 3)); // timestamps 1000..1002
    await log.append(Topics.messages, records(100, 3)); // 1100..1102
    expect(await log.enforceRetention(2101)).toBe(1);
    await log.close();
    const lines: Record<string, unknown>[] = [];
    const reopened = new EmbeddedLog({ path, logger: { error: (obj, msg) => void lines.push({ ...obj, msg }) } });
    const events: string[] = [];
    const subscriptions = ['one', 'two'].map((consumer) =>
      reopened.consume({
        topic: Topics.messages,
        consumer,
        from: new Map([[0, 1]]),
        handle: (batch) => void events.push(...batch.map((r) => `${consumer} record ${r.offset}`)),
        lost: (p, next) => void events.push(`${consumer} lost ${p} ${next}`),
      }),
    );
    await Promise.all(subscriptions.map((s) => s.caughtUp));
    expect(events).toEqual(['one lost 0 3', 'one record 3', 'one record 4', 'one record 5', 'two lost 0 3', 'two record 3', 'two record 4', 'two record 5']);
    expect(lines).toEqual([expect.objectContaining({ topic: 'messages', partition: 0, from: 1, to: 3, records: 2, consumer: 'one', msg: expect.stringContaining('deleted (retention)') })]);
    expect(reopened.lostRecords()).toEqual([{ topic: 'messages', count: 2 }]);
    for (const s of subscriptions) await s.stop();
    await reopened.close();
  });

  it('retention deletes only from the start of a partition: a segment written after a clock went back is not cut out of the middle (the chain and offsets stay contiguous)', async () => {
    const log = new EmbeddedLog({ path, retentionMs: 1000 });
    await log.append(Topics.messages, [{ key: 'k', timestamp: 5000, value: Buffer.from('a') }]);
    await log.append(Topics.messages, [{ key: 'k', timestamp: 1000, value: Buffer.from('b') }]); // the clock went back
    await log.append(Topics.messages, [{ key: 'k', timestamp: 9000, value: Buffer.from('c') }]);
    expect(await log.enforceRetention(4000)).toBe(0); // 'b' is past it, 'a' before it is not
    expect((await log.read(Topics.messages, 0, 0, 10)).map((r) => r.offset)).toEqual([0, 1, 2]);
    expect(await log.enforceRetention(7000)).toBe(2);
    await log.close();
    const reopened = new EmbeddedLog({ path });
    expect((await reopened.read(Topics.messages, 0, 0, 10)).map((r) => r.offset)).toEqual([2]);
    await reopened.close();
  });

  it('retention runs on the writer thread a chunk at a time, between commits: an append made while it deletes thousands of rows commits before it ends', async () => {
    const expired = 5000;
    {
      const first = new EmbeddedLog({ path });
      await first.append(Topics.messages, records(0, 1));
      await first.close();
      const db = new Database(path);
      const stream = db.prepare(`SELECT stream FROM log_streams WHERE topic = 'messages'`).pluck().get() as number;
      const insert = db.prepare(`INSERT INTO log_segments (id, topic, partition, first_offset, count, last_ts, records) VALUES ((@stream << 44) + @offset, 'messages', 0, @offset, 1, @ts, @records)`);
      db.transaction(() => {
        for (let offset = 1; offset <= expired; offset++) insert.run({ stream, offset, ts: 1000 + offset, records: packSegment(records(offset, 1)) });
      })();
      db.close();
    }
    const log = new EmbeddedLog({ path, retentionMs: 1000 });
    const order: string[] = [];
    const retention = log.enforceRetention(1_000_000).then((n) => void order.push(`retention ${n}`));
    const append = log.append(Topics.messages, [{ key: 'k', timestamp: 2_000_000, value: Buffer.from('new') }]).then(([p]) => void order.push(`append ${p.offset}`));
    await Promise.all([retention, append]);
    // The append committed between two chunks: the row before it was no longer the newest when the
    // last chunk came, and went too (all 5001 expired rows); the append's stays.
    expect(order).toEqual([`append ${expired + 1}`, `retention ${expired + 1}`]);
    expect((await log.read(Topics.messages, 0, 0, 10)).map((r) => r.offset)).toEqual([expired + 1]);
    await log.close();
  });

  it('scan visits in place what read gives (offsets, timestamps, values), from any offset, at most the records asked, from SQLite and from the in-memory window', async () => {
    const log = new EmbeddedLog({ path });
    for (let from = 0; from < 30; from += 6) await log.append(Topics.messages, records(from, 6));
    const fromRead = async (l: Log, from: number, max: number): Promise<[number, number, string][]> =>
      (await l.read(Topics.messages, 0, from, max)).map((r) => [r.offset, r.timestamp, Buffer.from(r.value).toString()]);
    // From the window of recent records, then after a reopen from SQLite (segments of 6).
    for (const reopen of [false, true]) {
      const l = reopen ? new EmbeddedLog({ path }) : log;
      for (const [from, max] of [[0, 30], [0, 100], [4, 9], [6, 6], [11, 1], [29, 5], [30, 5], [3, 0]]) {
        const { seen, result } = await scanned(l, 0, from, max);
        expect(seen).toEqual(await fromRead(l, from, max));
        expect(result).toEqual({ count: seen.length, next: seen.length > 0 ? seen[seen.length - 1][0] + 1 : from, lastTimestamp: seen.length > 0 ? seen[seen.length - 1][1] : -Infinity });
      }
      expect((await scanned(l, 1, 0, 10)).seen).toEqual([]);
      await l.close();
    }
  });

  it('scan reads a segment written in any MessagePack form, not only the one the log writes (the general decoder reads it)', () => {
    const triples: [string, number, Uint8Array][] = [
      ['k', 1, Buffer.from('a')],
      ['kä', 2 ** 40, Buffer.from('bb')],
      ['', 3, new Uint8Array(0)],
    ];
    // The general encoder: the smallest forms (fixarray, fixstr, small integers), not the 32-bit ones.
    for (const bytes of [packValue(triples), packSegment(triples.map(([key, timestamp, value]) => ({ key, timestamp, value })))]) {
      // From before the segment too: a scan from offset 5 reads on through the segments after 5.
      for (const [from, max] of [[10, 3], [10, 2], [11, 5], [12, 1], [13, 1], [5, 3], [5, 2]]) {
        const seen: [number, number, string][] = [];
        const result: ScanResult = { count: 0, next: from, lastTimestamp: -Infinity };
        const full = scanSegment(bytes, 10, from, max, (o, t, b, s, e) => void seen.push([o, t, Buffer.from(b.subarray(s, e)).toString()]), result);
        const expected = triples.map(([, t, v], i) => [10 + i, t, Buffer.from(v).toString()] as [number, number, string]).filter(([o]) => o >= from).slice(0, max);
        expect(seen).toEqual(expected);
        expect(full).toBe(expected.length === max);
        expect(result.count).toBe(expected.length);
      }
    }
  });

  it('a log written one row per record (before segments) is migrated on open', async () => {
    const db = new Database(path);
    db.exec(`CREATE TABLE log_records (topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
      key TEXT NOT NULL, ts INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID`);
    db.exec(`CREATE TABLE log_meta (topic TEXT PRIMARY KEY, partitions INTEGER NOT NULL)`);
    db.prepare(`INSERT INTO log_meta VALUES ('messages', 1)`).run();
    const insert = db.prepare('INSERT INTO log_records VALUES (?, ?, ?, ?, ?, ?)');
    for (let i = 0; i < 4; i++) insert.run('messages', 0, i, `key${i}`, 500 + i, Buffer.from(`old${i}`));
    db.close();

    const log = new EmbeddedLog({ path });
    const read = await log.read(Topics.messages, 0, 1, 10);
    expect(read.map((r) => [r.offset, r.key, r.timestamp, Buffer.from(r.value).toString()])).toEqual([
      [1, 'key1', 501, 'old1'],
      [2, 'key2', 502, 'old2'],
      [3, 'key3', 503, 'old3'],
    ]);
    expect(await log.append(Topics.messages, records(0, 1))).toEqual([{ partition: 0, offset: 4 }]);
    await log.close();
  });

  it('a log written with the first segment layout (keyed by topic, partition and first offset) is migrated on open', async () => {
    const db = new Database(path);
    db.exec(`CREATE TABLE log_segments (topic TEXT NOT NULL, partition INTEGER NOT NULL, first_offset INTEGER NOT NULL,
      count INTEGER NOT NULL, last_ts INTEGER NOT NULL, records BLOB NOT NULL, PRIMARY KEY (topic, partition, first_offset)) WITHOUT ROWID`);
    db.exec(`CREATE TABLE log_meta (topic TEXT PRIMARY KEY, partitions INTEGER NOT NULL)`);
    db.prepare(`INSERT INTO log_meta VALUES ('messages', 2), ('presence', 1)`).run();
    const insert = db.prepare('INSERT INTO log_segments VALUES (?, ?, ?, ?, ?, ?)');
    const old = (topic: string, partition: number, from: number, count: number): void => {
      const rs = records(from, count, `${topic}${partition}`);
      insert.run(topic, partition, from, count, rs[rs.length - 1].timestamp, packSegment(rs));
    };
    old('messages', 0, 0, 3);
    old('messages', 0, 3, 2);
    old('messages', 1, 0, 4);
    old('presence', 0, 0, 1);
    db.close();

    const log = new EmbeddedLog({ path, partitions: 2 });
    expect(await log.endOffsets(Topics.messages)).toEqual(new Map([[0, 5], [1, 4]]));
    expect(await log.endOffsets(Topics.presence)).toEqual(new Map([[0, 1]]));
    const read = await log.read(Topics.messages, 0, 2, 10);
    expect(read.map((r) => [r.offset, r.key, Buffer.from(r.value).toString()])).toEqual([
      [2, 'messages0', 'v2'],
      [3, 'messages0', 'v3'],
      [4, 'messages0', 'v4'],
    ]);
    expect((await log.read(Topics.messages, 1, 0, 10)).map((r) => r.offset)).toEqual([0, 1, 2, 3]);
    // Appends go on after the migrated segments, and survive a reopen.
    const positions = await log.append(Topics.presence, records(1, 2, 'presence0'));
    expect(positions).toEqual([{ partition: 0, offset: 1 }, { partition: 0, offset: 2 }]);
    await log.close();

    const reopened = new EmbeddedLog({ path, partitions: 2 });
    expect((await reopened.read(Topics.presence, 0, 0, 10)).map((r) => Buffer.from(r.value).toString())).toEqual(['v0', 'v1', 'v2']);
    await reopened.close();
    const check = new Database(path, { readonly: true });
    const tables = check.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
    check.close();
    expect(tables).toEqual(['log_meta', 'log_segments', 'log_streams']);
  });

  it("a read stays within its stream: a partition's records never include another partition's or topic's", async () => {
    const log = new EmbeddedLog({ path, partitions: 4 });
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    for (let round = 0; round < 3; round++) {
      await log.append(Topics.messages, keys.flatMap((key) => records(round * 100, 2, key)));
      await log.append(Topics.presence, keys.flatMap((key) => records(round * 100 + 50, 1, key)));
    }
    await log.close();
    const reopened = new EmbeddedLog({ path, partitions: 4 });
    for (const topic of [Topics.messages, Topics.presence]) {
      const ends = await reopened.endOffsets(topic);
      let total = 0;
      for (const [partition, end] of ends) {
        const read = await reopened.read(topic, partition, 0, 1000);
        expect(read.map((r) => r.offset)).toEqual(Array.from({ length: end }, (_, i) => i));
        expect(read.every((r) => partitionFor(r.key, 4) === partition)).toBe(true);
        // presence values are v50, v150, v250; messages values never end in 50
        expect(read.every((r) => Buffer.from(r.value).toString().endsWith('50') === (topic === Topics.presence))).toBe(true);
        total += read.length;
      }
      expect(total).toBe(topic === Topics.messages ? 48 : 24);
    }
    await reopened.close();
  });

  it('commits in flight share a ring of memory with the writer thread; what does not fit goes in a buffer of its own; all of it commits intact', async () => {
    // A ring of 2 KB: appends of 1 to 40 records (about 20 to 900 bytes each) wrap around it, and
    // the larger ones, or those that find it full, take the other way.
    const log = new EmbeddedLog({ path, partitions: 3, writerRingBytes: 2048 });
    const appended: AppendRecord[] = [];
    const inFlight: Promise<unknown>[] = [];
    for (let i = 0; i < 120; i++) {
      const batch = Array.from({ length: 1 + ((i * 7) % 40) }, (_, j) => ({
        key: `key-${(i + j) % 5}-é`,
        timestamp: 1000 + i,
        value: Buffer.from(`a${i}.${j}:${'x'.repeat((i * 13 + j) % 17)}`),
      }));
      appended.push(...batch);
      inFlight.push(log.append(Topics.messages, batch));
      // Five commits in flight at all times: the oldest is answered while newer ones wait in the ring.
      if (inFlight.length === 5) await inFlight.shift();
    }
    await Promise.all(inFlight);
    await log.close();

    const reopened = new EmbeddedLog({ path, partitions: 3 });
    const read: string[] = [];
    for (const [partition, end] of await reopened.endOffsets(Topics.messages)) {
      const records = await reopened.read(Topics.messages, partition, 0, end + 1);
      expect(records.map((r) => r.offset)).toEqual(Array.from({ length: end }, (_, k) => k));
      read.push(...records.map((r) => `${r.key}|${r.timestamp}|${Buffer.from(r.value).toString()}`));
    }
    await reopened.close();
    expect(read.sort()).toEqual(appended.map((r) => `${r.key}|${r.timestamp}|${Buffer.from(r.value).toString()}`).sort());
  });

  it('when the writer thread dies, what is in flight and every later append fail (nothing unsynced is acknowledged), and close() returns', async () => {
    const log = new EmbeddedLog({ path });
    expect(await log.append(Topics.messages, records(0, 1))).toEqual([{ partition: 0, offset: 0 }]);
    const { worker } = (log as unknown as { writer: { worker: Worker } }).writer;
    await worker.terminate();
    await expect(log.append(Topics.messages, records(1, 1))).rejects.toThrow(/writer thread exited/);
    await expect(log.append(Topics.messages, records(2, 1))).rejects.toThrow(/failed earlier|writer thread exited/);
    await log.close();
    const reopened = new EmbeddedLog({ path });
    expect(await reopened.endOffsets(Topics.messages)).toEqual(new Map([[0, 1]]));
    await reopened.close();
  });

  it('two appends in flight: when the first fails to commit, the second fails too, leaving no gap; then the log reads its end again and takes appends', async () => {
    const a = new EmbeddedLog({ path });
    await a.append(Topics.messages, records(0, 1));
    const b = new EmbeddedLog({ path });
    expect(await b.endOffsets(Topics.messages)).toEqual(new Map([[0, 1]]));
    await a.append(Topics.messages, records(1, 1)); // offset 1, which b believes is free
    const failing = b.append(Topics.messages, records(2, 1)); // offset 1 again: the commit fails
    const after = b.append(Topics.messages, records(3, 1)); // offset 2: must not commit
    await expect(failing).rejects.toThrow(/UNIQUE|constraint/i);
    await expect(after).rejects.toThrow();
    // Both answered: b reads the end SQLite holds (a's commit) and appends after it.
    expect(await b.append(Topics.messages, records(4, 1))).toEqual([{ partition: 0, offset: 2 }]);
    await a.close();
    await b.close();
    const reopened = new EmbeddedLog({ path });
    expect(await reopened.endOffsets(Topics.messages)).toEqual(new Map([[0, 3]]));
    expect((await reopened.read(Topics.messages, 0, 0, 10)).map((r) => Buffer.from(r.value).toString())).toEqual(['v0', 'v1', 'v4']);
    await reopened.close();
  });

  // Issue 10, item 4: a full disk failed one commit and the log refused every append until a restart.
  it('after failed commits (a full disk, simulated by a trigger), appends are refused while commits are in flight, then the log recovers by itself with no gap and consumers see each committed record once', async () => {
    const log = new EmbeddedLog({ path, partitions: 2 });
    const seen: string[] = [];
    const sub = log.consume({ topic: Topics.messages, consumer: 'c', from: new Map(), handle: (rs) => void seen.push(...rs.map((r) => Buffer.from(r.value).toString())) });
    await log.append(Topics.messages, records(0, 2, 'a'));
    const fault = new Database(path);
    fault.exec(`CREATE TABLE fault (full INTEGER NOT NULL); INSERT INTO fault VALUES (1);
      CREATE TRIGGER full_disk BEFORE INSERT ON log_segments WHEN (SELECT full FROM fault) BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`);

    const first = log.append(Topics.messages, records(2, 2, 'a'));
    const second = log.append(Topics.messages, records(4, 1, 'b'));
    // Refused at once while `second` (offsets after the failed ones) is still in flight.
    const refusedAtOnce = first.catch(() => log.append(Topics.messages, records(5, 1, 'a')));
    await expect(first).rejects.toThrow(/embedded log write failed: .*disk is full/);
    await expect(refusedAtOnce).rejects.toThrow(/embedded log recovering from a failed write: .*disk is full/);
    await expect(second).rejects.toThrow(/disk is full/); // in the same transaction, or failed after it
    // Still full: the next append is tried, and fails like the first.
    await expect(log.append(Topics.messages, records(6, 1, 'a'))).rejects.toThrow(/disk is full/);

    fault.exec('UPDATE fault SET full = 0');
    const positions = await log.append(Topics.messages, [...records(7, 1, 'a'), ...records(8, 1, 'b')]);
    // Right after the committed ones: the failed offsets are used again.
    const [pa, pb] = [partitionFor('a', 2), partitionFor('b', 2)];
    expect(positions).toEqual([{ partition: pa, offset: 2 }, { partition: pb, offset: pa === pb ? 3 : 0 }]);
    expect(seen.sort()).toEqual(['v0', 'v1', 'v7', 'v8']);
    await sub.stop();
    await log.close();
    fault.close();

    const reopened = new EmbeddedLog({ path, partitions: 2 });
    const all: string[] = [];
    for (const [p, end] of await reopened.endOffsets(Topics.messages)) {
      const rs = await reopened.read(Topics.messages, p, 0, end + 1);
      expect(rs.map((r) => r.offset)).toEqual(Array.from({ length: end }, (_, k) => k));
      all.push(...rs.map((r) => Buffer.from(r.value).toString()));
    }
    expect(all.sort()).toEqual(['v0', 'v1', 'v7', 'v8']);
    await reopened.close();
  });

  // A record read from the in-memory window is the appended object itself; one read from SQLite
  // is a new Buffer with the same bytes.
  it('the in-memory window keeps a record until every running consumer has read it; later reads come from SQLite', async () => {
    const log = new EmbeddedLog({ path });
    const appended = records(0, 4);
    const fast: string[] = [];
    let releaseSlow!: () => void;
    const slowGate = new Promise<void>((r) => (releaseSlow = r));
    const slowSeen: string[] = [];
    const fastSub = log.consume({ topic: Topics.messages, consumer: 'fast', from: new Map(), handle: (rs) => void fast.push(...rs.map((r) => Buffer.from(r.value).toString())) });
    const slowSub = log.consume({
      topic: Topics.messages,
      consumer: 'slow',
      from: new Map(),
      handle: async (rs) => {
        await slowGate;
        slowSeen.push(...rs.map((r) => Buffer.from(r.value).toString()));
      },
    });
    await log.append(Topics.messages, appended);
    await expect.poll(() => fast.length).toBe(4);
    // The slow consumer has not read them yet: they are still the appended objects.
    expect((await log.read(Topics.messages, 0, 0, 4)).map((r) => r.value)).toEqual(appended.map((r) => r.value));
    expect((await log.read(Topics.messages, 0, 0, 4)).every((r, i) => r.value === appended[i].value)).toBe(true);

    releaseSlow();
    await expect.poll(() => slowSeen.length).toBe(4);
    await expect.poll(async () => (await log.read(Topics.messages, 0, 0, 1))[0].value === appended[0].value).toBe(false);
    const fromSqlite = await log.read(Topics.messages, 0, 0, 4);
    expect(fromSqlite.map((r) => [r.offset, r.key, r.timestamp, Buffer.from(r.value).toString()])).toEqual(
      appended.map((r, i) => [i, r.key, r.timestamp, Buffer.from(r.value).toString()]),
    );

    // A consumer that starts now reads them (from SQLite), then the next append from the window.
    const late: string[] = [];
    const lateSub = log.consume({ topic: Topics.messages, consumer: 'late', from: new Map(), handle: (rs) => void late.push(...rs.map((r) => Buffer.from(r.value).toString())) });
    await lateSub.caughtUp;
    await log.append(Topics.messages, records(4, 1));
    await expect.poll(() => late).toEqual(['v0', 'v1', 'v2', 'v3', 'v4']);

    // With no consumer running, the window keeps what it has.
    await Promise.all([fastSub.stop(), slowSub.stop(), lateSub.stop()]);
    const kept = records(5, 1);
    await log.append(Topics.messages, kept);
    expect((await log.read(Topics.messages, 0, 5, 1))[0].value).toBe(kept[0].value);
    await log.close();
  });

  it('the in-memory window is bounded in bytes, all partitions together: a consumer that waits (a webhook target that does not answer) pins at most windowBytes of records, and reads the rest from SQLite', async () => {
    const windowBytes = 1024 * 1024;
    const log = new EmbeddedLog({ path, partitions: 2, windowBytes });
    const value = (i: number) => Buffer.alloc(64 * 1024, i);
    const appended: AppendRecord[] = Array.from({ length: 64 }, (_, i) => ({ key: `k${i}`, timestamp: 1000 + i, value: value(i) }));
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const seen: number[] = [];
    const stuck = log.consume({ topic: Topics.messages, consumer: 'stuck', from: new Map(), handle: async (rs) => {
      await gate;
      seen.push(...rs.map((r) => r.value[0]));
    } });
    for (let i = 0; i < appended.length; i += 4) await log.append(Topics.messages, appended.slice(i, i + 4));
    // Records still the appended objects are the window's; the rest come from SQLite, equal.
    let inWindow = 0;
    for (const p of [0, 1]) {
      const end = (await log.endOffsets(Topics.messages)).get(p)!;
      for (let offset = 0; offset < end; offset++) {
        const [r] = await log.read(Topics.messages, p, offset, 1);
        const original = appended.find((a) => a.key === r.key)!;
        expect(Buffer.from(r.value).equals(original.value)).toBe(true);
        if (r.value === original.value) inWindow++;
      }
    }
    // 4 MiB appended; before the bound all 64 stayed (16 a MiB).
    expect(inWindow).toBeGreaterThan(0);
    expect(inWindow * 64 * 1024).toBeLessThanOrEqual(windowBytes);
    open();
    await expect.poll(() => seen.length).toBe(64);
    expect(new Set(seen).size).toBe(64);
    await stuck.stop();
    await log.close();
  });

  it("a consumer's batch ends at the record that reaches batchBytes (one record at least), from the window and from SQLite", async () => {
    const batchBytes = 200 * 1024;
    const big = (i: number, kb: number): AppendRecord => ({ key: 'k', timestamp: 1000 + i, value: Buffer.alloc(kb * 1024, i) });
    const appended = [...Array.from({ length: 10 }, (_, i) => big(i, 64)), big(10, 300), big(11, 64)];
    const batchesOf = async (log: EmbeddedLog) => {
      const batches: number[][] = [];
      const sub = log.consume({ topic: Topics.messages, consumer: 'c', from: new Map(), handle: (rs) => void batches.push(rs.map((r) => r.value[0])) });
      await expect.poll(() => batches.flat().length).toBe(appended.length);
      await sub.stop();
      return batches;
    };
    // 64 KiB records: four reach 200 KiB; the 300 KiB one goes alone.
    const expected = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10], [11]];
    const log = new EmbeddedLog({ path, batchBytes });
    await log.append(Topics.messages, appended);
    expect(await batchesOf(log)).toEqual(expected); // from the window (no consumer has read them)
    await log.close();
    const reopened = new EmbeddedLog({ path, batchBytes });
    expect(await batchesOf(reopened)).toEqual(expected); // from SQLite
    await reopened.close();
  });
});
