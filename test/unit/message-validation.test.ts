import { describe, expect, it } from 'vitest';
import { MAX_EXTRAS_HEADERS, MAX_EXTRAS_NAME_LENGTH, parsePublishBody } from '../../src/messages/message.js';

const limits = { maxMessageSize: 1024, maxMessagesPerPublish: 10, maxPublishBytes: 4096, maxDataDepth: 8 };
const parse = (body: unknown, clientId?: string) => parsePublishBody(body, limits, { clientId, method: clientId === undefined ? 'basic' : 'token' });
const code = (fn: () => unknown): number | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code: number }).code;
  }
  return undefined;
};

describe('publish body (spec: Message)', () => {
  it('accepts one message or an array and assigns ids "<base>:<index>" to messages without one', () => {
    const [one] = parse({ name: 'n', data: 'd' });
    expect(one.id).toMatch(/^[\w-]{9,}:0$/);
    const many = parse([{ data: 'a' }, { data: 'b' }]);
    expect(many[1].id).toBe(`${many[0].id.split(':')[0]}:1`);
  });

  it('keeps a client-supplied id (idempotent publishing)', () => {
    expect(parse({ id: 'mine:0', data: 'x' })[0].id).toBe('mine:0');
  });

  it('takes data as a string, JSON object or array, or bytes', () => {
    expect(parse({ data: { a: 1 } })[0].data).toEqual({ a: 1 });
    expect(parse({ data: [1, 2] })[0].data).toEqual([1, 2]);
    expect(parse({ data: new Uint8Array([1, 2]) })[0].data).toEqual(new Uint8Array([1, 2]));
    expect(code(() => parse({ data: 42 }))).toBe(40013);
    expect(code(() => parse({ data: true }))).toBe(40013);
  });

  it('ignores the fields the SDKs add (action, size)', () => {
    const [m] = parse({ data: 'x', action: 0, size: 1 });
    expect(m).not.toHaveProperty('action');
    expect(m).not.toHaveProperty('size');
  });

  it('refuses data that does not match its encoding (40013)', () => {
    expect(code(() => parse({ data: 'not base64!', encoding: 'base64' }))).toBe(40013);
    expect(code(() => parse({ data: '{bad', encoding: 'json' }))).toBe(40013);
    expect(code(() => parse({ data: 'x', encoding: 'utf-8//base64' }))).toBe(40013);
    expect(parse({ data: 'AAH/', encoding: 'base64' })[0].encoding).toBe('base64');
    expect(parse({ data: 'opaque', encoding: 'json/utf-8/cipher+aes-128-cbc' })[0].encoding).toBe('json/utf-8/cipher+aes-128-cbc');
  });

  it('extras hold push, headers and ref; any other field is refused (40032)', () => {
    const extras = { push: { notification: { title: 't' } }, headers: { s: 'v', n: 1.5, b: false, z: null }, ref: { type: 'com.ably.reply', timeserial: 'abc@1' } };
    expect(parse({ extras })[0].extras).toEqual(extras);
    expect(parse({ extras: { headers: {} } })[0].extras).toEqual({ headers: {} });
    expect(code(() => parse({ extras: { push: 'x' } }))).toBe(40032);
    expect(code(() => parse({ extras: [1] }))).toBe(40032);
    expect(code(() => parse({ extras: { ephemeral: true } }))).toBe(40032);
  });

  it('extras.headers must be a flat map of strings, finite numbers, booleans and null (40032)', () => {
    expect(code(() => parse({ extras: { headers: 'h' } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: ['a'] } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: { h: { nested: 1 } } } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: { h: [1] } } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: { h: new Uint8Array([1]) } } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: { h: Number.NaN } } }))).toBe(40032);
    expect(code(() => parse({ extras: { headers: { '': 'v' } } }))).toBe(40032);
  });

  it('extras.headers holds at most MAX_EXTRAS_HEADERS headers, each name at most MAX_EXTRAS_NAME_LENGTH characters', () => {
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`h${i}`, 1]));
    const wide = { ...limits, maxMessageSize: 65_536 };
    expect(parsePublishBody({ extras: { headers: many(MAX_EXTRAS_HEADERS) } }, wide, { method: 'basic' })).toHaveLength(1);
    expect(code(() => parsePublishBody({ extras: { headers: many(MAX_EXTRAS_HEADERS + 1) } }, wide, { method: 'basic' }))).toBe(40032);
    expect(parse({ extras: { headers: { ['h'.repeat(MAX_EXTRAS_NAME_LENGTH)]: 1 } } })).toHaveLength(1);
    expect(code(() => parse({ extras: { headers: { ['h'.repeat(MAX_EXTRAS_NAME_LENGTH + 1)]: 1 } } }))).toBe(40032);
  });

  it('extras.ref must be { type, timeserial }, both non-empty strings (40032)', () => {
    expect(code(() => parse({ extras: { ref: 1 } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { type: 'com.ably.reply' } } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { timeserial: 's' } } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { type: '', timeserial: 's' } } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { type: 't', timeserial: 7 } } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { type: 't', timeserial: 's', other: 1 } } }))).toBe(40032);
    expect(code(() => parse({ extras: { ref: { type: 't', timeserial: 's'.repeat(MAX_EXTRAS_NAME_LENGTH + 1) } } }))).toBe(40032);
  });

  it('counts extras in the message size (40009)', () => {
    expect(code(() => parse({ extras: { headers: { h: 'x'.repeat(1020) } } }))).toBe(40009);
  });

  it('refuses messages over the size limit (40009)', () => {
    expect(code(() => parse({ data: 'x'.repeat(1025) }))).toBe(40009);
    expect(parse({ data: 'x'.repeat(1024) })).toHaveLength(1);
  });

  it('refuses a connectionKey that names no realtime connection (40030)', () => {
    expect(code(() => parse({ data: 'x', connectionKey: 'abc' }))).toBe(40030);
  });

  it('refuses malformed bodies: empty, empty array, non-objects, too many messages', () => {
    expect(code(() => parse(undefined))).toBe(40001);
    expect(code(() => parse([]))).toBe(40001);
    expect(code(() => parse(['x']))).toBe(40001);
    expect(code(() => parse(Array.from({ length: 11 }, () => ({}))))).toBe(40034);
    expect(code(() => parse({ name: 5 }))).toBe(40016);
  });

  it('a message clientId must match the credentials clientId', () => {
    expect(parse({ data: 'x' }, 'bob')[0].clientId).toBe('bob');
    expect(parse({ data: 'x', clientId: 'bob' }, 'bob')[0].clientId).toBe('bob');
    expect(code(() => parse({ data: 'x', clientId: 'eve' }, 'bob'))).toBe(40012);
    expect(parse({ data: 'x', clientId: 'eve' }, '*')[0].clientId).toBe('eve');
    expect(code(() => parse({ clientId: '*' }))).toBe(40012);
  });
});

describe('publish limits (issue 10: one message cannot hurt other publishes)', () => {
  const nested = (depth: number): unknown => {
    let v: unknown = 'leaf';
    for (let i = 0; i < depth; i++) v = i % 2 ? { v } : [v];
    return v;
  };

  it('refuses data nested deeper than the limit with 40013, however deep (no stack overflow)', () => {
    expect(parse({ data: nested(8) })[0].data).toBeDefined();
    expect(code(() => parse({ data: nested(9) }))).toBe(40013);
    expect(code(() => parse({ data: nested(100_000) }))).toBe(40013);
  });

  it('refuses extras nested deeper than the limit with 40032', () => {
    expect(code(() => parse({ extras: { push: nested(20) } }))).toBe(40032);
  });

  it('refuses data holding values JSON cannot carry (dates, class instances from MessagePack extensions)', () => {
    expect(code(() => parse({ data: { when: new Date(0) } }))).toBe(40013);
    expect(code(() => parse({ data: [new Map()] }))).toBe(40013);
  });

  it('refuses a publish whose messages add up to more than maxPublishBytes with 40009', () => {
    const data = 'x'.repeat(1000);
    expect(parse(Array.from({ length: 4 }, () => ({ data })))).toHaveLength(4);
    expect(code(() => parse(Array.from({ length: 5 }, () => ({ data }))))).toBe(40009);
  });
});
