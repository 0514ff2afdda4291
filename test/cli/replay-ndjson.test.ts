// The replay's NDJSON (src/audit/ndjson.ts) transcodes a publish's MessagePack to its line in one
// pass; its lines must be, byte for byte, what JSON.stringify(lineOf(record)) gives (the generic
// path, replay-scope.ts), for every shape a publish may take, and the other events' lines too.
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
import type { StoredMessage } from '../../src/domain/message.js';

const request: ScopeRequest = { appId: 'app1', channels: { kind: 'prefix', prefix: 'ch' }, include: new Set(['messages', 'presence', 'app-events']), from: 10, to: 10_000_000_000_000 };

let offset = 0;
const record = (topic: string, key: string, value: Uint8Array, timestamp = 1_000): LogRecord => ({ topic, partition: 2, offset: offset++, key, timestamp, value });
const publish = (messages: StoredMessage[], extra: Record<string, unknown> = {}, channel = 'ch-1'): LogRecord =>
  // A copy of the bytes: values read from the log carry no decoded event (encodeEvent keeps one on its bytes).
  record(Topics.messages, `app1:${channel}`, new Uint8Array(encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', messages, ...extra } as LogEvent)));

/** A publish whose data's bytes (`marker`, 4 ASCII bytes in its MessagePack) are replaced by `bytes`: not UTF-8. */
function notUtf8(marker: string, bytes: number[]): LogRecord {
  const r = publish([{ id: `u:${marker}`, timestamp: 6_600, data: marker, clientId: marker }]);
  const value = Buffer.from(r.value);
  for (let at = value.indexOf(marker); at >= 0; at = value.indexOf(marker, at + 4)) value.set(bytes, at);
  return { ...r, value: new Uint8Array(value) };
}

/** The generic path's output for the records: JSON.stringify of each line in scope. */
const expected = (records: LogRecord[]): string =>
  records
    .map((r) => lineOf(r, request))
    .filter((l) => l !== undefined)
    .map((l) => `${JSON.stringify(l)}\n`)
    .join('');

function transcoded(records: LogRecord[]): { text: string; written: number; fast: number } {
  const out = new NdjsonChunks();
  let written = 0;
  for (const r of records) if (out.record(r, request)) written++;
  return { text: Buffer.concat(out.take()).toString('utf8'), written, fast: out.fast };
}

describe('replay NDJSON: the transcoded lines are the generic path\'s, byte for byte', () => {
  // name, records, how many of them the transcoder writes (the others: the generic path, or out of scope)
  const cases: [string, LogRecord[], number][] = [
    ['a publish as the REST route makes it (string data, clientId, key name)', [publish([{ id: 'm1:0', timestamp: 1_500, name: 'event', data: '{"n":1,"text":"xx"}', clientId: 'bench' }], { keyName: 'app1.k1' })], 1],
    [
      'binary data, with and without an encoding (base64, and the encoding saying so)',
      [
        publish([{ id: 'b:0', timestamp: 2_000, data: new Uint8Array([0, 1, 2, 250, 255]) }]),
        publish([{ id: 'b:1', timestamp: 2_000, data: new Uint8Array([9, 8, 7]), encoding: 'json/utf-8' }]),
        publish([{ id: 'b:2', timestamp: 2_000, data: new Uint8Array(0), encoding: '' }]),
      ],
      3,
    ],
    [
      'strings to escape, non-ASCII and control characters, in names, data and client ids',
      [publish([{ id: 'e:0', timestamp: 3_000, name: 'quote " back \\ slash', data: 'line\nbreak\ttab \u0001 é ✓ 😀 \u2028', clientId: 'cl"ient', connectionId: 'conn-é' }], { keyName: 'app1.k"2' })],
      1,
    ],
    [
      'extras, action, several messages with different fields, clientIds',
      [
        publish(
          [
            { id: 'x:0', timestamp: 4_000, name: 'a', data: 'one', extras: { headers: { k: 'v', n: 1 }, ref: { type: 'com.example', timeserial: 's' } }, action: 1 } as StoredMessage,
            { id: 'x:1', timestamp: 4_001, data: 'two', clientId: 'second' },
            { id: 'x:2', timestamp: 4_002 },
          ],
          { clientIds: ['ann', 'bob'], keyName: 'app1.k1' },
        ),
      ],
      1,
    ],
    ['no key name and no client: no credential', [publish([{ id: 'n:0', timestamp: 5_000, data: 'x' }])], 1],
    ['a long string (str 16 and str 32) and a timestamp past 2^32', [publish([{ id: 'l:0', timestamp: 2 ** 41 + 17, data: 'y'.repeat(70_000), name: 'z'.repeat(300) }])], 1],
    [
      'data that is neither string nor binary (number, null, an object)',
      [publish([{ id: 'd:0', timestamp: 6_000, data: 42 as unknown as string }]), publish([{ id: 'd:1', timestamp: 6_000, data: { deep: [1, 'two', null] } as unknown as string }])],
      2,
    ],
    [
      'a publish in another field order (packValue), and an event of the messages topic that is not a publish',
      [
        record(Topics.messages, 'app1:ch-2', packValue({ channel: 'ch-2', messages: [{ timestamp: 7_000, data: 'late', id: 'o:0' }], type: 'messages.published', transport: 'realtime', appId: 'app1' })),
        record(Topics.messages, 'app1:ch-2', packValue({ type: 'messages.something', appId: 'app1', channel: 'ch-2' })),
      ],
      1,
    ],
    [
      'every control character, DEL, and strings whose bytes are not well-formed UTF-8 (a stray byte, an encoded surrogate)',
      [
        publish([{ id: 'c:0', timestamp: 6_500, name: Array.from({ length: 32 }, (_, c) => String.fromCharCode(c)).join('') + '\u007f"\\', data: 'ok' }]),
        notUtf8('QQQQ', [0xff, 0x41, 0xc3, 0x28]),
        notUtf8('RRRR', [0xe9, 0xed, 0xa0, 0x80]),
      ],
      3,
    ],
    [
      'a character to escape or to keep (quote, backslash, controls, space, tilde, DEL, UTF-8) at every place in a run of plain bytes (the transcoder copies 4 plain bytes at a time)',
      ['"', '\\', '\n', '\u0001', '\u001f', ' ', '~', '\u007f', '\u0080', 'é', '✓', '😀'].flatMap((special, k) =>
        Array.from({ length: 9 }, (_, at) => publish([{ id: `w:${k}:${at}`, timestamp: 6_700, name: `${'a'.repeat(at)}${special}${'b'.repeat(8 - at)}`, data: `${'c'.repeat(at)}${special}${special}${'d'.repeat(12 - at)}`, clientId: 'x'.repeat(at) }])),
      ),
      12 * 9,
    ],
    [
      'publishes of one channel (one record key) whose fields before the messages change from one to the next (key name, transport, clientIds, field order), then come back: each line its own fields, none a remembered one\'s',
      [
        publish([{ id: 'k:0', timestamp: 9_100, data: 'a' }], { keyName: 'app1.k1' }),
        publish([{ id: 'k:1', timestamp: 9_101, data: 'b' }], { keyName: 'app1.k2' }),
        publish([{ id: 'k:2', timestamp: 9_102, data: 'c' }], { keyName: 'app1.k2', transport: 'realtime' }),
        publish([{ id: 'k:3', timestamp: 9_103, data: 'd' }], { keyName: 'app1.k2', clientIds: ['ann'] }),
        publish([{ id: 'k:4', timestamp: 9_104, data: 'e' }]),
        record(Topics.messages, 'app1:ch-1', packValue({ messages: [{ id: 'k:5', timestamp: 9_105, data: 'f' }], type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', keyName: 'app1.k1' })),
        publish([{ id: 'k:6', timestamp: 9_106, data: 'g', clientId: 'cl' }], { keyName: 'app1.k1' }),
        publish([{ id: 'k:7', timestamp: 9_107, data: 'h' }, { id: 'k:8', timestamp: 9_107, data: 'i' }], { keyName: 'app1.k2' }),
        publish([{ id: 'k:9', timestamp: 9_108, data: 'j' }], { keyName: 'app1.k1' }),
      ],
      9,
    ],
    [
      'strings longer than an output chunk (256 KiB), with and without escapes and multi-byte UTF-8, and a time past 10^8 whose first digits change',
      [
        publish([{ id: 'big:0', timestamp: 99_999_999, data: 'é✓😀"\\\n'.repeat(40_000), clientId: 'a' }]),
        publish([{ id: 'big:1', timestamp: 100_000_000, data: 'plain'.repeat(60_000), name: 'é'.repeat(70_000) }]),
        publish([{ id: 'big:2', timestamp: 1_893_456_000_000, data: 'x' }]),
        publish([{ id: 'big:3', timestamp: 1_893_499_999_999, data: 'x' }]),
        publish([{ id: 'big:4', timestamp: 1_893_500_000_001, data: 'x' }]),
      ],
      5,
    ],
    [
      'presence and the app\'s events (the generic path)',
      [
        record(Topics.presence, 'app1:ch-1', new Uint8Array(encodeEvent({ type: 'presence.changed', appId: 'app1', channel: 'ch-1', event: { action: 'enter', id: 'p:0', timestamp: 8_000, clientId: 'ann', connectionId: 'c1', data: 'here' } } as LogEvent))),
        record(Topics.apps, 'app1', new Uint8Array(encodeEvent({ type: 'key.revoked', appId: 'app1', keyName: 'app1.k0', modified: 8_000 } as LogEvent))),
      ],
      0,
    ],
    [
      'records out of scope: another app, another prefix, before --from',
      [publish([{ id: 's:0', timestamp: 9_000, data: 'x' }], {}, 'other'), record(Topics.messages, 'app2:ch-1', encodeEvent({ type: 'messages.published', appId: 'app2', channel: 'ch-1', transport: 'rest', messages: [] } as LogEvent)), { ...publish([{ id: 's:1', timestamp: 1, data: 'x' }]), timestamp: 1 }],
      0,
    ],
  ];
  for (const [name, records, fast] of cases) {
    it(name, () => {
      const want = expected(records);
      const got = transcoded(records);
      expect(got.text).toBe(want);
      expect(got.written).toBe(want === '' ? 0 : want.split('\n').length - 1);
      expect(got.fast).toBe(fast);
    });
  }

  it('from the embedded log, read in place (its segments, and its in-memory window), the same lines as the generic replay, for one channel, a prefix and every channel', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-ndjson-'));
    try {
      const path = join(dir, 'log.db');
      const writer = new EmbeddedLog({ path, partitions: 4 });
      const all = cases.flatMap(([, records]) => records);
      for (const topic of [Topics.messages, Topics.presence, Topics.apps]) {
        const records = all.filter((r) => r.topic === topic).map(({ key, timestamp, value }) => ({ key, timestamp, value }));
        await writer.append(topic, records);
      }
      const requests: ScopeRequest[] = [
        request,
        { ...request, channels: { kind: 'channel', name: 'ch-1' } },
        { ...request, channels: { kind: 'all' }, include: new Set(['messages']) },
        { ...request, appId: 'app2', channels: { kind: 'all' } },
      ];
      const compare = async (log: EmbeddedLog): Promise<void> => {
        for (const r of requests) {
          let want = '';
          for await (const { line } of replayScope(log, r)) want += `${JSON.stringify(line)}\n`;
          const chunks: Buffer[] = [];
          for await (const chunk of replayNdjson(log, r)) chunks.push(chunk);
          expect(Buffer.concat(chunks).toString('utf8'), JSON.stringify(r.channels)).toBe(want);
          expect(want.length).toBeGreaterThan(0);
        }
      };
      await compare(writer); // the records still in its in-memory window: keys decoded
      await writer.close();
      const reader = new EmbeddedLog({ path, partitions: 4 });
      try {
        await compare(reader); // from SQLite: segments in place
      } finally {
        await reader.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lines across many chunks (more than one buffer of output) come out whole and in order', () => {
    const records = Array.from({ length: 3000 }, (_, i) => publish([{ id: `c:${i}`, timestamp: 10_000 + i, data: `${i}`.padEnd(200, '.'), clientId: 'c' }], { keyName: 'app1.k1' }));
    const out = new NdjsonChunks();
    for (const r of records) out.record(r, request);
    const chunks = out.take();
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk[chunk.length - 1]).toBe(0x0a);
    expect(Buffer.concat(chunks).toString('utf8')).toBe(expected(records));
  });

  it('chunks reused (reuseChunks: each read before the next is asked for) give the same bytes, in buffers written again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-ndjson-reuse-'));
    try {
      const path = join(dir, 'log.db');
      const writer = new EmbeddedLog({ path, partitions: 2 });
      const records = Array.from({ length: 4000 }, (_, i) => publish([{ id: `r:${i}`, timestamp: 10_000 + i, data: `${i}`.padEnd(300, '"'), clientId: 'c' }], { keyName: 'app1.k1' }, `ch-${i % 7}`));
      await writer.append(Topics.messages, records.map(({ key, timestamp, value }) => ({ key, timestamp, value })));
      await writer.close();
      const reader = new EmbeddedLog({ path, partitions: 2 });
      try {
        const r: ScopeRequest = { ...request, channels: { kind: 'all' }, include: new Set(['messages']) };
        const read = async (reuse: boolean): Promise<{ text: string; chunks: number; buffers: number }> => {
          const copies: Buffer[] = [];
          const buffers = new Set<ArrayBufferLike>();
          for await (const chunk of replayNdjson(reader, r, undefined, reuse)) {
            copies.push(Buffer.from(chunk)); // read before the next is asked for
            buffers.add(chunk.buffer);
          }
          return { text: Buffer.concat(copies).toString('utf8'), chunks: copies.length, buffers: buffers.size };
        };
        const fresh = await read(false);
        const reused = await read(true);
        let want = '';
        for await (const { line } of replayScope(reader, r)) want += `${JSON.stringify(line)}\n`;
        expect(fresh.text).toBe(want);
        expect(reused.text).toBe(want);
        expect(fresh.chunks).toBeGreaterThan(4);
        expect(fresh.buffers).toBe(fresh.chunks);
        // one partition's chunks (a scan of its records fills several before they are handed out) written again for the next
        expect(fresh.buffers - reused.buffers).toBeGreaterThanOrEqual(4);
      } finally {
        await reader.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
