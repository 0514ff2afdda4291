// AssemblyScript (compiled to publish-line.wasm, committed beside it: `npm run build:wasm`), not
// the service's TypeScript (tsconfig leaves this directory out). The replay's publish transcoder
// (ndjson.ts's publish()) in WebAssembly: a publish's MessagePack, in this module's memory, to its
// NDJSON line, in this module's memory, the same bytes as the JavaScript one. It takes only what it
// knows to write as the JavaScript does (strings of well-formed UTF-8, whole numbers up to 2^53,
// nil, booleans, arrays of those, binary data) and declines the rest (0): the JavaScript
// transcoder, then the generic path, serve it (publish-wasm.ts hands records over).
// Hand-written (memory laid out by hand, no allocation, 8 bytes a load and store) because measured
// to matter (issue 27: replay at >= 0.5 of the raw read; README: Replay for audits). 50,000 bench
// lines in memory, the JavaScript transcoder against this one with the copies in and out, same run,
// 10 rounds alternating: 0.79 against 0.41 us of CPU a line (1.9x); the first byte-at-a-time form
// of this file 0.68 (1.16x: strings 8 bytes at a time, the first byte that needs a look found by
// its flag, not byte by byte, made most of it). The whole bench (1,000,000 records, 6 rounds):
// replay 0.88-0.93 -> 0.56-0.59 us of CPU a record, 0.37-0.40 -> 0.61-0.63 of the raw read's CPU.
// Memory: [0, 32 KiB) its tables (init()), its data from 32 KiB, the rest laid out by the caller.

import { base64, be16, begin, escaped, initTables, isStr, KONST, konst, put, setKonst, setText, skip, spanLength, spanStart, u8At, value, written, int } from './json-out';

const EVENT_KEYTAB: u32 = 8192; // (length << 8 | first byte) -> field number + 1 (0: none)
const MESSAGE_KEYTAB: u32 = 16384;
const EVENT_KEY: u32 = 20; // konst of the event's keys, `"name":`
const MESSAGE_KEY: u32 = 30;

/** The key `name`, field k: its text (konst), its slot in the table (names of one length and first byte each). */
function setKey(table: u32, first: u32, k: i32, name: string): void {
  const at = KONST + 48 * (first + <u32>k);
  store<u8>(at, <u8>(name.length + 3));
  store<u8>(at + 8, 0x22);
  setText(at + 9, name);
  store<u16>(at + 9 + <u32>name.length, 0x3a22);
  store<u8>(table + ((<u32>name.length << 8) | <u32>name.charCodeAt(0)), <u8>(k + 1));
}

export function init(): void {
  initTables();
  const texts: StaticArray<string> = ['{"topic":"messages","partition":', ',"offset":', ',"time":', ',"event":{', '"messages":[', '"data":', '"encoding":', '/base64"', '"base64"', ']}', ',"credential":{', '"keyName":', '"clientId":', '"connectionId":'];
  for (let k = 0; k < texts.length; k++) setKonst(3 + k, unchecked(texts[k]));
  for (let k = 0; k < EVENT_NAMES.length; k++) setKey(EVENT_KEYTAB, EVENT_KEY, k, unchecked(EVENT_NAMES[k]));
  for (let k = 0; k < MESSAGE_NAMES.length; k++) setKey(MESSAGE_KEYTAB, MESSAGE_KEY, k, unchecked(MESSAGE_NAMES[k]));
}

/** Whether the fixstr key at p is `name`. */
function keyIs(p: u32, name: string): bool {
  const n = name.length;
  if (u8At(p) != 0xa0 + <u32>n) return false;
  for (let i = 0; i < n; i++) if (u8At(p + 1 + <u32>i) != <u32>name.charCodeAt(i)) return false;
  return true;
}

// field numbers: event-codec's keys (ndjson-layout.ts)
const E_TYPE = 0;
const E_MESSAGES = 4;
const E_KEYNAME = 6;
const EVENT_KEYS = 7;
const EVENT_NAMES: StaticArray<string> = ['type', 'appId', 'channel', 'transport', 'messages', 'clientIds', 'keyName'];
const M_CLIENTID = 3;
const M_CONNECTIONID = 4;
const M_DATA = 5;
const M_ENCODING = 6;
const MESSAGE_KEYS = 9;
const MESSAGE_NAMES: StaticArray<string> = ['id', 'timestamp', 'name', 'clientId', 'connectionId', 'data', 'encoding', 'extras', 'action'];
const WIRE_ORDER: StaticArray<i32> = [0, 1, 2, 3, 4];
const WIRE_AFTER_DATA: StaticArray<i32> = [7, 8];

// each field's value, by field number (0: absent), and the event's fields in their order
const EVENT_AT: u32 = 1024;
const EVENT_ORDER: u32 = 1088;
const MESSAGE_AT: u32 = 1152;

/** The field number of the fixstr key at p (its konst from `first` on), or -1. */
function keyOf(p: u32, table: u32, first: u32): i32 {
  const h = u8At(p);
  if (h < 0xa1 || h > 0xbf) return -1;
  const n = h & 0x1f;
  const slot = u8At(table + ((n << 8) | u8At(p + 1)));
  if (slot == 0) return -1;
  const k = slot - 1;
  const name = KONST + 48 * (first + k) + 9;
  for (let i: u32 = 1; i < n; i++) if (u8At(p + 1 + i) != u8At(name + i)) return -1;
  return <i32>k;
}



/**
 * The line of the publish b[start, end) of `partition` at `offset`, `timestamp` (whole, at most
 * 2^53), written at out: where it ends, or 0 when declined (nothing of it to keep).
 */
export function publish(start: u32, end: u32, partition: u32, offset: f64, timestamp: f64, out: u32): u32 {
  begin(out, end);
  let p = start;
  const h = u8At(p);
  if (h < 0x80 || h > 0x8f) return 0;
  const n = <i32>(h & 0x0f);
  p++;
  for (let f = 0; f < EVENT_KEYS; f++) store<u32>(EVENT_AT + 4 * <u32>f, 0);
  for (let i = 0; i < n; i++) {
    const field = keyOf(p, EVENT_KEYTAB, EVENT_KEY);
    if (field < 0 || load<u32>(EVENT_AT + 4 * <u32>field) != 0) return 0;
    p = skip(p);
    if (p == 0) return 0;
    store<u32>(EVENT_AT + 4 * <u32>field, p);
    store<u32>(EVENT_ORDER + 4 * <u32>i, field);
    // the messages, last as event-codec writes them, are read (and bounds-checked) below: not walked twice
    if (field == E_MESSAGES && i == n - 1) break;
    p = skip(p);
    if (p == 0) return 0;
  }
  const typeAt = load<u32>(EVENT_AT + 4 * <u32>E_TYPE);
  if (typeAt == 0 || !keyIs(typeAt, 'messages.published')) return 0;
  let m = load<u32>(EVENT_AT + 4 * <u32>E_MESSAGES);
  if (m == 0) return 0;
  let count: u32;
  const ah = u8At(m);
  if (ah >= 0x90 && ah <= 0x9f) {
    count = ah & 0x0f;
    m++;
  } else if (ah == 0xdc) {
    count = be16(m + 1);
    m += 3;
  } else return 0;

  konst(3);
  int(partition);
  konst(4);
  int(<u64>offset);
  konst(5);
  int(<u64>timestamp);
  konst(6);
  let first = true;
  for (let i = 0; i < n; i++) {
    const field = load<i32>(EVENT_ORDER + 4 * <u32>i);
    if (field == E_MESSAGES) continue;
    if (!first) put(0x2c);
    first = false;
    konst(EVENT_KEY + <u32>field);
    if (!value(load<u32>(EVENT_AT + 4 * <u32>field))) return 0;
  }
  if (!first) put(0x2c);
  konst(7);
  let clientIdAt: u32 = 0;
  let connectionIdAt: u32 = 0;
  for (let i: u32 = 0; i < count; i++) {
    if (m >= end) return 0;
    const mh = u8At(m);
    if (mh < 0x80 || mh > 0x8f) return 0;
    const fields = mh & 0x0f;
    m++;
    for (let f = 0; f < MESSAGE_KEYS; f++) store<u32>(MESSAGE_AT + 4 * <u32>f, 0);
    for (let f: u32 = 0; f < fields; f++) {
      const field = keyOf(m, MESSAGE_KEYTAB, MESSAGE_KEY);
      if (field < 0 || load<u32>(MESSAGE_AT + 4 * <u32>field) != 0) return 0;
      m = skip(m);
      if (m == 0) return 0;
      store<u32>(MESSAGE_AT + 4 * <u32>field, m);
      m = skip(m);
      if (m == 0) return 0;
    }
    if (i == 0) {
      clientIdAt = load<u32>(MESSAGE_AT + 4 * <u32>M_CLIENTID);
      connectionIdAt = load<u32>(MESSAGE_AT + 4 * <u32>M_CONNECTIONID);
    }
    if (i > 0) put(0x2c);
    put(0x7b);
    let any = false;
    for (let w = 0; w < WIRE_ORDER.length; w++) {
      const field = unchecked(WIRE_ORDER[w]);
      const at = load<u32>(MESSAGE_AT + 4 * <u32>field);
      if (at == 0) continue;
      if (any) put(0x2c);
      any = true;
      konst(MESSAGE_KEY + <u32>field);
      if (!value(at)) return 0;
    }
    const dataAt = load<u32>(MESSAGE_AT + 4 * <u32>M_DATA);
    const encodingAt = load<u32>(MESSAGE_AT + 4 * <u32>M_ENCODING);
    const dh = dataAt != 0 ? u8At(dataAt) : 0;
    const binary = dh == 0xc4 || dh == 0xc5 || dh == 0xc6;
    if (binary && encodingAt != 0 && !isStr(u8At(encodingAt))) return 0;
    if (dataAt != 0) {
      if (any) put(0x2c);
      any = true;
      konst(8);
      if (binary) {
        put(0x22);
        base64(spanStart(dataAt), spanLength(dataAt));
        put(0x22);
      } else if (!value(dataAt)) return 0;
    }
    if (encodingAt != 0 || binary) {
      if (any) put(0x2c);
      any = true;
      konst(9);
      if (binary) {
        if (encodingAt != 0 && spanLength(encodingAt) > 0) {
          const s = spanStart(encodingAt);
          put(0x22);
          if (!escaped(s, s + spanLength(encodingAt))) return 0;
          konst(10);
        } else konst(11);
      } else if (!value(encodingAt)) return 0;
    }
    for (let w = 0; w < WIRE_AFTER_DATA.length; w++) {
      const field = unchecked(WIRE_AFTER_DATA[w]);
      const at = load<u32>(MESSAGE_AT + 4 * <u32>field);
      if (at == 0) continue;
      if (any) put(0x2c);
      any = true;
      konst(MESSAGE_KEY + <u32>field);
      if (!value(at)) return 0;
    }
    put(0x7d);
  }
  konst(12);
  const keyNameAt = load<u32>(EVENT_AT + 4 * <u32>E_KEYNAME);
  if (keyNameAt != 0 || clientIdAt != 0 || connectionIdAt != 0) {
    konst(13);
    let any = false;
    if (keyNameAt != 0) {
      any = true;
      konst(14);
      if (!value(keyNameAt)) return 0;
    }
    if (clientIdAt != 0) {
      if (any) put(0x2c);
      any = true;
      konst(15);
      if (!value(clientIdAt)) return 0;
    }
    if (connectionIdAt != 0) {
      if (any) put(0x2c);
      konst(16);
      if (!value(connectionIdAt)) return 0;
    }
    put(0x7d);
  }
  put(0x7d);
  put(0x0a);
  return written();
}
