// Hostile realtime input, as fast-check arbitraries: ProtocolMessages with every field right,
// wrong or extreme (REALTIME-PROTOCOL.md §2), encoded as the connection's format says or not,
// and garbage: random bytes and text, truncated and mutated frames, nesting up to 20,000 levels,
// invalid UTF-8, MessagePack extension types, frames over the frame limit.
import fc from 'fast-check';
import { encode as encodeMsgpack } from '@msgpack/msgpack';
import { depthArb, encodingArb, fieldValue, invalidUtf8, kindArb, messageLike, nestedJson, nestedMsgpack } from './arbitraries.js';

export type Format = 'json' | 'msgpack';

/** One WebSocket frame as the fuzzer sends it. */
export interface Frame {
  data: Buffer | string;
  binary: boolean;
  /** Short human form for failure reports. */
  label: string;
}

/** One input: a connection's query and the frames it sends, in order. */
export interface Case {
  clientId?: string;
  frames: Frame[];
}

const text = fc.string({ unit: 'grapheme', maxLength: 30 });

/** Anything a field can hold in JSON and MessagePack, objects with a `toString` that is not a function included. */
const anyValue = fc.oneof(
  { weight: 3, arbitrary: fieldValue },
  { weight: 1, arbitrary: fc.constantFrom({ toString: 1 }, { valueOf: 'x', toString: null }, [[[[]]]], -0, Number.MAX_SAFE_INTEGER + 2) },
);

const action = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(0, 5, 7, 10, 10, 12, 14, 15, 15, 15, 16, 17) },
  { weight: 3, arbitrary: fc.integer({ min: -2, max: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom(2 ** 31, 2 ** 53, 1.5, -0, 1e308) },
);

const channel = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('fuzz', 'fuzz-a', 'fuzz:b', 'fuzz-c') },
  { weight: 2, arbitrary: fc.constantFrom('', ' ', '[meta]log', '[meta]channel.lifecycle', '[?rewind=1]fuzz', 'fuzz\u0000x', 'ü', '..', 'x'.repeat(3000), 'fuzz[') },
  { weight: 2, arbitrary: text },
  { weight: 1, arbitrary: anyValue },
);

const msgSerial = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 1.5, 2 ** 53, 2 ** 60, '0', null, NaN) },
  { weight: 1, arbitrary: anyValue },
);

const presenceItem = fc.record(
  {
    action: fc.oneof(fc.integer({ min: 0, max: 6 }), anyValue),
    clientId: fc.oneof(fc.constantFrom('fuzz-member', 'other', '*', ''), anyValue),
    id: anyValue,
    data: fc.oneof(text, anyValue),
    encoding: encodingArb,
    extras: anyValue,
  },
  { requiredKeys: [] },
);

/** A message the service accepts, so that ACK paths are fuzzed too. */
const goodMessage = fc.record({ name: text, data: fc.oneof(text, fc.jsonValue({ maxDepth: 3 })) }, { requiredKeys: [] });

/** ProtocolMessage fields, each present or not, right or wrong. `token` is a valid access token. */
function protocolMessage(token: string): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      action,
      channel,
      msgSerial,
      messages: fc.oneof(
        { weight: 4, arbitrary: fc.array(goodMessage, { minLength: 1, maxLength: 4 }) },
        { weight: 4, arbitrary: fc.array(messageLike, { maxLength: 6 }) },
        { weight: 1, arbitrary: anyValue },
        { weight: 1, arbitrary: fc.integer({ min: 900, max: 1100 }).map((n) => Array.from({ length: n }, (_, i) => ({ data: `b${i}` }))) },
      ),
      presence: fc.oneof({ weight: 4, arbitrary: fc.array(presenceItem, { maxLength: 5 }) }, { weight: 1, arbitrary: anyValue }),
      flags: fc.oneof(fc.integer(), fc.constantFrom(0, 983040, 983072, 65536, 262144, 2 ** 31 - 1, -1), anyValue),
      channelSerial: fc.oneof(fc.constantFrom('0:0', '0:1', '1:0', '0:-1', '0:99999999999999999999', 'x:y', ':', ''), text, anyValue),
      params: fc.oneof(fc.dictionary(text, text, { maxKeys: 3 }), anyValue),
      auth: fc.oneof(fc.record({ accessToken: fc.oneof(fc.constant(token), text, anyValue) }, { requiredKeys: [] }), anyValue),
      id: anyValue,
      count: anyValue,
      error: anyValue,
      connectionId: anyValue,
      connectionDetails: anyValue,
      timestamp: anyValue,
    },
    { requiredKeys: ['action'] },
  );
}

const short = (s: string, n = 160): string => (s.length > n ? `${s.slice(0, n)}…(${s.length})` : s);

const tryMsgpack = (value: unknown): Buffer | undefined => {
  try {
    return Buffer.from(encodeMsgpack(value, { ignoreUndefined: true }));
  } catch {
    return undefined;
  }
};

/** A ProtocolMessage in the connection's format (JSON text, MessagePack binary), or now and then in the other frame type. */
function encoded(format: Format, pm: Record<string, unknown>, wrongFrame: boolean): Frame {
  const json = JSON.stringify(pm) ?? 'null';
  if (format === 'json') return { data: wrongFrame ? Buffer.from(json) : json, binary: wrongFrame, label: `${wrongFrame ? 'binary ' : ''}json ${short(json)}` };
  const bytes = tryMsgpack(pm) ?? Buffer.from(json);
  return { data: wrongFrame ? json : bytes, binary: !wrongFrame, label: `${wrongFrame ? 'text frame, ' : ''}msgpack of ${short(json)}` };
}

/** A frame of `format`, nested `depth` levels where a value goes: message data, a HEARTBEAT id, ATTACH params. */
function deepFrame(format: Format, depth: number, kind: 'array' | 'object', where: 'data' | 'id' | 'params', serial: number): Frame {
  const label = `${format} nested ${kind} depth ${depth} in ${where}`;
  if (format === 'json') {
    const n = nestedJson(depth, kind);
    const doc =
      where === 'data'
        ? `{"action":15,"channel":"fuzz","msgSerial":${serial},"messages":[{"name":"deep","data":${n}}]}`
        : where === 'id'
          ? `{"action":0,"id":${n}}`
          : `{"action":10,"channel":"fuzz","params":${n}}`;
    return { data: doc, binary: false, label };
  }
  // The placeholder value is the document's last byte (nil): replaced by the nested bytes.
  const placeholder =
    where === 'data'
      ? { action: 15, channel: 'fuzz', msgSerial: serial, messages: [{ name: 'deep', data: null }] }
      : where === 'id'
        ? { action: 0, id: null }
        : { action: 10, channel: 'fuzz', params: null };
  const bytes = Buffer.from(encodeMsgpack(placeholder));
  return { data: Buffer.concat([bytes.subarray(0, bytes.length - 1), nestedMsgpack(depth, kind)]), binary: true, label };
}

/** Frames for a connection of `format`. `maxFrameBytes` is the gateway's frame limit. */
export function frameArb(format: Format, token: string, maxFrameBytes: number): fc.Arbitrary<Frame> {
  const pm = protocolMessage(token);
  return fc.oneof(
    { weight: 40, arbitrary: pm.map((p) => encoded(format, p, false)) },
    { weight: 2, arbitrary: pm.map((p) => encoded(format, p, true)) },
    {
      weight: 3,
      arbitrary: fc.tuple(depthArb, kindArb, fc.constantFrom<'data' | 'id' | 'params'>('data', 'id', 'params'), fc.integer({ min: 0, max: 20 })).map(([d, k, w, s]) => deepFrame(format, d, k, w, s)),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(pm, fc.integer({ min: 1, max: 200 })).map(([p, cut]): Frame => {
        const f = encoded(format, p, false);
        const bytes = Buffer.from(f.data);
        return { data: bytes.subarray(0, Math.max(0, bytes.length - cut)), binary: true, label: `truncated by ${cut}: ${f.label}` };
      }),
    },
    {
      weight: 3,
      arbitrary: fc.tuple(pm, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 })).map(([p, edits]): Frame => {
        const f = encoded(format, p, false);
        const bytes = Buffer.from(f.data);
        for (const [at, b] of edits) if (bytes.length > 0) bytes[at % bytes.length] = b;
        return { data: bytes, binary: typeof f.data !== 'string', label: `mutated ${JSON.stringify(edits)}: ${f.label}` };
      }),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b): Frame => ({ data: Buffer.from(b), binary: true, label: `bytes ${Buffer.from(b).toString('hex').slice(0, 80)}` })) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }).map((s): Frame => ({ data: s, binary: false, label: `text ${short(JSON.stringify(s))}` })) },
    {
      weight: 2,
      arbitrary: fc.tuple(invalidUtf8, fc.constantFrom('id', 'channel', 'data'), fc.boolean()).map(([bad, field, binary]): Frame => {
        const doc =
          field === 'data'
            ? [Buffer.from('{"action":15,"channel":"fuzz","msgSerial":0,"messages":[{"data":"a'), Buffer.from(bad), Buffer.from('"}]}')]
            : [Buffer.from(`{"action":${field === 'id' ? 0 : 10},"${field}":"a`), Buffer.from(bad), Buffer.from('"}')];
        if (format === 'json') return { data: Buffer.concat(doc), binary, label: `json with invalid UTF-8 ${Buffer.from(bad).toString('hex')} in ${field} (${binary ? 'binary' : 'text'} frame)` };
        const str = Buffer.concat([Buffer.from([0xd9, bad.length]), Buffer.from(bad)]);
        const head = Buffer.from(encodeMsgpack(field === 'data' ? { action: 15, channel: 'fuzz', msgSerial: 0, messages: [{ data: null }] } : { action: field === 'id' ? 0 : 10, [field]: null }));
        return { data: Buffer.concat([head.subarray(0, head.length - 1), str]), binary: true, label: `msgpack with invalid UTF-8 ${Buffer.from(bad).toString('hex')} in ${field}` };
      }),
    },
    {
      weight: format === 'msgpack' ? 2 : 0,
      // MessagePack extension types: the timestamp (-1) decodes to a Date; others to ExtData.
      arbitrary: fc.tuple(fc.constantFrom([0xd6, 0xff, 0x5f, 0, 0, 0], [0xd4, 0x01, 0x00], [0xc7, 0x02, 0x7f, 0x01, 0x02]), fc.constantFrom('data', 'id', 'channel')).map(([ext, field]): Frame => {
        const head = Buffer.from(encodeMsgpack(field === 'data' ? { action: 15, channel: 'fuzz', msgSerial: 0, messages: [{ data: null }] } : { action: field === 'id' ? 0 : 10, [field]: null }));
        return { data: Buffer.concat([head.subarray(0, head.length - 1), Buffer.from(ext)]), binary: true, label: `msgpack extension ${Buffer.from(ext).toString('hex')} in ${field}` };
      }),
    },
    {
      weight: 1,
      // Keys JavaScript objects treat specially, as JSON puts them on the wire (MessagePack's decoder refuses __proto__).
      arbitrary: fc.constantFrom(
        '{"action":15,"channel":"fuzz","msgSerial":0,"messages":[{"__proto__":{"clientId":"x"},"data":"d"}]}',
        '{"action":10,"channel":"fuzz","__proto__":{"channel":"other"}}',
        '{"action":14,"channel":"fuzz","msgSerial":0,"presence":[{"action":2,"clientId":"p","constructor":{"prototype":{"x":1}}}]}',
        '{"action":17,"auth":{"__proto__":{"accessToken":"x"}}}',
        '{"__proto__":{"action":15},"channel":"fuzz"}',
      ).map((doc): Frame => {
        const value = JSON.parse(doc) as unknown;
        return format === 'json' ? { data: doc, binary: false, label: `json ${doc}` } : { data: tryMsgpack(value) ?? Buffer.from(doc), binary: true, label: `msgpack of ${doc}` };
      }),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: maxFrameBytes + 1, max: maxFrameBytes + 100_000 }).map((n): Frame => {
        const doc = `{"action":15,"channel":"fuzz","msgSerial":0,"messages":[{"data":"${'x'.repeat(n)}"}]}`;
        return { data: format === 'json' ? doc : Buffer.from(encodeMsgpack(JSON.parse(doc))), binary: format === 'msgpack', label: `frame over the limit (${n} bytes of data)` };
      }),
    },
  );
}

export function caseArb(format: Format, token: string, maxFrameBytes: number): fc.Arbitrary<Case> {
  return fc.record(
    {
      clientId: fc.oneof(fc.constant(undefined), fc.constantFrom('fuzz-member', 'other')),
      frames: fc.array(frameArb(format, token, maxFrameBytes), { minLength: 1, maxLength: 4 }),
    },
    { requiredKeys: ['frames'] },
  );
}
