// Hostile inputs, as fast-check arbitraries: bodies in every format the service reads (and in
// some it does not), headers of every shape, path segments mis-encoded on purpose, and query
// parameters with wrong types, repeats and extremes. Sizes stay bounded so a run stays bounded.
import fc from 'fast-check';
import { encode as encodeMsgpack } from '@msgpack/msgpack';
import { DEFAULT_LIMITS } from '../../src/limits.js';

export interface Body {
  contentType?: string;
  bytes?: Buffer;
  /** Short human form for failure reports. */
  label: string;
  /** Set when the service must refuse this body: why. */
  mustRefuse?: string;
}

// ---- values ----------------------------------------------------------------------------------

const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const binaryText = fc.string({ unit: 'binary', maxLength: 40 });

/** Nested arrays or objects `depth` levels deep, as JSON text (cheap to build at any depth). */
export const nestedJson = (depth: number, kind: 'array' | 'object'): string =>
  kind === 'array' ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** The same nesting in MessagePack: fixarray-of-one headers (0x91) or fixmap-of-one (0x81 "a"). */
export const nestedMsgpack = (depth: number, kind: 'array' | 'object'): Buffer =>
  kind === 'array'
    ? Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0x01])])
    : Buffer.concat([Buffer.from(new Array(depth).fill([0x81, 0xa1, 0x61]).flat()), Buffer.from([0x01])]);

export const depthArb = fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 90, max: 200 }), fc.integer({ min: 1000, max: 20_000 }));
export const kindArb = fc.constantFrom<'array' | 'object'>('array', 'object');

/** Values for message fields: right and wrong types, empties, extremes. */
export const fieldValue = fc.oneof(
  { weight: 4, arbitrary: text },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom('', '*', null, 0, -1, 1e308, true, [], {}, 'a'.repeat(300)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 70_000 }).map((n) => 'x'.repeat(n)) },
);

export const encodingArb = fc.oneof(fc.constantFrom('base64', 'json', 'utf-8', 'utf-8/base64', 'json/base64', '/', '//', 'cipher+aes-128-cbc/base64', ''), text);

/** Something shaped like a message, with any of its fields missing, wrong or extreme. */
export const messageLike = fc.record(
  {
    name: fieldValue,
    data: fc.oneof(fieldValue, fc.base64String({ maxLength: 40 })),
    encoding: encodingArb,
    clientId: fieldValue,
    id: fieldValue,
    extras: fc.oneof(fieldValue, fc.record({ push: fc.oneof(fieldValue, fc.record({ notification: fc.record({ title: text }) })) })),
    connectionKey: fieldValue,
    timestamp: fc.oneof(fc.integer(), text),
  },
  { requiredKeys: [] },
);

const messages = fc.oneof({ weight: 3, arbitrary: messageLike }, { weight: 2, arbitrary: fc.array(messageLike, { maxLength: 8 }) }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) });

// ---- bodies ----------------------------------------------------------------------------------

const WRONG_TYPES = [
  'application/xml',
  'text/csv',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'application/json, text/plain',
  'application/msgpack',
  'application/octet-stream',
  'application/x-msgpack; charset=utf-8',
  ';',
  'json',
];

const json = (label: string, value: unknown): Body => ({ contentType: 'application/json', bytes: Buffer.from(JSON.stringify(value) ?? 'null'), label: `json ${label}` });

/** Invalid UTF-8 sequences: a lone continuation byte, an overlong form, a surrogate, a truncated sequence, 0xff. */
export const invalidUtf8 = fc.constantFrom([0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xff], [0xc3, 0x28], [0xf8, 0x88, 0x80, 0x80, 0x80]);

/**
 * Where deep nesting goes in a route's body: the document around a nested value, as JSON text;
 * `inMessage` when the value lands in a message's data or extras, whose depth is limited.
 */
export interface DeepTemplate {
  wrap: (nested: string) => string;
  inMessage?: boolean;
}

const messageDeep: DeepTemplate[] = [
  { wrap: (n) => `{"name":"n","data":${n}}`, inMessage: true },
  { wrap: (n) => `{"name":"n","extras":{"push":${n}}}`, inMessage: true },
  { wrap: (n) => n },
  { wrap: (n) => `[{"data":"a"},{"data":${n}}]`, inMessage: true },
];

// A little slack over the limit, so that where the count starts (data itself as level 1 or 0) does not matter.
const OVER_DEPTH = DEFAULT_LIMITS.maxDataDepth + 2;
const TOO_DEEP = `message data nests deeper than maxDataDepth (${DEFAULT_LIMITS.maxDataDepth})`;

/**
 * Bodies built around one structured value (messages, token requests, batch specs...), plus deep
 * nesting placed by the route's templates (built as text: a value 20,000 levels deep would
 * overflow the stack of anything that walks it here, fast-check and JSON.stringify included).
 */
export function bodiesOf(structured: fc.Arbitrary<unknown>, deep: DeepTemplate[] = messageDeep): fc.Arbitrary<Body> {
  return fc.oneof(
    { weight: 8, arbitrary: structured.map((v) => json('value', v)) },
    {
      weight: 3,
      arbitrary: structured.map((v): Body => {
        try {
          return { contentType: 'application/x-msgpack', bytes: Buffer.from(encodeMsgpack(v)), label: 'msgpack value' };
        } catch {
          return json('value', v);
        }
      }),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(depthArb, kindArb, fc.integer({ min: 0, max: deep.length - 1 })).map(([d, k, i]): Body => ({
        contentType: 'application/json',
        bytes: Buffer.from(deep[i].wrap(nestedJson(d, k))),
        label: `json nested ${k} depth ${d} in ${deep[i].wrap('<nested>')}`,
        mustRefuse: deep[i].inMessage && d > OVER_DEPTH ? TOO_DEEP : undefined,
      })),
    },
    {
      weight: deep === messageDeep ? 1 : 0,
      arbitrary: fc.tuple(depthArb, kindArb).map(([d, k]): Body => ({
        contentType: 'application/x-msgpack',
        // {data: <nested>} as a fixmap of one entry
        bytes: Buffer.concat([Buffer.from([0x81, 0xa4, ...Buffer.from('data')]), nestedMsgpack(d, k)]),
        label: `msgpack nested ${k} depth ${d} in data`,
        mustRefuse: d > OVER_DEPTH ? TOO_DEEP : undefined,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 60_000, max: 3_000_000 }).map((n): Body => ({
        contentType: 'application/json',
        bytes: Buffer.from(`{"name":"huge","data":"${'x'.repeat(n)}"}`),
        label: `json data string of ${n} bytes`,
      })),
    },
    {
      weight: 2,
      arbitrary: fc.tuple(invalidUtf8, fc.constantFrom('data', 'name', 'clientId')).map(([bad, field]): Body => ({
        contentType: 'application/json',
        bytes: Buffer.concat([Buffer.from(`{"${field}":"a`), Buffer.from(bad), Buffer.from('b"}')]),
        label: `json with invalid UTF-8 ${Buffer.from(bad).toString('hex')} in ${field}`,
        mustRefuse: 'a JSON body must be UTF-8 (RFC 8259) and this one is not',
      })),
    },
    {
      weight: 1,
      arbitrary: invalidUtf8.map((bad): Body => ({
        contentType: 'application/x-msgpack',
        // {data: str8 holding the bad bytes}
        bytes: Buffer.concat([Buffer.from([0x81, 0xa4, ...Buffer.from('data'), 0xd9, bad.length + 2, 0x61]), Buffer.from(bad), Buffer.from([0x62])]),
        label: `msgpack str with invalid UTF-8 ${Buffer.from(bad).toString('hex')} in data`,
        mustRefuse: 'a MessagePack str must be UTF-8 and this one is not',
      })),
    },
    {
      weight: 2,
      arbitrary: fc.dictionary(fc.oneof(fc.constantFrom('name', 'data', 'clientId', 'id', 'encoding', 'extras', 'timestamp', 'keyName', 'ttl'), text), text, { maxKeys: 5 }).map(
        (form): Body => ({
          contentType: 'application/x-www-form-urlencoded',
          bytes: Buffer.from(new URLSearchParams(form).toString()),
          label: `form ${JSON.stringify(form)}`,
        }),
      ),
    },
    { weight: 1, arbitrary: text.map((s): Body => ({ contentType: 'text/plain', bytes: Buffer.from(s), label: `text ${JSON.stringify(s)}` })) },
    {
      weight: 2,
      arbitrary: fc.tuple(fc.uint8Array({ maxLength: 200 }), fc.constantFrom('application/json', 'application/x-msgpack', 'text/plain', 'application/x-www-form-urlencoded', ...WRONG_TYPES)).map(
        ([bytes, type]): Body => ({ contentType: type, bytes: Buffer.from(bytes), label: `${type} bytes ${Buffer.from(bytes).toString('hex').slice(0, 60)}` }),
      ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(structured, fc.constantFrom(...WRONG_TYPES)).map(([v, type]): Body => ({ contentType: type, bytes: Buffer.from(JSON.stringify(v) ?? ''), label: `${type} holding json` })),
    },
    { weight: 1, arbitrary: fc.constantFrom<Body>({ label: 'no body' }, { contentType: 'application/json', bytes: Buffer.alloc(0), label: 'json, empty' }, { contentType: 'application/x-msgpack', bytes: Buffer.alloc(0), label: 'msgpack, empty' }) },
  );
}

export const messageBodies = bodiesOf(messages);

// ---- path segments ---------------------------------------------------------------------------

const PATH_TRICKS = [
  '..',
  '.',
  '%2e%2e',
  '%2F',
  'a%2Fb',
  '%2f..%2f..%2fetc',
  '%',
  '%z',
  '%zz',
  'a%',
  '%E0%A4',
  '%C3%28',
  '%FF',
  '%C0%AF',
  '%ED%A0%80',
  '%00',
  '%0A',
  '%20',
  '[meta]log',
  '%5Bmeta%5Dlog',
  '[meta]',
  '%5Bmeta%5D',
  '[meta]%5Bmeta%5D',
  '[?rewind=1]x',
  '%5B%3Frewind%3D1%5Dx',
  '[foo]bar',
  '[',
  ']',
  ':',
  ':x',
  'ns:x',
  'persisted:x',
  '*',
  '~',
  "'",
  '"',
  '<script>',
];

/** One path segment, as it goes on the wire: encoded, mis-encoded, very long, or raw bytes. */
export const segment = fc.oneof(
  { weight: 4, arbitrary: text.filter((s) => s.length > 0).map(encodeURIComponent) },
  { weight: 3, arbitrary: fc.constantFrom(...PATH_TRICKS) },
  { weight: 2, arbitrary: fc.array(fc.oneof(fc.constantFrom(...PATH_TRICKS), fc.stringMatching(/^[a-z0-9]{1,6}$/)), { minLength: 2, maxLength: 4 }).map((p) => p.join('')) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 1000, max: 6000 }), fc.constantFrom('x', '%C3%A9', '%E2%82%AC')).map(([n, unit]) => unit.repeat(Math.ceil(n / (unit.length > 1 ? 3 : 1)))),
  },
  // Raw bytes 0x21-0xff except the ones that end a segment: invalid UTF-8 straight on the wire.
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 12, min: 0x21, max: 0xff })
      .map((b) => Buffer.from(b.filter((x) => x !== 0x2f && x !== 0x3f && x !== 0x23).length > 0 ? b.filter((x) => x !== 0x2f && x !== 0x3f && x !== 0x23) : [0x78]).toString('latin1')),
  },
);

// ---- query parameters ------------------------------------------------------------------------

const PARAM_VALUES: Record<string, string[]> = {
  start: ['0', '1', '-1', '1700000000000', '99999999999999999', '1e3', '0x10', 'now', '2024-01-31:23:59', '2024-13-45:99:99'],
  end: ['0', '1', '-1', '1700000000000', '99999999999999999', '1.5', 'Infinity', '2024-01-31:23:59'],
  limit: ['0', '1', '1000', '1001', '-5', '1.5', '1e3', 'NaN', '99999999999999999'],
  direction: ['forwards', 'backwards', 'sideways', 'FORWARDS'],
  format: ['json', 'jsonp', 'msgpack', 'html', 'json', 'msgpack', 'html', 'JSON', 'xml'],
  envelope: ['json', 'json', 'true', 'xml', 'msgpack'],
  fields: ['id', 'data.x', 'a..b', '*', '.', 'name,data', ''],
  flatten: ['true', 'false', 'yes'],
  select: ['*.id', 'a.*.b', '.', '*', '0.name'],
  callback: ['cb', 'a.b', '1bad', 'alert(1)//', 'x'.repeat(200), '$_', ''],
  v: ['0.8', '1.2', '2', '6', '6', '7', 'abc', ''],
  unit: ['minute', 'hour', 'day', 'month', 'year', 'MINUTE'],
  by: ['minute', 'hour', 'week', 'id', 'value'],
  cursor: ['0', '1', '-1', 'abc', '99999999999999999', 'fuzz-a', '[meta]x'],
  prefix: ['fuzz-', '', 'ns:', '[meta]', '*', 'x'.repeat(3000)],
  clientId: ['a', '*', ''],
  connectionId: ['c', ''],
  channel: ['a', 'a,b', ',', 'a,,b', '[meta]x', 'x'.repeat(3000)],
  channels: ['a', 'a,b', ''],
  separator: [',', '', '||', 'xxxxxxxxxx', ':'],
  rewind: ['1'],
};
const PARAM_NAMES = Object.keys(PARAM_VALUES);

const paramValue = (name: string): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom(...(PARAM_VALUES[name] ?? [''])).map(encodeURIComponent) },
    { weight: 4, arbitrary: text.map(encodeURIComponent) },
    { weight: 2, arbitrary: fc.constantFrom('%', '%zz', '%C3%28', '%FF', '%00', '%E0%A4', '+', '&', '=') },
    { weight: 1, arbitrary: fc.integer({ min: 1000, max: 10_000 }).map((n) => 'x'.repeat(n)) },
  );

const param = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...PARAM_NAMES).chain((name) => paramValue(name).map((v) => `${name}=${v}`)) },
  { weight: 1, arbitrary: fc.tuple(binaryText.map(encodeURIComponent), text.map(encodeURIComponent)).map(([k, v]) => `${k}=${v}`) },
  { weight: 1, arbitrary: fc.constantFrom(...PARAM_NAMES) },
);

/** A query string (with its `?`), or none; names may repeat. */
export const queryString = fc.oneof({ weight: 1, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.array(param, { minLength: 1, maxLength: 4 }).map((ps) => `?${ps.join('&')}`) });

// ---- headers ---------------------------------------------------------------------------------

/** Header values node:http will send: no control characters, nothing above 0xff. */
const headerSafe = (s: string): string => s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '?');
const headerText = fc.string({ unit: 'binary', maxLength: 60 }).map(headerSafe);

const ACCEPTS = [
  'application/json',
  'application/x-msgpack',
  'text/html',
  'application/javascript',
  '*/*',
  'text/html;q=0',
  'application/json;q=abc',
  'application/x-msgpack;q=0.1, text/html;q=0.9',
  'image/png',
  ',,,',
  ';q=1',
];

const VERSIONS = ['0.8', '1.2', '2', '6', '7', '1.0.0', 'abc', '', ' 2 ', '-1', '1e1'];

export interface Credentials {
  /** Authorization of the app's root key. */
  valid: string;
  /** A token of that key (Bearer). */
  token: string;
  keyName: string;
}

export function authorizationArb(c: Credentials): fc.Arbitrary<string | undefined> {
  const b64 = (s: string): string => Buffer.from(s, 'latin1').toString('base64');
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant(c.valid) },
    { weight: 2, arbitrary: fc.constant(c.token) },
    { weight: 2, arbitrary: fc.constant(undefined) },
    {
      weight: 4,
      arbitrary: fc.oneof(
        headerText.map((s) => `Basic ${b64(s)}`),
        headerText.map((s) => `Basic ${b64(`${c.keyName}:${s}`)}`),
        headerText.map((s) => `Bearer ${b64(s)}`),
        headerText.map((s) => `Bearer ${s}`),
        headerText,
        fc.constantFrom('Basic', 'Basic ', 'Bearer', 'Bearer ', 'Basic !!!', 'Basic ====', 'Digest abc', 'basic', ' ', `Basic ${b64(c.keyName)}`, `Bearer ${b64('a.b.c')}`, `${c.valid}, ${c.valid}`),
        fc.integer({ min: 1000, max: 12_000 }).map((n) => `Bearer ${'A'.repeat(n)}`),
      ),
    },
  );
}

/** Absent most of the time, else mostly a value the service accepts, sometimes junk. */
const sometimes = <T>(valid: fc.Arbitrary<T>, junk: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, { weight: 3, arbitrary: valid }, { weight: 1, arbitrary: junk });

export function headersArb(c: Credentials): fc.Arbitrary<Record<string, string>> {
  return fc
    .record({
      accept: sometimes(fc.constantFrom(...ACCEPTS), headerText),
      authorization: authorizationArb(c),
      'x-ably-version': sometimes(fc.constantFrom('0.8', '1.2', '2', '6'), fc.oneof(fc.constantFrom(...VERSIONS), headerText)),
      'x-service-version': sometimes(fc.constantFrom('0.8', '2'), fc.oneof(fc.constantFrom(...VERSIONS), headerText)),
      'x-ably-clientid': sometimes(fc.constantFrom('a', 'client-1'), fc.oneof(fc.constantFrom('*', ''), headerText)),
    })
    .map((h) => {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = v;
      return out;
    });
}
