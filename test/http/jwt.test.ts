// The platform's JWTs over REST (issue 26 item 6): HS256 signed with a key's secret, `kid` the key
// name, the capability and clientId in `x-ably-*` claims; what a bad one gets (40144, 40142, 40400,
// 40101, 40160), revocation by clientId, asking for a native token with one, a JWT of the app's own
// embedding a token of the service (x-ably-token), and the key or token
// given in the query (`?key=`, `?access_token=`) as the platform takes them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import type { InjectOptions } from 'fastify';
import { basic, listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';

let t: TestService;
let now = Date.now();
const clock = { now: () => now };
let keyName: string;
let secret: string;
/** A key of a second app, made with revocableTokens, and one limited to channels `sub:*` (subscribe only). */
let revocable: { keyName: string; keyStr: string };
let narrow: { keyName: string; keyStr: string };

const inject = (options: InjectOptions) => t.service.app.inject(options);
const bearer = (token: string): string => `Bearer ${Buffer.from(token).toString('base64')}`;

beforeAll(async () => {
  t = await startTestService({}, { clock });
  [keyName, secret] = [t.key.slice(0, t.key.indexOf(':')), t.key.slice(t.key.indexOf(':') + 1)];
  const made = await inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }, { capability: '{"sub:*":["subscribe","history"]}' }] } });
  expect(made.statusCode, made.body).toBe(201);
  [revocable, narrow] = made.json().keys;
});
afterAll(async () => {
  await t.close();
  removeDir(t.dataDir);
});

interface JwtOptions {
  kid?: string | null;
  secret?: string;
  alg?: string;
  iat?: number | null;
  exp?: number | null;
  claims?: Record<string, unknown>;
}
/** A JWT as an app's auth server makes one (the platform's docs: HS256, kid = key name, times in seconds). */
async function jwt(options: JwtOptions = {}): Promise<string> {
  const header: Record<string, unknown> = { alg: options.alg ?? 'HS256', typ: 'JWT' };
  if (options.kid !== null) header.kid = options.kid ?? keyName;
  const seconds = Math.floor(now / 1000);
  const payload: Record<string, unknown> = { ...options.claims };
  if (options.iat !== null) payload.iat = options.iat ?? seconds;
  if (options.exp !== null) payload.exp = options.exp ?? seconds + 3600;
  return new SignJWT(payload).setProtectedHeader(header as { alg: string }).sign(new TextEncoder().encode(options.secret ?? secret));
}
const secretOf = (keyStr: string): string => keyStr.slice(keyStr.indexOf(':') + 1);

const publish = (authorization: string, channel = uniqueChannel('jwt'), payload: unknown = { name: 'n', data: 'd' }) =>
  inject({ method: 'POST', url: `/channels/${encodeURIComponent(channel)}/messages`, headers: { authorization, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
const history = (authorization: string, channel: string) => inject({ url: `/channels/${encodeURIComponent(channel)}/messages`, headers: { authorization } });
const errorOf = (res: { statusCode: number; json(): { error: { code: number; statusCode: number; message: string } } }) => ({ status: res.statusCode, ...res.json().error });

describe('JWT as Bearer credentials (REST)', () => {
  it('a JWT with the key capability and no clientId publishes, and history returns what it published', async () => {
    const channel = uniqueChannel('jwt');
    const token = await jwt();
    expect((await publish(bearer(token), channel)).statusCode).toBe(201);
    const res = await history(bearer(token), channel);
    expect(res.statusCode).toBe(200);
    expect(res.json().map((m: { name: string }) => m.name)).toEqual(['n']);
  });

  it('x-ably-clientId binds the clientId: messages carry it, and another clientId is refused (40012)', async () => {
    const channel = uniqueChannel('jwt');
    const token = await jwt({ claims: { 'x-ably-clientId': 'jwt-alice' } });
    expect((await publish(bearer(token), channel)).statusCode).toBe(201);
    expect((await history(bearer(token), channel)).json()[0].clientId).toBe('jwt-alice');
    expect(errorOf(await publish(bearer(token), channel, { data: 'x', clientId: 'mallory' }))).toMatchObject({ status: 400, code: 40012 });
  });

  it('x-ably-capability (a JSON string) narrows what the JWT may do (40160 outside it)', async () => {
    const token = await jwt({ claims: { 'x-ably-capability': JSON.stringify({ 'only:*': ['publish'] }) } });
    expect((await publish(bearer(token), 'only:one')).statusCode).toBe(201);
    expect(errorOf(await publish(bearer(token), 'elsewhere'))).toMatchObject({ status: 401, code: 40160 });
    expect(errorOf(await history(bearer(token), 'only:one'))).toMatchObject({ status: 401, code: 40160 });
  });

  it('a capability beyond the key capability is cut to it; one wholly outside it is refused (40160)', async () => {
    const wider = await jwt({ secret: secretOf(narrow.keyStr), kid: narrow.keyName, claims: { 'x-ably-capability': '{"*":["*"]}' } });
    expect((await history(bearer(wider), 'sub:a')).statusCode).toBe(200);
    expect(errorOf(await publish(bearer(wider), 'sub:a'))).toMatchObject({ status: 401, code: 40160 });
    const outside = await jwt({ secret: secretOf(narrow.keyStr), kid: narrow.keyName, claims: { 'x-ably-capability': '{"pub:*":["publish"]}' } });
    expect(errorOf(await publish(bearer(outside), 'pub:a'))).toMatchObject({ status: 401, code: 40160 });
  });

  it('a JWT signed with another secret is refused with 40144 (invalid JWT), not served', async () => {
    const forged = await jwt({ secret: 'not-the-secret' });
    expect(errorOf(await publish(bearer(forged)))).toMatchObject({ status: 401, code: 40144, message: expect.stringMatching(/signature/) });
  });

  it('a JWT that does not parse, lacks kid, iat or exp, or is not HS256 is refused with 40144 naming why', async () => {
    const refused = async (token: string, why: RegExp) => expect(errorOf(await publish(bearer(token)))).toMatchObject({ status: 401, code: 40144, message: expect.stringMatching(why) });
    await refused('eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln', /invalid JWT/);
    await refused('a.b.c', /header/);
    await refused(await jwt({ kid: null }), /kid/);
    await refused(await jwt({ iat: null }), /iat/);
    await refused(await jwt({ exp: null }), /exp/);
    await refused(await jwt({ alg: 'HS512' }), /HS256/);
    await refused(await jwt({ claims: { 'x-ably-capability': '{"a":["fly"]}' } }), /x-ably-capability/);
    await refused(await jwt({ claims: { 'x-ably-capability': { a: ['publish'] } } }), /JSON string/);
    await refused(await jwt({ claims: { 'x-ably-clientId': 7 } }), /x-ably-clientId/);
  });

  it('a lone surrogate in x-ably-clientId or x-ably-revocationKey is refused with 40144 (no UTF-8 form: the persisted history and presence rows of such a clientId could never be stored), and nothing is published', async () => {
    const channel = uniqueChannel('jwt-surrogate');
    for (const claims of [{ 'x-ably-clientId': 'a\ud800b' }, { 'x-ably-clientId': '\udc00' }, { 'x-ably-revocationKey': 'r\udbff' }]) {
      expect(errorOf(await publish(bearer(await jwt({ claims })), channel))).toMatchObject({ status: 401, code: 40144, message: expect.stringContaining('lone surrogate') });
    }
    expect((await history(t.auth, channel)).json()).toEqual([]);
    // A pair is well-formed text, and kept.
    const paired = await jwt({ claims: { 'x-ably-clientId': 'emoji-\ud83d\ude00' } });
    expect((await publish(bearer(paired), channel)).statusCode).toBe(201);
    expect((await history(t.auth, channel)).json()).toMatchObject([{ clientId: 'emoji-\u{1F600}' }]);
  });

  it('lifetimes: expired is 40142, iat ahead of the service time or a life over 24 hours is 40144', async () => {
    const seconds = Math.floor(now / 1000);
    expect(errorOf(await publish(bearer(await jwt({ iat: seconds - 120, exp: seconds - 60 }))))).toMatchObject({ status: 401, code: 40142 });
    expect(errorOf(await publish(bearer(await jwt({ iat: seconds + 3600, exp: seconds + 7200 }))))).toMatchObject({ code: 40144, message: expect.stringMatching(/future/) });
    expect(errorOf(await publish(bearer(await jwt({ iat: seconds, exp: seconds + 25 * 3600 }))))).toMatchObject({ code: 40144, message: expect.stringMatching(/24 hours/) });
  });

  it('a JWT valid when first used is refused with 40142 once its exp passes (the check is cached, the time is not)', async () => {
    const seconds = Math.floor(now / 1000);
    const token = await jwt({ exp: seconds + 60 });
    expect((await publish(bearer(token))).statusCode).toBe(201);
    now += 61_000;
    try {
      expect(errorOf(await publish(bearer(token)))).toMatchObject({ status: 401, code: 40142 });
    } finally {
      now -= 61_000;
    }
  });

  it('a kid naming an app this service does not have is 40400 (404); a key the app does not have is 40101', async () => {
    expect(errorOf(await publish(bearer(await jwt({ kid: 'noSuchApp.key' }))))).toMatchObject({ status: 404, code: 40400 });
    expect(errorOf(await publish(bearer(await jwt({ kid: `${keyName.split('.')[0]}.noSuchKey` }))))).toMatchObject({ status: 401, code: 40101 });
  });

  it('a JWT longer than 8192 characters is refused with 40144 before it is checked', async () => {
    const long = await jwt({ claims: { pad: 'x'.repeat(9000) } });
    expect(errorOf(await publish(bearer(long)))).toMatchObject({ code: 40144, message: expect.stringMatching(/8192/) });
  });

  it('token revocation by clientId reaches JWTs issued before it (40141)', async () => {
    const token = await jwt({ kid: revocable.keyName, secret: secretOf(revocable.keyStr), claims: { 'x-ably-clientId': 'jwt-bob' } });
    expect((await publish(bearer(token))).statusCode).toBe(201);
    now += 1_000;
    const res = await inject({
      method: 'POST',
      url: `/keys/${revocable.keyName}/revokeTokens`,
      headers: { authorization: basic(revocable.keyStr), 'content-type': 'application/json' },
      payload: JSON.stringify({ targets: ['clientId:jwt-bob'] }),
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
    expect(errorOf(await publish(bearer(token)))).toMatchObject({ status: 401, code: 40141 });
  });

  it('a JWT may ask for a native token (unsigned token request), which keeps its clientId', async () => {
    const token = await jwt({ claims: { 'x-ably-clientId': 'jwt-carol' } });
    const res = await inject({
      method: 'POST',
      url: `/keys/${keyName}/requestToken`,
      headers: { authorization: bearer(token), 'content-type': 'application/json' },
      payload: JSON.stringify({ keyName, timestamp: now }),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ clientId: 'jwt-carol', keyName });
  });

  it('many requests with the same new JWT at once are all answered', async () => {
    const token = await jwt({ claims: { 'x-ably-clientId': 'jwt-many' } });
    const answers = await Promise.all(Array.from({ length: 20 }, () => publish(bearer(token))));
    expect(answers.map((r) => r.statusCode)).toEqual(Array(20).fill(201));
  });
});

describe('a JWT of the app\'s own scheme embedding a token of the service (x-ably-token, REST)', () => {
  /** A native token, as POST /keys/:keyName/requestToken issues it to the key. */
  const nativeToken = async (body: Record<string, unknown> = {}): Promise<{ token: string; expires: number }> => {
    const res = await inject({
      method: 'POST',
      url: `/keys/${keyName}/requestToken`,
      headers: { authorization: basic(t.key), 'content-type': 'application/json' },
      payload: JSON.stringify({ keyName, timestamp: now, ...body }),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  /** The app's own JWT, signed with a secret the service does not know, embedding `inner` in its header or claims. */
  const outer = (inner: string, where: 'header' | 'claims', exp: number | null = Math.floor(now / 1000) + 3600): Promise<string> => {
    const claims: Record<string, unknown> = { sub: 'user-7' };
    if (exp !== null) claims.exp = exp;
    if (where === 'claims') claims['x-ably-token'] = inner;
    const header: Record<string, unknown> = { alg: 'HS256', typ: 'JWT' };
    if (where === 'header') header['x-ably-token'] = inner;
    return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(new TextEncoder().encode('the app server own secret'));
  };

  it('a native token in the header or the claims publishes as that token: its clientId is on the message', async () => {
    const { token } = await nativeToken({ clientId: 'embedded-dan' });
    for (const where of ['header', 'claims'] as const) {
      const channel = uniqueChannel('jwt-embedded');
      const auth = bearer(await outer(token, where));
      expect((await publish(auth, channel)).statusCode).toBe(201);
      expect((await publish(auth, channel, { name: 'n', data: 'd', clientId: 'someone-else' })).json().error.code).toBe(40012);
      const items = (await history(basic(t.key), channel)).json() as { clientId?: string }[];
      expect(items.map((m) => m.clientId)).toEqual(['embedded-dan']);
    }
  });

  it('a JWT of the service (signed with the key secret) embedded is taken with its claims', async () => {
    const inner = await jwt({ claims: { 'x-ably-clientId': 'embedded-erin', 'x-ably-capability': '{"only-*":["publish","history"]}' } });
    const auth = bearer(await outer(inner, 'header'));
    const channel = uniqueChannel('only');
    expect((await publish(auth, channel)).statusCode).toBe(201);
    expect(errorOf(await publish(auth, uniqueChannel('elsewhere')))).toMatchObject({ status: 401, code: 40160 });
    expect(((await history(auth, channel)).json() as { clientId?: string }[]).map((m) => m.clientId)).toEqual(['embedded-erin']);
  });

  it("the outer JWT's exp ends the credentials first (40142); an expired embedded token is refused; a bad embedded one is 40143 or 40144", async () => {
    const { token } = await nativeToken();
    expect(errorOf(await publish(bearer(await outer(token, 'header', Math.floor(now / 1000) - 10))))).toMatchObject({ status: 401, code: 40142 });
    const soon = bearer(await outer(token, 'claims', Math.floor(now / 1000) + 60));
    expect((await publish(soon)).statusCode).toBe(201);
    const was = now;
    now += 61_000;
    try {
      expect(errorOf(await publish(soon))).toMatchObject({ status: 401, code: 40142 });
    } finally {
      now = was;
    }
    const short = await nativeToken({ ttl: 1000 });
    const lasting = bearer(await outer(short.token, 'header', null));
    expect((await publish(lasting)).statusCode).toBe(201);
    now += 2000;
    try {
      expect(errorOf(await publish(lasting)).code).toBeGreaterThanOrEqual(40140);
    } finally {
      now = was;
    }
    expect(errorOf(await publish(bearer(await outer('not-a-token', 'header'))))).toMatchObject({ status: 401, code: 40143 });
    const forged = await jwt({ secret: 'not the key secret' });
    expect(errorOf(await publish(bearer(await outer(forged, 'claims'))))).toMatchObject({ status: 401, code: 40144 });
    const nested = await outer(token, 'header');
    expect(errorOf(await publish(bearer(await outer(nested, 'header'))))).toMatchObject({ status: 401, code: 40144 });
  });
});

describe('credentials in the query (REST)', () => {
  it('?key=<keyName:keySecret> authenticates as Basic does', async () => {
    const channel = uniqueChannel('qkey');
    const res = await inject({ method: 'POST', url: `/channels/${channel}/messages?key=${encodeURIComponent(t.key)}`, headers: { 'content-type': 'application/json' }, payload: '{"data":"q"}' });
    expect(res.statusCode, res.body).toBe(201);
    expect((await inject({ url: `/channels/${channel}/messages?key=${encodeURIComponent(t.key)}` })).json()[0].data).toBe('q');
  });

  it('?key= with a wrong secret is 40101; ?access_token= takes a native token or a JWT', async () => {
    expect(errorOf(await inject({ url: `/channels/x/messages?key=${encodeURIComponent(`${keyName}:wrong`)}` }))).toMatchObject({ status: 401, code: 40101 });
    const token = await jwt();
    expect((await inject({ url: `/channels/x/messages?access_token=${encodeURIComponent(token)}` })).statusCode).toBe(200);
  });

  it('the Authorization header wins over the query', async () => {
    const res = await inject({ url: `/channels/x/messages?key=${encodeURIComponent(t.key)}`, headers: { authorization: basic(`${keyName}:wrong`) } });
    expect(errorOf(res)).toMatchObject({ code: 40101 });
  });
});

describe('JWT on the realtime handshake and in AUTH (wire level)', () => {
  let port: number;
  beforeAll(async () => {
    port = await listening(t);
  });

  it('access_token=<JWT> connects with the claims clientId; a forged one gets DISCONNECTED 40144, an unknown app ERROR 40400', async () => {
    const ok = await RawClient.connect(port, { access_token: await jwt({ claims: { 'x-ably-clientId': 'wire-jwt' } }), v: '6' });
    try {
      const connected = await ok.next((pm) => pm.action === Actions.CONNECTED);
      expect((connected as { connectionDetails?: { clientId?: string } }).connectionDetails?.clientId).toBe('wire-jwt');
    } finally {
      ok.close();
    }
    const forged = await RawClient.open(port, { access_token: await jwt({ secret: 'forged' }), v: '6' });
    expect(await forged.next((pm) => pm.action === Actions.DISCONNECTED || pm.action === Actions.ERROR)).toMatchObject({ action: Actions.DISCONNECTED, error: { code: 40144 } });
    forged.close();
    const stranger = await RawClient.open(port, { access_token: await jwt({ kid: 'noSuchApp.key' }), v: '6' });
    expect(await stranger.next((pm) => pm.action === Actions.DISCONNECTED || pm.action === Actions.ERROR)).toMatchObject({ action: Actions.ERROR, error: { code: 40400 } });
    stranger.close();
  });

  it('an AUTH with a new JWT is answered CONNECTED; one with a forged JWT fails the connection with 40144', async () => {
    const client = await RawClient.connect(port, { access_token: await jwt(), v: '6' });
    try {
      const again = client.next((pm) => pm.action === Actions.CONNECTED, 10_000, false);
      client.send({ action: Actions.AUTH, auth: { accessToken: await jwt({ claims: { 'x-ably-capability': '{"*":["subscribe"]}' } }) } });
      await again;
      const refused = client.next((pm) => pm.action === Actions.DISCONNECTED || pm.action === Actions.ERROR, 10_000, false);
      client.send({ action: Actions.AUTH, auth: { accessToken: await jwt({ secret: 'forged' }) } });
      expect(await refused).toMatchObject({ error: { code: 40144 } });
    } finally {
      client.close();
    }
  });
});
