import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestService, uniqueChannel, basic, type TestService } from '../helpers/service.js';
import { tokenRequestMac } from '../../src/auth/tokens.js';

let t: TestService;
let now = Date.now();
const clock = { now: () => now };
let keyName: string;
let secret: string;

beforeAll(async () => {
  t = await startTestService({}, { clock });
  [keyName, secret] = [t.key.slice(0, t.key.indexOf(':')), t.key.slice(t.key.indexOf(':') + 1)];
});
afterAll(() => t.close());

const nonce = () => randomBytes(8).toString('hex');
const signed = (fields: Record<string, unknown> = {}, key = keyName, sec = secret) => {
  const req: Record<string, unknown> = { keyName: key, timestamp: now, nonce: nonce(), ...fields };
  req.mac = tokenRequestMac(sec, req);
  return req;
};
const requestToken = (body: unknown, headers: Record<string, string> = {}, key = keyName) =>
  t.service.app.inject({ method: 'POST', url: `/keys/${key}/requestToken`, headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });
const bearer = (token: string) => `Bearer ${Buffer.from(token).toString('base64')}`;
const publishWith = (authorization: string, channel = uniqueChannel(), payload: unknown = { data: 'x' }) =>
  t.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization, 'content-type': 'application/json' },
    payload: JSON.stringify(payload),
  });

describe('POST /keys/<key_name>/requestToken (spec: Request an access token)', () => {
  it('a signed token request needs no other credentials and returns token details', async () => {
    const res = await requestToken(signed({ clientId: 'bob', ttl: 60_000 }));
    expect(res.statusCode).toBe(200);
    const details = res.json();
    expect(details).toMatchObject({ keyName, issued: now, expires: now + 60_000, clientId: 'bob', token: expect.any(String) });
    expect(JSON.parse(details.capability)).toEqual({ '[*]*': ['*'] });
  });

  it('the token works as Bearer base64(token) on authenticated routes', async () => {
    const { token } = (await requestToken(signed())).json();
    expect((await publishWith(bearer(token))).statusCode).toBe(201);
  });

  it('the default TTL is 60 minutes and the maximum 24 hours; invalid TTLs are refused', async () => {
    expect((await requestToken(signed())).json().expires).toBe(now + 3600_000);
    expect((await requestToken(signed({ ttl: 24 * 3600_000 }))).statusCode).toBe(200);
    for (const ttl of [24 * 3600_000 + 1, -5, 0, 'abc', 1.5, true, [60_000], '0x10', ' 1000']) {
      const res = await requestToken(signed({ ttl }));
      expect(res.statusCode, String(ttl)).toBe(400);
    }
  });

  it('an expired token gets 401 with 40140', async () => {
    const { token } = (await requestToken(signed({ ttl: 1000 }))).json();
    now += 1001;
    const res = await publishWith(bearer(token));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40140);
  });

  it('a token with a wrong signature, or garbage, is not recognized (401, 4014x)', async () => {
    const { token } = (await requestToken(signed())).json();
    for (const bad of [`${token.slice(0, -2)}xx`, 'garbage', `${Buffer.from('{"k":"x"}').toString('base64url')}.sig`]) {
      const res = await publishWith(bearer(bad));
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBeGreaterThanOrEqual(40140);
      expect(res.json().error.code).toBeLessThan(40150);
    }
  });

  it('the token capability is the intersection of the key capability and the requested one', async () => {
    const res = await requestToken(signed({ capability: '{"only:*":["publish","subscribe"]}' }));
    const { token, capability } = res.json();
    expect(JSON.parse(capability)).toEqual({ 'only:*': ['publish', 'subscribe'] });
    expect((await publishWith(bearer(token), 'only:a')).statusCode).toBe(201);
    const refused = await publishWith(bearer(token), 'elsewhere');
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe(40160);
  });

  it('a capability naming the channel "__proto__" keeps it in the token (the canonical form is not a plain object that drops it)', async () => {
    // Before, the token's capability came out "{}" and every use of the token was refused (review finding).
    const res = await requestToken(signed({ capability: '{"__proto__":["publish"]}' }));
    expect(res.statusCode).toBe(200);
    const { token, capability } = res.json();
    expect(capability).toBe('{"__proto__":["publish"]}');
    expect((await publishWith(bearer(token), '__proto__')).statusCode).toBe(201);
    expect((await publishWith(bearer(token), 'elsewhere')).json().error.code).toBe(40160);
  });

  it('an empty intersection is refused', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability: '{"a":["subscribe"]}' }] } })).json();
    const [name, sec] = created.keys[0].keyStr.split(/:(.*)/s);
    const res = await requestToken(signed({ capability: '{"b":["publish"]}' }, name, sec), {}, name);
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
    const narrowed = await requestToken(signed({ capability: '{"*":["subscribe","publish"]}' }, name, sec), {}, name);
    expect(JSON.parse(narrowed.json().capability)).toEqual({ a: ['subscribe'] });
  });

  it('a token clientId is enforced on published messages', async () => {
    const { token } = (await requestToken(signed({ clientId: 'carol' }))).json();
    const channel = uniqueChannel();
    expect((await publishWith(bearer(token), channel, { data: 'x' })).statusCode).toBe(201);
    expect((await publishWith(bearer(token), channel, { data: 'x', clientId: 'dave' })).json().error.code).toBe(40012);
    const history = await t.service.app.inject({ url: `/channels/${channel}/messages`, headers: { authorization: t.auth } });
    expect(history.json()).toMatchObject([{ clientId: 'carol' }]);
  });

  it('a token issued without a clientId identifies nobody: its messages may claim no clientId (40012), a wildcard token\'s and a key\'s may', async () => {
    // The platform's identified clients: a clientId is claimed with a key, or given by a token of
    // that clientId or of the wildcard. Before, an anonymous token published as anyone.
    const anonymous = (await requestToken(signed({}))).json().token;
    const wildcard = (await requestToken(signed({ clientId: '*' }))).json().token;
    const channel = uniqueChannel();
    const refused = await publishWith(bearer(anonymous), channel, [{ data: 'ok' }, { data: 'x', clientId: 'dave' }]);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 40012, statusCode: 400, message: expect.stringContaining('token issued without a clientId') });
    expect((await publishWith(bearer(anonymous), channel, { data: 'a' })).statusCode).toBe(201);
    expect((await publishWith(bearer(wildcard), channel, { data: 'b', clientId: 'dave' })).statusCode).toBe(201);
    expect((await publishWith(t.auth, channel, { data: 'c', clientId: 'erin' })).statusCode).toBe(201);
    const history = await t.service.app.inject({ url: `/channels/${channel}/messages?direction=forwards`, headers: { authorization: t.auth } });
    expect(history.json().map((m: { data: string; clientId?: string }) => [m.data, m.clientId])).toEqual([
      ['a', undefined],
      ['b', 'dave'],
      ['c', 'erin'],
    ]);
  });

  it("removing a key (deleting its app) invalidates the key's tokens at once", async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const [name, sec] = created.keys[0].keyStr.split(/:(.*)/s);
    const { token } = (await requestToken(signed({}, name, sec), {}, name)).json();
    expect((await publishWith(bearer(token))).statusCode).toBe(201);
    const deleted = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(deleted.statusCode).toBe(204);
    const refused = await publishWith(bearer(token));
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe(40143);
  });

  describe('replay defence', () => {
    it('refuses a timestamp outside the 10-minute window (40104)', async () => {
      for (const skew of [-11 * 60_000, 11 * 60_000]) {
        const res = await requestToken(signed({ timestamp: now + skew }));
        expect(res.statusCode).toBe(401);
        expect(res.json().error.code).toBe(40104);
      }
    });

    it('refuses a nonce seen before within the window (40105)', async () => {
      const req = signed();
      expect((await requestToken(req)).statusCode).toBe(200);
      const again = await requestToken(req);
      expect(again.statusCode).toBe(401);
      expect(again.json().error.code).toBe(40105);
    });
  });

  describe('the nonce cache stays bounded (MAX_TOKEN_NONCES, MAX_TOKEN_NONCES_PER_APP)', () => {
    let small: TestService;
    let other: { name: string; sec: string };
    beforeAll(async () => {
      small = await startTestService({ MAX_TOKEN_NONCES: '5', MAX_TOKEN_NONCES_PER_APP: '3' }, { clock });
      const created = (await small.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
      const [name, sec] = created.keys[0].keyStr.split(/:(.*)/s);
      other = { name, sec };
    });
    afterAll(() => small.close());
    const [smallName, smallSecret] = [() => small.key.slice(0, small.key.indexOf(':')), () => small.key.slice(small.key.indexOf(':') + 1)];
    const ask = (body: Record<string, unknown>, key = smallName(), headers: Record<string, string> = {}) =>
      small.service.app.inject({ method: 'POST', url: `/keys/${key}/requestToken`, headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });

    it('above its share an app gets 42910 (429) in the error format, a replay is still caught, other apps are served, and room comes back after the window', async () => {
      const first = signed({}, smallName(), smallSecret());
      expect((await ask(first)).statusCode).toBe(200);
      for (let i = 0; i < 2; i++) expect((await ask(signed({}, smallName(), smallSecret()))).statusCode).toBe(200);
      const refused = await ask(signed({}, smallName(), smallSecret()));
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['x-ably-errorcode']).toBe('42910');
      expect(refused.json().error).toMatchObject({ code: 42910, statusCode: 429 });
      expect((await ask(first)).json().error.code).toBe(40105);
      // Unsigned requests are authenticated by their credentials and take no room.
      expect((await ask({ keyName: smallName(), timestamp: now }, smallName(), { authorization: basic(small.key) })).statusCode).toBe(200);
      expect((await ask(signed({}, other.name, other.sec), other.name)).statusCode).toBe(200);
      expect((await ask(signed({}, other.name, other.sec), other.name)).statusCode).toBe(200);
      // The service holds 5 in all: the other app's third, within its own share, would be the sixth.
      expect((await ask(signed({}, other.name, other.sec), other.name)).json().error.code).toBe(42910);
      now += 10 * 60_000 + 1;
      expect((await ask(signed({}, smallName(), smallSecret()))).statusCode).toBe(200);
    });
  });

  describe('refusals of malformed requests, never a 5xx', () => {
    it.each([
      ['a bad mac', () => ({ ...signed(), mac: 'AAAA' }), 401, 40101],
      ['a mac over other fields', () => ({ ...signed(), ttl: 5000 }), 401, 40101],
      ['a short nonce', () => signed({ nonce: '123' }), 400, 40001],
      ['no timestamp', () => ({ keyName, nonce: nonce(), mac: 'x' }), 400, 40001],
      ['a keyName that differs from the path', () => signed({}, 'other.key'), 400, 40001],
      ['bad capability JSON', () => signed({ capability: '{nope' }), 400, 40003],
      ['a capability with an unknown operation', () => signed({ capability: '{"channel0":["shout"]}' }), 400, 40003],
      ['a capability with an empty list of operations', () => signed({ capability: '{"channel0":[]}' }), 400, 40003],
      ['a capability listing "*" with other operations (as the platform refuses it)', () => signed({ capability: '{"channel0":["*","publish"]}' }), 400, 40003],
      ['a non-object body', () => 'just a string', 400, 40001],
      ['a ttl with no text (an object whose toString is not a function)', () => ({ ...signed(), ttl: { toString: 1 } }), 400, 40003],
      ['a timestamp with no number (an object whose valueOf and toString are not functions)', () => ({ ...signed(), timestamp: { valueOf: 1, toString: 1 } }), 400, 40001],
      ['a null timestamp', () => signed({ timestamp: null }), 400, 40001],
    ])('%s', async (_what, body, status, code) => {
      const res = await requestToken(body());
      expect(res.statusCode).toBe(status);
      expect(res.json().error.code).toBe(code);
    });

    it('an unsigned request with a ttl that has no number (an object whose valueOf and toString are not functions): 40003', async () => {
      const res = await requestToken({ keyName, timestamp: now, ttl: { valueOf: 1, toString: 1 } }, { authorization: basic(t.key) });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 40003, statusCode: 400 });
    });

    it('an unknown key', async () => {
      const res = await requestToken(signed({}, 'nokey.x', 'secret'), {}, 'nokey.x');
      expect(res.statusCode).toBe(401);
    });
  });

  describe('unsigned token requests', () => {
    it('need basic or token credentials of the same key', async () => {
      const body = { keyName, timestamp: now };
      expect((await requestToken(body)).json().error.code).toBe(40106);
      const withBasic = await requestToken(body, { authorization: t.auth });
      expect(withBasic.statusCode).toBe(200);
      const withToken = await requestToken({ keyName, timestamp: now, capability: '{"x":["publish"]}' }, { authorization: bearer(withBasic.json().token) });
      expect(withToken.statusCode).toBe(200);
      expect(JSON.parse(withToken.json().capability)).toEqual({ x: ['publish'] });
    });

    describe('a token asking for a token hands on no more than it has', () => {
      /** A token of the root key, by a basic-authenticated request. */
      const tokenOf = async (fields: Record<string, unknown>) => {
        const res = await requestToken({ keyName, timestamp: now, ...fields }, { authorization: t.auth });
        expect(res.statusCode).toBe(200);
        return res.json() as { token: string; expires: number; capability: string; clientId?: string };
      };

      it('without a ttl, a token with 10 minutes left gets a token that expires with it, not the 60-minute default', async () => {
        const asker = await tokenOf({ ttl: 10 * 60_000 });
        const res = await requestToken({ keyName, timestamp: now }, { authorization: bearer(asker.token) });
        expect(res.statusCode).toBe(200);
        expect(res.json().expires).toBe(asker.expires);
        now += 60_000;
        const later = await requestToken({ keyName, timestamp: now }, { authorization: bearer(asker.token) });
        expect(later.json().expires).toBe(asker.expires);
      });

      it('a 1-hour token asking for a 24-hour token is refused with 40003 (400) in the error format', async () => {
        const asker = await tokenOf({ ttl: 3600_000 });
        const res = await requestToken({ keyName, timestamp: now, ttl: 24 * 3600_000 }, { authorization: bearer(asker.token) });
        expect(res.statusCode).toBe(400);
        expect(res.headers['x-ably-errorcode']).toBe('40003');
        expect(res.json().error).toMatchObject({ code: 40003, statusCode: 400, message: expect.stringContaining('3600000 ms left') });
      });

      it('an explicit ttl within the asking token\'s life is granted as asked', async () => {
        const asker = await tokenOf({ ttl: 3600_000 });
        const res = await requestToken({ keyName, timestamp: now, ttl: 3600_000 }, { authorization: bearer(asker.token) });
        expect(res.json().expires).toBe(now + 3600_000);
      });

      it('a key (basic credentials) still gets the default and may ask up to 24 hours', async () => {
        expect((await tokenOf({})).expires).toBe(now + 3600_000);
        expect((await tokenOf({ ttl: 24 * 3600_000 })).expires).toBe(now + 24 * 3600_000);
      });

      it('its capability stays within the asking token\'s: wider requests narrow, disjoint ones are refused (40160)', async () => {
        const asker = await tokenOf({ capability: '{"x":["publish"]}' });
        const none = await requestToken({ keyName, timestamp: now }, { authorization: bearer(asker.token) });
        expect(JSON.parse(none.json().capability)).toEqual({ x: ['publish'] });
        const wider = await requestToken({ keyName, timestamp: now, capability: '{"*":["*"]}' }, { authorization: bearer(asker.token) });
        expect(JSON.parse(wider.json().capability)).toEqual({ x: ['publish'] });
        const other = await requestToken({ keyName, timestamp: now, capability: '{"y":["publish"]}' }, { authorization: bearer(asker.token) });
        expect(other.json().error).toMatchObject({ code: 40160, statusCode: 401 });
      });

      it('its clientId is the asking token\'s: another is refused (40012), none gets the asker\'s', async () => {
        const asker = await tokenOf({ clientId: 'erin' });
        const same = await requestToken({ keyName, timestamp: now }, { authorization: bearer(asker.token) });
        expect(same.json().clientId).toBe('erin');
        const other = await requestToken({ keyName, timestamp: now, clientId: 'mallory' }, { authorization: bearer(asker.token) });
        expect(other.json().error).toMatchObject({ code: 40012, statusCode: 400 });
      });

      it('a token without a clientId cannot give itself one (40012), nor the wildcard', async () => {
        const asker = await tokenOf({});
        for (const clientId of ['mallory', '*']) {
          const res = await requestToken({ keyName, timestamp: now, clientId }, { authorization: bearer(asker.token) });
          expect(res.json().error, clientId).toMatchObject({ code: 40012, statusCode: 400 });
        }
        const anonymous = await requestToken({ keyName, timestamp: now }, { authorization: bearer(asker.token) });
        expect(anonymous.json().clientId).toBeUndefined();
      });

      it('a wildcard-clientId token may hand on any clientId', async () => {
        const asker = await tokenOf({ clientId: '*' });
        const res = await requestToken({ keyName, timestamp: now, clientId: 'frank' }, { authorization: bearer(asker.token) });
        expect(res.json().clientId).toBe('frank');
      });
    });

    it('credentials of another key are refused', async () => {
      const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
      const res = await requestToken({ keyName, timestamp: now }, { authorization: basic(created.keys[0].keyStr) });
      expect(res.statusCode).toBe(401);
    });
  });
});
