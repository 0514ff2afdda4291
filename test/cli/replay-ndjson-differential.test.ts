// The replay's transcoder (src/audit/ndjson.ts) against its generic path (JSON.stringify(lineOf(record)),
// replay-scope.ts) over many publishes a seeded generator makes (deterministic): hostile strings
// (quotes, controls, NUL, U+2028, U+FEFF, lone surrogates, bytes that are not UTF-8) at the str8/16/32
// boundaries, binary data at the bin8/16/32 ones, numbers near 2^53 and 2^64, NaN, -0, nested
// extras, dates (an ext type), field orders the codec does not write, record keys of one FNV hash
// (the remembered prefixes). Every line must be the generic one byte for byte, parse as JSON and
// say the strings that went in; in memory, and from a real embedded log (its window and SQLite).
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NdjsonChunks, replayNdjson } from '../../src/audit/ndjson.js';
import { lineOf, replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { packValue } from '../../src/codec/msgpack.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import type { LogEvent } from '../../src/domain/events.js';

/** mulberry32: a small seeded generator, so every run makes the same records. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The record key hash the transcoder remembers prefixes by (FNV-1a, 31 bits), for keys that collide. */
function fnv31(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 1;
}

/** Two channels of app1 whose record keys have one hash (found by a search over numbered names). */
function collidingChannels(): [string, string] {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const channel = `ch-c${i}`;
    const h = fnv31(`app1:${channel}`);
    const other = seen.get(h);
    if (other !== undefined) return [other, channel];
    seen.set(h, channel);
  }
}

const PIECES = ['a', 'Z', ' ', '~', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u0001', '\u001f', '\u007f', '\u0080', 'é', '✓', '😀', '\u2028', '\u2029', '\uFEFF', '\uFFFD', '\uFFFF', '<', '>', '&', "'", ':'];
const LONE = ['\ud800', '\udfff', '\udc00\ud800'];
/** UTF-8 lengths at MessagePack's str boundaries (fixstr 31, str8 255, str16 65535) and either side. */
const BYTE_LENGTHS = [0, 1, 3, 4, 5, 30, 31, 32, 33, 199, 200, 201, 202, 254, 255, 256, 257, 1000, 65_535, 65_536, 70_000];

const utf8Length = (s: string): number => Buffer.byteLength(s);

function generator(seed: number) {
  const rnd = seeded(seed);
  const int = (n: number): number => Math.floor(rnd() * n);
  const pick = <T>(list: readonly T[]): T => list[int(list.length)];
  let big = 0;
  /** A string of hostile pieces, padded to one of the boundary lengths (in UTF-8 bytes) now and then. */
  const text = (lone = true): string => {
    let s = '';
    const pieces = int(4) === 0 ? int(40) : int(6);
    for (let i = 0; i < pieces; i++) s += lone && int(30) === 0 ? pick(LONE) : pick(PIECES);
    if (int(3) === 0) {
      let want = pick(BYTE_LENGTHS);
      // the longest only a few times a run: they cost the most
      if (want > 1000 && big++ > 12) want = 1000;
      const at = utf8Length(s);
      if (at < want) s += 'p'.repeat(want - at);
      else if (at > want) s = Buffer.from(s).subarray(0, want).toString('utf8').replace(/\uFFFD$/, '');
      if (int(3) === 0) s = `\uFEFF${s}`;
    }
    return s;
  };
  const NUMBERS = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 63, 2 ** 64, 2 ** 64 + 4096 * 2, 1.5, 0.1, 1e21, 1e-7, -1, -32, -33, -128, -129, -32_768, -32_769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53), -0, NaN, Infinity, -Infinity, 5e-324, Number.MAX_VALUE];
  const number = (): number => pick(NUMBERS);
  const bytes = (): Uint8Array => {
    let n = pick([0, 1, 2, 3, 4, 5, 255, 256, 65_535, 65_536, 70_000]);
    if (n > 1000 && big++ > 12) n = 300;
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = int(256);
    return b;
  };
  const value = (depth: number): unknown => {
    switch (int(depth > 3 ? 6 : 9)) {
      case 0:
        return text();
      case 1:
        return number();
      case 2:
        return int(2) === 0;
      case 3:
        return null;
      case 4:
        return bytes();
      case 5:
        return int(20) === 0 ? new Date(pick([0, 1_700_000_000_123, -1, 8.64e15])) : text(false);
      case 6:
        return Array.from({ length: int(4) }, () => value(depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        for (let i = int(5); i > 0; i--) o[int(4) === 0 ? String(int(100)) : text(false).slice(0, 20) || 'k'] = value(depth + 1);
        return o;
      }
    }
  };
  const message = (): Record<string, unknown> => {
    const m: Record<string, unknown> = {};
    if (int(8) !== 0) m.id = int(6) === 0 ? text() : `${text(false).slice(0, 10)}:${int(1000)}`;
    if (int(8) !== 0) m.timestamp = int(3) === 0 ? number() : 1_700_000_000_000 + int(1e9);
    if (int(2) === 0) m.name = int(10) === 0 ? value(3) : text();
    if (int(4) !== 0) {
      const d = int(5);
      m.data = d === 0 ? bytes() : d === 1 ? value(0) : text();
    }
    if (int(3) === 0) m.encoding = int(10) === 0 ? value(3) : pick(['', 'json', 'utf-8', 'json/utf-8', 'cipher+aes-128-cbc', text()]);
    if (int(2) === 0) m.clientId = int(10) === 0 ? value(3) : text();
    if (int(3) === 0) m.connectionId = int(10) === 0 ? value(3) : text();
    if (int(3) === 0) m.extras = int(4) === 0 ? value(1) : { headers: { a: text(), n: number() }, push: { notification: { title: text() } }, ref: { type: 'com.ably.reply', timeserial: text() } };
    if (int(6) === 0) m.action = int(3) === 0 ? value(3) : int(5);
    return m;
  };
  return { rnd, int, pick, text, message, value };
}

const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages', 'presence', 'app-events']), from: 0, to: Number.MAX_SAFE_INTEGER };

/** The publishes of one seed: events in event-codec's layout, now and then in another field order or with bytes that are not UTF-8. */
function publishes(seed: number, count: number): { records: LogRecord[]; events: LogEvent[]; notUtf8: Set<number> } {
  const g = generator(seed);
  const [c1, c2] = collidingChannels();
  const channels = ['ch-1', 'ch:with:colons', 'ch-é✓😀', `ch-${'x'.repeat(250)}`, c1, c2, ':', 'ch-\u2028'];
  const records: LogRecord[] = [];
  const events: LogEvent[] = [];
  const notUtf8 = new Set<number>();
  for (let i = 0; i < count; i++) {
    // runs of one channel and key name (the prefix remembered), then a change
    const channel = g.int(4) === 0 ? g.pick(channels) : channels[Math.floor(i / 7) % channels.length];
    const event: Record<string, unknown> = { type: 'messages.published', appId: 'app1', channel, transport: g.int(5) === 0 ? g.text() : g.pick(['rest', 'realtime']), messages: Array.from({ length: g.int(12) === 0 ? 16 + g.int(8) : g.int(4) }, () => g.message()) };
    if (g.int(4) === 0) event.clientIds = Array.from({ length: g.int(3) }, () => g.text());
    if (g.int(3) !== 0) event.keyName = g.int(10) === 0 ? g.value(3) : g.pick(['app1.k1', 'app1.k2', g.text()]);
    let value: Uint8Array;
    const form = g.int(12);
    if (form > 1 && form <= 5) event.transport = g.pick(['rest', 'realtime']);
    if (form === 0) {
      // another order of the event's fields (packValue writes an object's own order)
      const keys = Object.keys(event).sort(() => g.rnd() - 0.5);
      value = packValue(Object.fromEntries(keys.map((k) => [k, event[k]])));
    } else if (form <= 5) {
      // the messages last (the layout whose fields before them the transcoder remembers, and copies for the next publish of the key)
      const { messages, ...rest } = event;
      value = packValue({ ...rest, messages });
    } else value = encodeEvent(event as unknown as LogEvent);
    // a copy: values read from a log carry no decoded event
    const copy = Buffer.from(value);
    if (form === 1) {
      // a byte that is not UTF-8 in one of its longer strings (the log's own bytes, as a fault or another writer would leave them)
      const at = copy.indexOf('pppp');
      if (at >= 0) {
        copy[at + g.int(4)] = g.pick([0x80, 0xbf, 0xc0, 0xc3, 0xed, 0xf0, 0xf8, 0xff]);
        notUtf8.add(i);
      }
    }
    records.push({ topic: Topics.messages, partition: 1, offset: i, key: `app1:${channel}`, timestamp: 1_700_000_000_000 + i, value: new Uint8Array(copy) });
    events.push(event as unknown as LogEvent);
  }
  return { records, events, notUtf8 };
}

const generic = (records: LogRecord[]): string[] => records.map((r) => `${JSON.stringify(lineOf(r, request))}\n`);

/** The first line where the transcoded text and the generic lines part, for the failure's message. */
function firstDifference(got: string, want: string[]): string {
  const lines = got.split(/(?<=\n)/);
  for (let i = 0; i < Math.max(lines.length, want.length); i++) {
    if (lines[i] !== want[i]) {
      const a = lines[i] ?? '';
      const b = want[i] ?? '';
      let at = 0;
      while (at < a.length && a[at] === b[at]) at++;
      return `line ${i}, char ${at}: transcoded ${JSON.stringify(a.slice(Math.max(0, at - 60), at + 60))}, generic ${JSON.stringify(b.slice(Math.max(0, at - 60), at + 60))}`;
    }
  }
  return 'none';
}

/** The well-formed strings the generator put in messages' data, name and clientId, as the line says them. */
function stringsSaid(line: string, event: LogEvent): [unknown, unknown][] {
  const parsed = JSON.parse(line) as { event: { messages: Record<string, unknown>[] } };
  const pairs: [unknown, unknown][] = [];
  const messages = (event as unknown as { messages: Record<string, unknown>[] }).messages;
  messages.forEach((m, i) => {
    for (const field of ['data', 'name', 'clientId', 'connectionId', 'id']) {
      const v = m[field];
      if (typeof v === 'string' && (v as string & { isWellFormed(): boolean }).isWellFormed()) pairs.push([parsed.event.messages[i][field], v]);
    }
  });
  return pairs;
}

describe('replay NDJSON, differential: the transcoder against the generic path on generated publishes', () => {
  for (const seed of [1, 2, 3]) {
    it(`seed ${seed}: 1,500 publishes, in memory: every line the generic one, valid JSON, its strings the ones published`, () => {
      const { records, events, notUtf8 } = publishes(seed, 1500);
      const want = generic(records);
      const out = new NdjsonChunks();
      for (const r of records) expect(out.record(r, request)).toBe(true);
      const got = Buffer.concat(out.take()).toString('utf8');
      expect(got === want.join(''), firstDifference(got, want)).toBe(true);
      // most took the fast path (the others: dates, non-UTF-8 bytes, other orders)
      expect(out.fast).toBeGreaterThan(records.length / 2);
      const lines = got.split('\n');
      lines.pop();
      expect(lines.length).toBe(records.length);
      lines.forEach((line, i) => {
        // (a record given bytes that are not UTF-8 says what the decoder made of them)
        if (notUtf8.has(i)) return;
        expect(stringsSaid(line, events[i]).filter(([said, sent]) => said !== sent), `line ${i}`).toEqual([]);
      });
    });
  }

  it('seed 4: from a real embedded log (its window, then its SQLite segments read in place): the same bytes as the generic replay, every channel and one channel of two with one key hash', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-ndjson-diff-'));
    try {
      const path = join(dir, 'log.db');
      const { records } = publishes(4, 1200);
      const writer = new EmbeddedLog({ path, partitions: 3 });
      await writer.append(Topics.messages, records.map(({ key, timestamp, value }) => ({ key, timestamp, value })));
      const [c1] = collidingChannels();
      const requests: ScopeRequest[] = [request, { ...request, channels: { kind: 'channel', name: c1 } }, { ...request, channels: { kind: 'prefix', prefix: 'ch-é' } }];
      const compare = async (log: EmbeddedLog): Promise<void> => {
        for (const r of requests) {
          const want: string[] = [];
          for await (const { line } of replayScope(log, r)) want.push(`${JSON.stringify(line)}\n`);
          const chunks: Buffer[] = [];
          for await (const chunk of replayNdjson(log, r, undefined, true)) chunks.push(Buffer.from(chunk));
          const got = Buffer.concat(chunks).toString('utf8');
          expect(got === want.join(''), `${JSON.stringify(r.channels)}: ${firstDifference(got, want)}`).toBe(true);
          expect(want.length).toBeGreaterThan(0);
          for (const line of want) JSON.parse(line);
        }
      };
      await compare(writer);
      await writer.close();
      const reader = new EmbeddedLog({ path, partitions: 3 });
      try {
        await compare(reader);
      } finally {
        await reader.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
