import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode, encode } from '@msgpack/msgpack';
import { startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ MAX_MESSAGE_SIZE: '2048' });
});
afterAll(() => t.close());

const publish = (channel: string, payload: unknown, headers: Record<string, string> = {}) =>
  t.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization: t.auth, 'content-type': 'application/json', ...headers },
    payload: typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload),
  });

const history = async (channel: string, query = '') => {
  const res = await t.service.app.inject({
    method: 'GET',
    url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards${query}`,
    headers: { authorization: t.auth },
  });
  expect(res.statusCode).toBe(200);
  return res.json() as Record<string, unknown>[];
};

describe('POST /channels/<channel_id>/messages (spec: Publish messages to a channel)', () => {
  it('publishes one message in JSON; the service assigns id and timestamp', async () => {
    const channel = uniqueChannel();
    const before = Date.now();
    const res = await publish(channel, { name: 'greeting', data: 'hello' });
    expect(res.statusCode).toBe(201);
    const [m] = await history(channel);
    expect(m).toMatchObject({ name: 'greeting', data: 'hello' });
    expect(m.id).toMatch(/:0$/);
    expect(m.timestamp as number).toBeGreaterThanOrEqual(before);
  });

  it('publishes an array of messages in order', async () => {
    const channel = uniqueChannel();
    await publish(channel, [{ name: 'a', data: { x: 1 } }, { name: 'b', data: [1, 2] }, { name: 'c' }]);
    expect((await history(channel)).map((m) => m.name)).toEqual(['a', 'b', 'c']);
  });

  it('accepts MessagePack bodies, with bytes as data', async () => {
    const channel = uniqueChannel();
    const res = await publish(channel, Buffer.from(encode([{ name: 'bin', data: new Uint8Array([0, 1, 255]) }])), {
      'content-type': 'application/x-msgpack',
    });
    expect(res.statusCode).toBe(201);
    const [json] = await history(channel);
    expect(json).toMatchObject({ name: 'bin', data: 'AAH/', encoding: 'base64' });
    const packed = await t.service.app.inject({
      url: `/channels/${channel}/messages`,
      headers: { authorization: t.auth, accept: 'application/x-msgpack' },
    });
    expect(packed.headers['content-type']).toBe('application/x-msgpack');
    const [m] = decode(packed.rawPayload) as { data: Uint8Array; encoding?: string }[];
    expect(Buffer.from(m.data)).toEqual(Buffer.from([0, 1, 255]));
    expect(m.encoding).toBeUndefined();
  });

  it('a lone surrogate in JSON text (name, data, a key) is refused as invalid text (40001); nothing is stored; an escaped pair is fine', async () => {
    const channel = uniqueChannel();
    for (const body of ['{"name":"n","data":"a\\ud800b"}', '{"name":"\\uDC00"}', '[{"data":{"k\\udbff":1}}]']) {
      const res = await publish(channel, body);
      expect(res.statusCode, body).toBe(400);
      expect(res.json().error).toMatchObject({ code: 40001, statusCode: 400, message: expect.stringContaining('lone surrogate') });
      expect(res.headers['x-ably-errorcode']).toBe('40001');
    }
    expect((await publish(channel, '{"name":"pair","data":"\\ud83d\\ude00 \\\\ud800"}')).statusCode).toBe(201);
    expect(await history(channel)).toMatchObject([{ name: 'pair', data: '\u{1F600} \\ud800' }]);
  });

  it('accepts form-urlencoded bodies', async () => {
    const channel = uniqueChannel();
    const res = await publish(channel, 'name=form&data=value', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(res.statusCode).toBe(201);
    expect(await history(channel)).toMatchObject([{ name: 'form', data: 'value' }]);
  });

  it('a client-supplied id makes the publish idempotent', async () => {
    const channel = uniqueChannel();
    expect((await publish(channel, { id: 'fixed:0', data: 'once' })).statusCode).toBe(201);
    expect((await publish(channel, { id: 'fixed:0', data: 'once' })).statusCode).toBe(201);
    expect((await publish(channel, [{ id: 'fixed:0', data: 'once' }, { id: 'fixed:1', data: 'twice' }])).statusCode).toBe(201);
    expect((await history(channel)).map((m) => m.id)).toEqual(['fixed:0', 'fixed:1']);
  });

  it("a client cannot take the id the service assigns next: publishing the ids that would follow an assigned one does not drop another client's message from history", async () => {
    const channel = uniqueChannel();
    // A publish mixing a client's id and an assigned one shows an assigned id (its base, then ":1").
    expect((await publish(channel, [{ id: 'first', data: 'a' }, { data: 'b' }])).statusCode).toBe(201);
    const assigned = (await history(channel))[1].id as string;
    const base = assigned.slice(0, -':1'.length);
    // Were ids a per-process prefix (8 characters) and a counter, these would be the next ones.
    const counter = parseInt(base.slice(8), 36);
    const guesses = Array.from({ length: 20 }, (_, k) => `${base.slice(0, 8)}${(counter + 1 + k).toString(36)}:1`);
    for (const [k, id] of guesses.entries()) {
      // Mixed with an id of the client's own, so history checks every id of the publish.
      expect((await publish(channel, [{ id, data: 'taken' }, { id: `hostile-${k}`, data: 'x' }])).statusCode).toBe(201);
    }
    expect((await publish(channel, [{ id: 'victim-own', data: 'c' }, { data: 'victim' }])).statusCode).toBe(201);
    const data = (await history(channel)).map((m) => m.data);
    expect(data).toContain('victim');
    expect(data.filter((d) => d === 'taken')).toHaveLength(guesses.length);
  });

  it('stores data and encoding unchanged (encrypted data stays as it came)', async () => {
    const channel = uniqueChannel();
    const data = 'HO4cYSP8LybPYBPZPHQOtuD53yrD3YV3NBoTEYBh4U0N1QXHbtkfsDfTspKeLQFt';
    await publish(channel, { data, encoding: 'json/utf-8/cipher+aes-128-cbc/base64' });
    expect(await history(channel)).toMatchObject([{ data, encoding: 'json/utf-8/cipher+aes-128-cbc/base64' }]);
  });

  it('answers the SDK protocol (version 6) with a body: channel, messageId and serials', async () => {
    const channel = uniqueChannel();
    const res = await publish(channel, [{ id: 'abc:0', data: 'x' }], { 'x-ably-version': '6' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ channel, messageId: 'abc', serials: ['abc:0'] });
  });

  describe('refusals, each in the spec error format and never a 5xx', () => {
    const cases: [string, () => ReturnType<typeof publish>, number, number][] = [
      ['an invalid channel name', () => publish('[bad]name', { data: 'x' }), 400, 40010],
      ['an oversize message', () => publish(uniqueChannel(), { data: 'x'.repeat(3000) }), 400, 40009],
      ['data not matching its encoding', () => publish(uniqueChannel(), { data: '%%%', encoding: 'base64' }), 400, 40013],
      // Numbers with no JSON form: accepted, a JSON reader got null for them (review finding).
      ['data holding a number JSON cannot hold (1e999)', () => publish(uniqueChannel(), '{"data":{"big":1e999}}'), 400, 40013],
      ['data holding NaN (MessagePack)', () => publish(uniqueChannel(), Buffer.from(encode({ data: [Number.NaN] })), { 'content-type': 'application/x-msgpack' }), 400, 40013],
      ['extras holding Infinity (MessagePack)', () => publish(uniqueChannel(), Buffer.from(encode({ extras: { push: { n: Infinity } } })), { 'content-type': 'application/x-msgpack' }), 400, 40032],
      ['malformed JSON', () => publish(uniqueChannel(), '{"data":'), 400, 40001],
      ['an empty body', () => publish(uniqueChannel(), '', { 'content-type': 'application/json' }), 400, 40001],
      ['malformed MessagePack', () => publish(uniqueChannel(), Buffer.from([0xc1]), { 'content-type': 'application/x-msgpack' }), 400, 40001],
      ['an unsupported Content-Type', () => publish(uniqueChannel(), 'x', { 'content-type': 'image/png' }), 415, 40001],
      ['extras.ref that is not { type, timeserial }', () => publish(uniqueChannel(), { extras: { ref: 1 } }), 400, 40032],
      ['an unknown connectionKey', () => publish(uniqueChannel(), { data: 'x', connectionKey: 'k' }), 400, 40030],
      ['a publish to a metachannel', () => publish('[meta]channel.lifecycle', { data: 'x' }), 401, 40160],
    ];
    it.each(cases)('refuses %s', async (_what, send, status, code) => {
      const res = await send();
      expect(res.statusCode).toBe(status);
      expect(res.json()).toMatchObject({ error: { code, statusCode: status, message: expect.any(String) } });
      expect(res.headers['x-service-errorcode']).toBe(String(code));
      expect(res.headers['x-ably-errorcode']).toBe(String(code));
      expect(res.headers['x-service-errormessage']).toBeTruthy();
      expect(res.headers['content-type']).toBe('application/json');
    });

    it('a refused publish stores nothing', async () => {
      const channel = uniqueChannel();
      await publish(channel, [{ data: 'ok' }, { data: 5 }]);
      expect(await history(channel)).toEqual([]);
    });
  });
});

describe('when the log cannot acknowledge a publish', () => {
  it('answers 503 (50005), so the client retries; nothing is in history; the failure is logged', async () => {
    const { embeddedAdapters } = await import('../../src/service.js');
    const { parseConfig } = await import('../../src/config.js');
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const failing = await startTestService({}, {
      logger,
      adapters: (dataDir) => {
        const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir }));
        const append = adapters.log.append.bind(adapters.log);
        adapters.log.append = async (topic, records) => {
          if (topic === 'messages') throw new Error('disk full');
          return append(topic, records);
        };
        return adapters;
      },
    });
    try {
      const channel = uniqueChannel();
      const res = await failing.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: failing.auth, 'content-type': 'application/json' },
        payload: { data: 'x' },
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe(50005);
      // Logged at the default level, structured, with what identifies the request.
      const failure = lines.find((l) => l.msg === 'request failed');
      expect(failure).toMatchObject({ level: 50, method: 'POST', url: `/channels/${channel}/messages`, reqId: expect.any(String) });
      expect((failure!.err as { message: string }).message).toMatch(/disk full/);
      // No per-request lines above debug level.
      expect(lines.filter((l) => l.reqId !== undefined && l.msg !== 'request failed')).toEqual([]);
      const history = await failing.service.app.inject({ url: `/channels/${channel}/messages`, headers: { authorization: failing.auth } });
      expect(history.json()).toEqual([]);
      // A log that stays down fails every publish: at most a line a second, not one per request.
      const send = () => failing.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: failing.auth, 'content-type': 'application/json' }, payload: { data: 'x' } });
      const started = Date.now();
      const statuses = await Promise.all(Array.from({ length: 200 }, send).map(async (r) => (await r).statusCode));
      expect(new Set(statuses)).toEqual(new Set([503]));
      const logged = lines.filter((l) => l.msg === 'request failed').length;
      expect(logged).toBeLessThanOrEqual(2 + Math.floor((Date.now() - started) / 1000));
    } finally {
      await failing.close();
    }
  });
});
