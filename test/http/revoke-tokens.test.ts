// Token revocation as the SDK's auth.revokeTokens calls it: POST /keys/<keyName>/revokeTokens with
// `targets`, for keys made with `revocableTokens`; revoked tokens refused with 40141 from the moment
// the revocation applies; a revocation is an event on the log, so a restart keeps it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import type { InjectOptions } from 'fastify';

let t: TestService;
let now = Date.now();
const clock = { now: () => now };
/** keys[0]: no revocableTokens; keys[1]: revocableTokens; keys[2]: revocableTokens, another key of the app */
let keys: { keyName: string; keyStr: string; revocableTokens: boolean }[];

const inject = (options: InjectOptions) => t.service.app.inject(options);
const bearer = (token: string): string => `Bearer ${Buffer.from(token).toString('base64')}`;

beforeAll(async () => {
  t = await startTestService({}, { clock });
  keys = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{}, { revocableTokens: true }, { revocableTokens: true }] } })).json().keys;
});
afterAll(async () => {
  await t.close();
  removeDir(t.dataDir);
});

/** A token of keys[i] (unsigned request with the key), issued at the current test time. */
async function tokenOf(i: number, fields: Record<string, unknown> = {}): Promise<string> {
  const res = await inject({
    method: 'POST',
    url: `/keys/${keys[i].keyName}/requestToken`,
    headers: { authorization: basic(keys[i].keyStr), 'content-type': 'application/json' },
    payload: { keyName: keys[i].keyName, timestamp: now, ...fields },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().token;
}

const revoke = (body: unknown, { key = 1, version = '6', authorization }: { key?: number; version?: string; authorization?: string } = {}) =>
  inject({
    method: 'POST',
    url: `/keys/${keys[key].keyName}/revokeTokens`,
    headers: { authorization: authorization ?? basic(keys[key].keyStr), 'content-type': 'application/json', ...(version ? { 'x-ably-version': version } : {}) },
    payload: JSON.stringify(body),
  });

const history = (authorization: string) => inject({ url: `/channels/${uniqueChannel('rev')}/messages`, headers: { authorization } });

describe('POST /keys/<keyName>/revokeTokens', () => {
  it('sandbox POST /apps keeps the revocableTokens key attribute, as the platform does', () => {
    expect(keys.map((k) => k.revocableTokens)).toEqual([false, true, true]);
  });

  it('revokes by clientId: a BatchResult (protocol 3+), 201; the tokens issued before are refused with 40141, others are not', async () => {
    const bobs = await tokenOf(1, { clientId: 'bob' });
    const alices = await tokenOf(1, { clientId: 'alice' });
    expect((await history(bearer(bobs))).statusCode).toBe(200); // in the verified-credentials cache now
    now += 10;
    const res = await revoke({ targets: ['clientId:bob'] });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ successCount: 1, failureCount: 0, results: [{ target: 'clientId:bob', issuedBefore: now, appliesAt: now }] });

    const refused = await history(bearer(bobs));
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['x-ably-errorcode']).toBe('40141');
    expect(refused.json().error).toMatchObject({ code: 40141, statusCode: 401, message: expect.stringContaining('revoked') });
    // Every route that takes the token refuses it, a token request too.
    const asking = await inject({
      method: 'POST',
      url: `/keys/${keys[1].keyName}/requestToken`,
      headers: { authorization: bearer(bobs), 'content-type': 'application/json' },
      payload: { keyName: keys[1].keyName, timestamp: now },
    });
    expect(asking.json().error.code).toBe(40141);

    expect((await history(bearer(alices))).statusCode).toBe(200);
    expect((await history(basic(keys[1].keyStr))).statusCode).toBe(200);
    now += 10;
    expect((await history(bearer(await tokenOf(1, { clientId: 'bob' })))).statusCode).toBe(200); // issued after issuedBefore
  });

  it('revokes by revocationKey, given in an unsigned token request and handed on to the tokens a token asks for', async () => {
    const grouped = await tokenOf(1, { clientId: 'carol', revocationKey: 'group-1' });
    const child = (
      await inject({
        method: 'POST',
        url: `/keys/${keys[1].keyName}/requestToken`,
        headers: { authorization: bearer(grouped), 'content-type': 'application/json' },
        payload: { keyName: keys[1].keyName, timestamp: now },
      })
    ).json();
    expect(child.revocationKey).toBe('group-1');
    const other = await tokenOf(1, { clientId: 'carol', revocationKey: 'group-2' });
    now += 10;
    expect((await revoke({ targets: ['revocationKey:group-1'] })).statusCode).toBe(201);
    expect((await history(bearer(grouped))).json().error.code).toBe(40141);
    expect((await history(bearer(child.token))).json().error.code).toBe(40141);
    expect((await history(bearer(other))).statusCode).toBe(200);
  });

  it('a signed token request cannot carry a revocationKey (its mac does not cover it): 40003', async () => {
    const res = await inject({
      method: 'POST',
      url: `/keys/${keys[1].keyName}/requestToken`,
      headers: { 'content-type': 'application/json' },
      payload: { keyName: keys[1].keyName, timestamp: now, nonce: 'n'.repeat(16), mac: 'x', revocationKey: 'k' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40003);
  });

  it('each target succeeds or fails on its own: an unknown type 40000, a channel 40121; each error with its href, as every error has (README: Errors)', async () => {
    const dave = await tokenOf(1, { clientId: 'dave' });
    now += 10;
    const res = await revoke({ targets: ['clientId:dave', 'invalidType:abc', 'channel:secret', 'nocolon'] });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      successCount: 1,
      failureCount: 3,
      results: [
        { target: 'clientId:dave', issuedBefore: now, appliesAt: now },
        { target: 'invalidType:abc', error: { code: 40000, statusCode: 400, href: '/errors#error-40000' } },
        { target: 'channel:secret', error: { code: 40121, href: '/errors#error-40121' } },
        { target: 'nocolon', error: { code: 40000, href: '/errors#error-40000' } },
      ],
    });
    expect((await history(bearer(dave))).json().error.code).toBe(40141);
  });

  it('protocol 2 and earlier: the spec\'s batch form (an array, 201; 400 with 40020 and batchResponse when a target fails)', async () => {
    for (const version of ['2', '']) {
      const ok = await revoke({ targets: ['clientId:erin'] }, { version });
      expect(ok.statusCode).toBe(201);
      expect(ok.json()).toEqual([{ target: 'clientId:erin', issuedBefore: now, appliesAt: now }]);
      const mixed = await revoke({ targets: ['clientId:erin', 'bad:x'] }, { version });
      expect(mixed.statusCode).toBe(400);
      expect(mixed.json()).toMatchObject({
        error: { code: 40020, href: '/errors#error-40020' },
        batchResponse: [{ target: 'clientId:erin' }, { target: 'bad:x', error: { code: 40000, href: '/errors#error-40000' } }],
      });
    }
  });

  it('allowReauthMargin: applies 30 s later; until then the token works, from then on it is refused', async () => {
    const frank = await tokenOf(1, { clientId: 'frank' });
    now += 10;
    const res = await revoke({ targets: ['clientId:frank'], allowReauthMargin: true });
    expect(res.json().results[0]).toEqual({ target: 'clientId:frank', issuedBefore: now, appliesAt: now + 30_000 });
    expect((await history(bearer(frank))).statusCode).toBe(200);
    now += 29_999;
    expect((await history(bearer(frank))).statusCode).toBe(200);
    now += 1;
    expect((await history(bearer(frank))).json().error.code).toBe(40141);
  });

  it('a token a revoked token asks for within allowReauthMargin is revoked with it (it cannot outlive its revocation)', async () => {
    const hank = await tokenOf(1, { clientId: 'hank' });
    now += 10;
    expect((await revoke({ targets: ['clientId:hank'], allowReauthMargin: true })).statusCode).toBe(201);
    now += 10;
    const asked = await inject({
      method: 'POST',
      url: `/keys/${keys[1].keyName}/requestToken`,
      headers: { authorization: bearer(hank), 'content-type': 'application/json' },
      payload: { keyName: keys[1].keyName, timestamp: now },
    });
    expect(asked.statusCode, asked.body).toBe(200);
    expect(asked.json()).toMatchObject({ clientId: 'hank', issued: now }); // its details say when it was issued
    const child = asked.json().token;
    expect((await history(bearer(child))).statusCode).toBe(200);
    now += 30_000;
    expect((await history(bearer(hank))).json().error.code).toBe(40141);
    expect((await history(bearer(child))).json().error.code).toBe(40141);
    // A token the key issues after the revocation is not reached.
    expect((await history(bearer(await tokenOf(1, { clientId: 'hank' })))).statusCode).toBe(200);
  });

  it('issuedBefore: only tokens issued before it are revoked', async () => {
    const early = await tokenOf(1, { clientId: 'gina' });
    now += 100;
    const mark = now;
    now += 100;
    const late = await tokenOf(1, { clientId: 'gina' });
    now += 100;
    const res = await revoke({ targets: ['clientId:gina'], issuedBefore: mark });
    expect(res.json().results[0]).toMatchObject({ issuedBefore: mark, appliesAt: now });
    expect((await history(bearer(early))).json().error.code).toBe(40141);
    expect((await history(bearer(late))).statusCode).toBe(200);
  });

  it.each([
    ['a token-authenticated caller: 40162 (basic authentication required)', async () => revoke({ targets: ['clientId:x'] }, { authorization: bearer(await tokenOf(1)) }), 401, 40162],
    ['a key made without revocableTokens: 40163', async () => revoke({ targets: ['clientId:x'] }, { key: 0 }), 401, 40163],
    ['another key of the app than the path names: 40102', async () => revoke({ targets: ['clientId:x'] }, { authorization: basic(keys[2].keyStr) }), 401, 40102],
    ['no credentials: 40106', async () => revoke({ targets: ['clientId:x'] }, { authorization: '' }), 401, 40106],
    ['no targets', async () => revoke({}), 400, 40001],
    ['an empty list of targets', async () => revoke({ targets: [] }), 400, 40001],
    ['a target that is not a string', async () => revoke({ targets: [7] }), 400, 40001],
    ['more targets than the limit (100)', async () => revoke({ targets: Array.from({ length: 101 }, (_, i) => `clientId:c${i}`) }), 400, 40003],
    ['issuedBefore in the future', async () => revoke({ targets: ['clientId:x'], issuedBefore: now + 1000 }), 400, 40003],
    ['issuedBefore more than an hour ago', async () => revoke({ targets: ['clientId:x'], issuedBefore: now - 3600_001 }), 400, 40003],
    ['allowReauthMargin not a boolean', async () => revoke({ targets: ['clientId:x'], allowReauthMargin: 'yes' }), 400, 40003],
    ['a body that is not an object', async () => revoke(['clientId:x']), 400, 40001],
  ])('refuses %s, in the error format, never a 5xx', async (_what, send, status, code) => {
    const res = await send();
    expect(res.statusCode).toBe(status);
    expect(res.json().error).toMatchObject({ code, statusCode: status, message: expect.any(String) });
    expect(res.headers['x-ably-errorcode']).toBe(String(code));
  });
});

describe('token revocation: what a client can make it cost', () => {
  it('holds at most MAX_REVOCATIONS revocations; past it 42910 (429), and a repeat of a held one takes no room', async () => {
    const small = await startTestService({ MAX_REVOCATIONS: '2' }, { clock });
    try {
      const key = (await small.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }] } })).json().keys[0];
      const send = (targets: string[]) =>
        small.service.app.inject({
          method: 'POST',
          url: `/keys/${key.keyName}/revokeTokens`,
          headers: { authorization: basic(key.keyStr), 'content-type': 'application/json', 'x-ably-version': '6' },
          payload: { targets },
        });
      expect((await send(['clientId:a', 'clientId:b'])).statusCode).toBe(201);
      expect((await send(['clientId:a'])).statusCode).toBe(201); // the same again replaces it
      expect(small.service.revocations.held()).toBe(2);
      const full = await send(['clientId:c']);
      expect(full.statusCode).toBe(429);
      expect(full.json().error).toMatchObject({ code: 42910, message: expect.stringContaining('revocations') });
    } finally {
      await small.close();
      removeDir(small.dataDir);
    }
  });

  it('a repeat of a revocation in force appends nothing to the log (the apps topic is replayed at every start), and answers as the first did', async () => {
    const appsEnd = async (): Promise<number> => [...(await t.service.log.endOffsets('apps')).values()].reduce((a, b) => a + b, 0);
    const first = await revoke({ targets: ['clientId:repeat-me'] });
    expect(first.statusCode).toBe(201);
    const before = await appsEnd();
    for (let i = 0; i < 5; i++) {
      const again = await revoke({ targets: ['clientId:repeat-me'] });
      expect(again.statusCode).toBe(201);
      expect(again.json()).toEqual(first.json());
    }
    expect(await appsEnd()).toBe(before);
  });

  it('a target longer than 256 characters fails on its own (40000); the others are revoked', async () => {
    const res = await revoke({ targets: [`clientId:${'x'.repeat(300)}`, 'clientId:short-enough'] });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({ successCount: 1, failureCount: 1 });
    expect(body.results[0].error).toMatchObject({ code: 40000, message: expect.stringContaining('256') });
  });
});

describe('a revocation is an event on the log', () => {
  it('a restart keeps it: the revoked token is still refused with 40141, another still works', async () => {
    const own = await startTestService({}, { clock });
    let restarted: TestService | undefined;
    try {
      const key = (await own.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }] } })).json().keys[0];
      const token = async (svc: TestService, clientId: string) =>
        (
          await svc.service.app.inject({
            method: 'POST',
            url: `/keys/${key.keyName}/requestToken`,
            headers: { authorization: basic(key.keyStr), 'content-type': 'application/json' },
            payload: { keyName: key.keyName, timestamp: now, clientId },
          })
        ).json().token as string;
      const revoked = await token(own, 'henry');
      const kept = await token(own, 'iris');
      now += 10;
      const res = await own.service.app.inject({
        method: 'POST',
        url: `/keys/${key.keyName}/revokeTokens`,
        headers: { authorization: basic(key.keyStr), 'content-type': 'application/json' },
        payload: { targets: ['clientId:henry'] },
      });
      expect(res.statusCode).toBe(201);
      restarted = await own.restart();
      const read = (svc: TestService, tok: string) => svc.service.app.inject({ url: `/channels/${uniqueChannel()}/messages`, headers: { authorization: bearer(tok) } });
      expect((await read(restarted, revoked)).json().error.code).toBe(40141);
      expect((await read(restarted, kept)).statusCode).toBe(200);
    } finally {
      await (restarted ?? own).close();
      removeDir(own.dataDir);
    }
  });
});

/** A new app with a revocableTokens key on a service of its own: tokens of it, and revocations. */
async function revocableApp(svc: TestService) {
  const inject = (options: InjectOptions) => svc.service.app.inject(options);
  const key = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{ revocableTokens: true }] } })).json().keys[0];
  const headers = { authorization: basic(key.keyStr), 'content-type': 'application/json' };
  return {
    tokenFor: async (clientId: string) =>
      (await inject({ method: 'POST', url: `/keys/${key.keyName}/requestToken`, headers, payload: { keyName: key.keyName, timestamp: now, clientId } })).json().token as string,
    revokeOne: (target: string, allowReauthMargin = false) =>
      inject({ method: 'POST', url: `/keys/${key.keyName}/revokeTokens`, headers, payload: { targets: [target], allowReauthMargin } }),
  };
}

describe('realtime connections on a revoked token', () => {
  it('are disconnected with 40141 when the revocation applies; with allowReauthMargin they get an AUTH first', async () => {
    const own = await startTestService({}, { clock });
    const port = await listening(own);
    const clients: RawClient[] = [];
    try {
      const { tokenFor, revokeOne } = await revocableApp(own);
      const connect = async (clientId: string) => {
        const c = await RawClient.connect(port, { access_token: await tokenFor(clientId) });
        clients.push(c);
        return c;
      };
      const jack = await connect('jack');
      const kate = await connect('kate');
      const liam = await connect('liam');
      now += 10;
      expect((await revokeOne('clientId:jack')).statusCode).toBe(201);
      const disconnected = await jack.next((pm) => pm.action === Actions.DISCONNECTED);
      expect(disconnected.error).toMatchObject({ code: 40141, statusCode: 401 });

      expect((await revokeOne('clientId:liam', true)).statusCode).toBe(201);
      await liam.next((pm) => pm.action === Actions.AUTH);
      // Kate's token is not revoked: she is still connected and answered.
      await kate.ping();
      expect(kate.frames.some((pm) => pm.action === Actions.DISCONNECTED)).toBe(false);
      expect(liam.frames.some((pm) => pm.action === Actions.DISCONNECTED)).toBe(false);
      // Liam did not renew: when the margin ends, he is disconnected as Jack was (checked every second).
      now += 30_000;
      const late = await liam.next((pm) => pm.action === Actions.DISCONNECTED, 5_000);
      expect(late.error).toMatchObject({ code: 40141, statusCode: 401 });
      expect(kate.frames.some((pm) => pm.action === Actions.DISCONNECTED)).toBe(false);
    } finally {
      for (const c of clients) c.close();
      await own.close();
      removeDir(own.dataDir);
    }
  });

  it('an instance started during a revocation\'s margin disconnects the connections it reaches when the margin ends', async () => {
    const own = await startTestService({}, { clock });
    let restarted: TestService | undefined;
    const clients: RawClient[] = [];
    try {
      const { tokenFor, revokeOne } = await revocableApp(own);
      const mia = await tokenFor('mia');
      const noah = await tokenFor('noah');
      now += 10;
      const res = await revokeOne('clientId:mia', true);
      expect(res.statusCode).toBe(201);
      // A new instance (the same log), started within the margin: Mia's token still works there.
      restarted = await own.restart();
      const port = await listening(restarted);
      const miaClient = await RawClient.connect(port, { access_token: mia });
      const noahClient = await RawClient.connect(port, { access_token: noah });
      clients.push(miaClient, noahClient);
      await miaClient.ping();
      now += 30_000;
      const disconnected = await miaClient.next((pm) => pm.action === Actions.DISCONNECTED, 5_000);
      expect(disconnected.error).toMatchObject({ code: 40141, statusCode: 401 });
      await noahClient.ping();
      expect(noahClient.frames.some((pm) => pm.action === Actions.DISCONNECTED)).toBe(false);
    } finally {
      for (const c of clients) c.close();
      await (restarted ?? own).close();
      removeDir(own.dataDir);
    }
  });
});
