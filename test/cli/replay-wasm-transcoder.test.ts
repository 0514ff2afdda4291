// The replay's WebAssembly publish transcoder (src/audit/wasm/publish-line.ts, publish-wasm.ts)
// against its JavaScript one (ndjson.ts, NdjsonChunks(false)): the same bytes for publishes of
// every kind it meets, escapes, unicode, bytes that are not UTF-8, binary data, numbers at and past
// 2^53, missing fields, long strings, given a record at a time (record) and read where they lie in
// one buffer as the embedded log's segments are (visit); the shapes it does not know declined to
// the JavaScript transcoder, which writes them. And the lines it writes are the generic path's.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { NdjsonChunks } from '../../src/audit/ndjson.js';
import { lineOf, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { KeyScope } from '../../src/audit/key-scope.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { packValue } from '../../src/codec/msgpack.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import type { LogEvent } from '../../src/domain/events.js';

const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };

const HOSTILE = 'q"b\\s/n\nr\rt\tb\bf\fz\u0000c\u001fd\u007f é✓😀 \u2028\u2029\uFEFF\uFFFD<>&\'';
const bytes = (n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 37 + 11) & 0xff);

/** Messages of every field the transcoder reads, each kind alone and together. */
const MESSAGES: Record<string, unknown>[] = [
  { id: 'm1:0', timestamp: 1_700_000_000_000, name: 'event', data: '{"n":1,"text":"plain"}', clientId: 'bench' },
  { id: 'm2:0', data: HOSTILE, name: HOSTILE, clientId: HOSTILE, connectionId: HOSTILE },
  { data: 'x'.repeat(31) },
  { data: 'y'.repeat(32), name: 'n'.repeat(255) },
  { data: 'z'.repeat(256), clientId: 'c'.repeat(65_535) },
  { data: 'w'.repeat(65_536) },
  { data: `${'é'.repeat(300)}${'a'.repeat(7)}😀` },
  {},
  { timestamp: 0 },
  { timestamp: 2 ** 53 - 1, action: 5 },
  { timestamp: 2 ** 53 + 2 },
  { timestamp: 2 ** 64 },
  { timestamp: 2 ** 32, action: 127 },
  { timestamp: -1 },
  { timestamp: -33, action: -129 },
  { timestamp: 1.5 },
  { data: bytes(0) },
  { data: bytes(1), encoding: 'cipher+aes-128-cbc' },
  { data: bytes(2), encoding: '' },
  { data: bytes(255), encoding: 'json/é"\n' },
  { data: bytes(256) },
  { data: bytes(70_000) },
  { data: null, encoding: null },
  { data: true, encoding: 'utf-8' },
  { data: false },
  { data: [1, 'two', null, [true, -3]] },
  { data: { a: 1 } },
  { data: 'x', extras: { headers: { a: 'b' } } },
  { name: ['a', 2 ** 40] },
  { clientId: 12, connectionId: null },
];

function records(): LogRecord[] {
  const values: Uint8Array[] = [];
  MESSAGES.forEach((m, i) => {
    const event = { type: 'messages.published', appId: 'app1', channel: i % 3 === 0 ? 'ch-é✓' : 'ch-1', transport: 'rest', keyName: i % 4 === 0 ? undefined : 'app1.k1', messages: [m] };
    if (i % 4 === 0) delete event.keyName;
    values.push(encodeEvent(event as unknown as LogEvent));
  });
  // several messages; the first one's clientId and connectionId (the credential); clientIds
  values.push(encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'realtime', clientIds: ['a', HOSTILE], messages: MESSAGES.slice(0, 10) } as unknown as LogEvent));
  values.push(encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', messages: Array.from({ length: 20 }, (_, i) => ({ id: `m:${i}`, data: `d${i}` })) } as unknown as LogEvent));
  // other field orders, the key name after the messages, an unknown field (declined by both)
  values.push(packValue({ messages: [MESSAGES[1]], keyName: 'app1.k2', channel: 'ch-1', appId: 'app1', type: 'messages.published', transport: 'rest' }));
  values.push(packValue({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', messages: [MESSAGES[0]], keyName: HOSTILE }));
  values.push(packValue({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', other: 1, messages: [MESSAGES[0]] }));
  // a string that is not UTF-8 (the log's own bytes), a lone surrogate's encoding among them
  for (const bad of [[0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82]]) {
    const v = Buffer.from(encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', messages: [{ data: `pppp${'q'.repeat(40)}` }] } as unknown as LogEvent));
    const at = v.indexOf('pppp');
    Buffer.from(bad).copy(v, at);
    values.push(new Uint8Array(v));
  }
  return values.map((value, offset) => ({ topic: Topics.messages, partition: 2, offset: offset * 1_000_003, key: `app1:${offset % 3 === 0 ? 'ch-é✓' : 'ch-1'}`, timestamp: 1_700_000_000_000 + offset, value }));
}

const text = (out: NdjsonChunks): string => Buffer.concat(out.take()).toString('utf8');

describe('the replay: the WebAssembly publish transcoder', () => {
  it('writes the bytes the JavaScript transcoder writes, and the generic lines, a record at a time', () => {
    const list = records();
    const wasm = new NdjsonChunks();
    const js = new NdjsonChunks(false);
    for (const r of list) {
      expect(wasm.record(r, request)).toBe(true);
      expect(js.record(r, request)).toBe(true);
    }
    const got = text(wasm);
    expect(got).toBe(text(js));
    expect(got).toBe(list.map((r) => `${JSON.stringify(lineOf(r, request))}\n`).join(''));
    expect(js.wasmLines).toBe(0);
    // it wrote most (those of maps, floats, numbers past 2^53, negative 64-bit ones, bad UTF-8 and the longest it declined)
    expect(wasm.wasmLines).toBeGreaterThanOrEqual(list.length - 16);
    expect(wasm.fast).toBe(js.fast);
  });

  it('reads them where they lie (one buffer, as a segment of the embedded log), across many chunks, the same bytes', () => {
    const list = records();
    const plain = Array.from({ length: 3000 }, (_, i) => encodeEvent({ type: 'messages.published', appId: 'app1', channel: `ch-${i % 7}`, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${i}:0`, timestamp: 1_700_000_000_000 + i, name: 'event', data: `{"n":${i},"text":"${'x'.repeat(60)}"}`, clientId: 'bench' }] } as unknown as LogEvent));
    // interleaved: a declined record between the WebAssembly one's lines, which are written before it
    const values: { value: Uint8Array; key: string }[] = [];
    plain.forEach((value, i) => {
      values.push({ value, key: `app1:ch-${i % 7}` });
      if (i % 100 === 0) values.push(list[(i / 100) % list.length]);
    });
    const segment = Buffer.concat(values.map((v) => v.value));
    const scope = new KeyScope(request);
    const run = (out: NdjsonChunks): string => {
      out.scanStarts();
      let at = 0;
      values.forEach(({ value, key }, i) => {
        const keyBytes = Buffer.from(key);
        expect(out.visit(Topics.messages, 3, i, 1_700_000_000_000 + i, segment, at, at + value.length, { keyBytes, start: 0, end: keyBytes.length }, scope, request)).toBe(true);
        at += value.length;
      });
      const chunks = out.take();
      // whole lines a chunk
      for (const c of chunks) expect(c[c.length - 1]).toBe(0x0a);
      expect(chunks.length).toBeGreaterThan(1);
      return Buffer.concat(chunks).toString('utf8');
    };
    const wasm = new NdjsonChunks();
    const got = run(wasm);
    expect(got).toBe(run(new NdjsonChunks(false)));
    expect(wasm.wasmLines).toBeGreaterThanOrEqual(3000);
    // and a buffer written again between scans (another value under the same object) is read again
    const other = new NdjsonChunks();
    const buffer = Buffer.from(plain[0]);
    const keyBytes = Buffer.from('app1:ch-0');
    const key = { keyBytes, start: 0, end: keyBytes.length };
    other.scanStarts();
    other.visit(Topics.messages, 0, 0, 1, buffer, 0, buffer.length, key, scope, request);
    Buffer.from(plain[7]).copy(buffer);
    other.scanStarts();
    other.visit(Topics.messages, 0, 1, 2, buffer, 0, buffer.length, key, scope, request);
    const lines = text(other).split('\n');
    expect(JSON.parse(lines[0]).event.messages[0].id).toBe('m0:0');
    expect(JSON.parse(lines[1]).event.messages[0].id).toBe('m7:0');
  });

  it('where WebAssembly cannot be had (node --jitless has none), the JavaScript transcoder writes the same lines', () => {
    const url = (path: string): string => new URL(path, import.meta.url).href;
    const script = `
      const { NdjsonChunks } = await import(${JSON.stringify(url('../../src/audit/ndjson.ts'))});
      const { encodeEvent } = await import(${JSON.stringify(url('../../src/log/event-codec.ts'))});
      const out = new NdjsonChunks();
      const request = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
      for (let i = 0; i < 50; i++) out.record({ topic: 'messages', partition: 1, offset: i, timestamp: 1_700_000_000_000 + i, key: 'app1:ch-1', value: encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', keyName: 'app1.k1', messages: [{ id: 'm' + i, data: 'd"é' + i }] }) }, request);
      process.stdout.write(JSON.stringify({ wasm: typeof WebAssembly, wasmLines: out.wasmLines, fast: out.fast, text: Buffer.concat(out.take()).toString('utf8') }));
    `;
    const run = spawnSync(process.execPath, ['--jitless', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    const got = JSON.parse(run.stdout) as { wasm: string; wasmLines: number; fast: number; text: string };
    expect(got).toMatchObject({ wasm: 'undefined', wasmLines: 0, fast: 50 });
    const out = new NdjsonChunks();
    for (let i = 0; i < 50; i++) out.record({ topic: Topics.messages, partition: 1, offset: i, timestamp: 1_700_000_000_000 + i, key: 'app1:ch-1', value: encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'ch-1', transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${i}`, data: `d"é${i}` }] } as unknown as LogEvent) }, request);
    expect(out.wasmLines).toBe(50);
    expect(got.text).toBe(text(out));
  });
});
