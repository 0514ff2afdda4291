// JSON publish bodies take a fast path when their text needs none of the parser's checks
// (src/app.ts: plainJson); every other text goes through fastify's parser and the surrogate check.
// These are the answers of both paths, which must not differ from what the full parser gives.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

const publish = (channel: string, payload: string) =>
  t.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization: t.auth, 'content-type': 'application/json' },
    payload,
  });

const history = async (channel: string): Promise<Record<string, unknown>[]> => {
  const res = await t.service.app.inject({ url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards`, headers: { authorization: t.auth } });
  return res.json() as Record<string, unknown>[];
};

const INVALID_JSON = "malformed request: Body is not valid JSON but content-type is set to 'application/json'";

describe('JSON publish bodies: the plain-text fast path and the full parser answer alike', () => {
  it('a __proto__ or constructor key, plain or escaped, is refused (40001) with a message that names it, not as invalid JSON; nothing is stored', async () => {
    const channel = uniqueChannel();
    for (const body of ['{"__proto__":{"x":1},"name":"p"}', '{"name":"c","constructor":{"prototype":{"x":1}}}', '{"\\u005f_proto__":{"x":1}}']) {
      const res = await publish(channel, body);
      expect(res.statusCode, body).toBe(400);
      expect(res.json().error, body).toMatchObject({ code: 40001, statusCode: 400 });
      expect(res.json().error.message, body).toMatch(/"__proto__" key, or a "constructor" key holding "prototype": refused \(prototype poisoning\)/);
    }
    // Text that is not JSON at all keeps the parser's own answer.
    const broken = await publish(channel, '{"__proto__":');
    expect(broken.json().error).toMatchObject({ code: 40001, message: INVALID_JSON });
    expect(await history(channel)).toEqual([]);
  });

  it('"__proto__" and "constructor" as values are fine', async () => {
    const channel = uniqueChannel();
    expect((await publish(channel, '{"name":"q","data":"__proto__"}')).statusCode).toBe(201);
    expect((await publish(channel, '{"name":"c","data":"constructor"}')).statusCode).toBe(201);
    expect((await history(channel)).map((m) => m.data)).toEqual(['__proto__', 'constructor']);
  });

  it("malformed and empty texts get the parser's own errors (40001)", async () => {
    const channel = uniqueChannel();
    const malformed = await publish(channel, '{"name":');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatchObject({ code: 40001, message: INVALID_JSON });
    const empty = await publish(channel, '');
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error).toMatchObject({ code: 40001, message: "malformed request: Body cannot be empty when content-type is set to 'application/json'" });
  });

  it('a byte order mark before the text is dropped, and escapes are decoded', async () => {
    const channel = uniqueChannel();
    expect((await publish(channel, '\ufeff{"name":"bom"}')).statusCode).toBe(201);
    expect((await publish(channel, '{"name":"esc\\u0041"}')).statusCode).toBe(201);
    expect((await history(channel)).map((m) => m.name)).toEqual(['bom', 'escA']);
  });

  it('a text that is not a message object is refused by the publish rules, as before', async () => {
    const channel = uniqueChannel();
    expect((await publish(channel, '"just a string"')).json().error).toMatchObject({ code: 40001, message: 'message 0 is not an object' });
    expect((await publish(channel, 'null')).json().error).toMatchObject({ code: 40001, message: expect.stringContaining('the request body is empty') });
    expect((await publish(channel, '[]')).json().error).toMatchObject({ code: 40001, message: expect.stringContaining('empty array') });
  });
});

describe('MessagePack publish bodies refuse what JSON ones do (spec: Common behaviour, request body format)', () => {
  const publishPacked = (channel: string, payload: unknown) =>
    t.service.app.inject({
      method: 'POST',
      url: `/channels/${encodeURIComponent(channel)}/messages`,
      headers: { authorization: t.auth, 'content-type': 'application/x-msgpack' },
      payload: Buffer.from(encode(payload)),
    });

  it('a "constructor" key holding "prototype" is refused (40001, prototype poisoning), at any depth, in a publish and in a batch; nothing is stored', async () => {
    const channel = uniqueChannel();
    for (const body of [
      { name: 'c', constructor: { prototype: { x: 1 } } },
      { name: 'd', data: { deep: [{ constructor: { prototype: {} } }] } },
    ]) {
      const json = await publish(channel, JSON.stringify(body));
      const packed = await publishPacked(channel, body);
      for (const res of [json, packed]) {
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json().error.message).toMatch(/refused \(prototype poisoning\)/);
      }
    }
    const batch = await t.service.app.inject({
      method: 'POST',
      url: '/messages',
      headers: { authorization: t.auth, 'content-type': 'application/x-msgpack' },
      payload: Buffer.from(encode({ channels: [channel], messages: { data: { constructor: { prototype: 1 } } } })),
    });
    expect([batch.statusCode, batch.json().error.code]).toEqual([400, 40001]);
    expect(await history(channel)).toEqual([]);
  });

  it('"constructor" and "prototype" as keys on their own, and as values, are fine', async () => {
    const channel = uniqueChannel();
    expect((await publishPacked(channel, { name: 'a', data: { constructor: 'x', prototype: { constructor: 1 } } })).statusCode).toBe(201);
    expect((await publishPacked(channel, { name: 'b', data: 'prototype' })).statusCode).toBe(201);
    expect((await history(channel)).map((m) => m.name)).toEqual(['a', 'b']);
  });
});

describe('text/plain bodies holding JSON (spec: Request an access token) are checked as application/json ones are', () => {
  const send = (url: string, payload: string) =>
    t.service.app.inject({ method: 'POST', url, headers: { authorization: t.auth, 'content-type': 'text/plain' }, payload });

  it('a __proto__ key or a constructor holding prototype is refused (40001, prototype poisoning) on every route, not stored', async () => {
    const channel = uniqueChannel();
    for (const [url, body] of [
      [`/channels/${channel}/messages`, '{"name":"a","data":{"__proto__":{"x":1}}}'],
      [`/channels/${channel}/messages`, '{"name":"b","data":{"constructor":{"prototype":1}}}'],
      ['/messages', `{"channels":["${channel}"],"messages":{"data":{"__proto__":{"y":1}}}}`],
      [`/keys/${t.key.split(':')[0]}/requestToken`, '{"keyName":"x","__proto__":{"ttl":1}}'],
    ]) {
      const res = await send(url, body);
      expect(res.statusCode, body).toBe(400);
      expect(res.json().error, body).toMatchObject({ code: 40001, message: expect.stringMatching(/refused \(prototype poisoning\)/) });
    }
    expect(await history(channel)).toEqual([]);
  });

  it('plain JSON, and text that is not JSON, are answered as before', async () => {
    const channel = uniqueChannel();
    expect((await send(`/channels/${channel}/messages`, '{"name":"plain","data":"__proto__"}')).statusCode).toBe(201);
    const broken = await send(`/channels/${channel}/messages`, '{"name":');
    expect([broken.statusCode, broken.json().error.message]).toEqual([400, 'the text/plain body must hold JSON']);
    expect((await history(channel)).map((m) => m.name)).toEqual(['plain']);
  });
});
