import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { basic, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let t: TestService;
let keys: { keyStr: string; capability: string }[];
const setup = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;

beforeAll(async () => {
  t = await startTestService();
  const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup });
  expect(res.statusCode).toBe(201);
  keys = res.json().keys;
});
afterAll(() => t.close());

const request = (method: 'GET' | 'POST', channel: string, authorization?: string, headers: Record<string, string> = {}) =>
  t.service.app.inject({
    method,
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { ...(authorization ? { authorization } : {}), 'content-type': 'application/json', ...headers },
    payload: method === 'POST' ? { data: 'x' } : undefined,
  });

describe('authentication (spec: Authentication)', () => {
  it('no credentials: 401 with 40106', async () => {
    const res = await request('GET', 'x');
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40106);
  });

  it('a wrong secret, an unknown key of the app or a malformed value: 401 with 40101 (never 4014x for keys)', async () => {
    const [name] = keys[0].keyStr.split(':');
    const appId = name.split('.')[0];
    for (const authorization of [basic(`${name}:wrong`), basic(`${appId}.nokey:secret`), 'Basic !!!', basic('no-colon'), 'Digest abc']) {
      const res = await request('GET', 'x', authorization);
      expect(res.statusCode, authorization).toBe(401);
      expect(res.json().error.code, authorization).toBe(40101);
    }
  });

  it('a key of an app the service does not have: 404 with 40400, as the platform answers it', async () => {
    const res = await request('GET', 'x', basic('nobody.x:secret'));
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: 40400, statusCode: 404, message: expect.stringMatching(/no app "nobody"/) });
  });

  it('a key without the needed capability: 401 with 40160', async () => {
    const subscribeOnly = keys.find((k) => k.capability.includes('"*":["subscribe"]'))!;
    const res = await request('POST', 'anything', basic(subscribeOnly.keyStr));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
    const history = await request('GET', 'anything', basic(subscribeOnly.keyStr));
    expect(history.json().error.code).toBe(40160);
  });

  it('capabilities are checked per channel and operation', async () => {
    const perChannel = basic(keys.find((k) => k.capability.includes('channel0'))!.keyStr);
    expect((await request('POST', 'channel0', perChannel)).statusCode).toBe(201);
    expect((await request('POST', 'channel3', perChannel)).statusCode).toBe(401);
    expect((await request('POST', 'channel6', perChannel)).statusCode).toBe(201);
    expect((await request('GET', 'channel6', perChannel)).statusCode).toBe(200);
    const namespaced = basic(keys.find((k) => k.capability.includes('canpublish:*'))!.keyStr);
    expect((await request('POST', 'canpublish:news', namespaced)).statusCode).toBe(201);
    expect((await request('POST', 'cansubscribe:news', namespaced)).statusCode).toBe(401);
  });

  it('a key with no capability in the setup gets {"*":["*"]}, as the platform gives it: every regular channel, no metachannel', async () => {
    expect(keys[0].capability).toBe('{"*":["*"]}');
    expect((await request('POST', uniqueChannel(), basic(keys[0].keyStr))).statusCode).toBe(201);
    expect((await request('GET', uniqueChannel(), basic(keys[0].keyStr))).statusCode).toBe(200);
    // Authentication rule 6: "*" alone does not reach metachannels.
    expect((await request('GET', '[meta]channel.lifecycle', basic(keys[0].keyStr))).json().error.code).toBe(40160);
  });

  it('"[*]*" reaches metachannel history, but publishing there is never possible', async () => {
    const all = basic(keys.find((k) => k.capability.includes('[*]*'))!.keyStr);
    expect((await request('GET', '[meta]channel.lifecycle', all)).statusCode).toBe(200);
    expect((await request('POST', '[meta]channel.lifecycle', all)).json().error.code).toBe(40160);
  });

  it('"*" does not reach metachannels', async () => {
    const star = basic(t.key.startsWith('') ? keys.find((k) => k.capability.includes('channel6'))!.keyStr : t.key);
    expect((await request('GET', '[meta]log', star)).json().error.code).toBe(40160);
  });

  it('a metachannel is reached only by a resource that starts with [meta] (or [*]*): [*, [me* and [meta* reach none', async () => {
    const made = await t.service.app.inject({
      method: 'POST',
      url: '/apps',
      payload: {
        keys: [
          { capability: JSON.stringify({ '[*': ['*'], '[me*': ['*'], '[meta*': ['*'], '*': ['subscribe', 'history'] }) },
          { capability: JSON.stringify({ '[meta]*': ['history'] }) },
        ],
      },
    });
    const [partial, meta] = (made.json() as { keys: { keyStr: string }[] }).keys.map((k) => basic(k.keyStr));
    for (const channel of ['[meta]channel.lifecycle', '[meta]log']) {
      const refused = await request('GET', channel, partial);
      expect(refused.statusCode, channel).toBe(401);
      expect(refused.json().error.code, channel).toBe(40160);
      expect((await request('GET', channel, meta)).statusCode, channel).toBe(200);
    }
    expect((await request('GET', uniqueChannel(), partial)).statusCode).toBe(200);
  });

  it('basic credentials may state a clientId (X-Ably-ClientId: base64), stamped on messages', async () => {
    const channel = uniqueChannel();
    const clientId = Buffer.from('alice').toString('base64');
    expect((await request('POST', channel, t.auth, { 'x-ably-clientid': clientId })).statusCode).toBe(201);
    const res = await request('GET', channel, t.auth);
    expect(res.json()).toMatchObject([{ clientId: 'alice' }]);
    const mismatch = await t.service.app.inject({
      method: 'POST',
      url: `/channels/${channel}/messages`,
      headers: { authorization: t.auth, 'content-type': 'application/json', 'x-ably-clientid': clientId },
      payload: { clientId: 'mallory', data: 'x' },
    });
    expect(mismatch.json().error.code).toBe(40012);
  });
});
