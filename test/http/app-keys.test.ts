// Key management (issue 24 item 2): /apps/<appId>/keys, in the shape of the platform's Control API,
// guarded by a key with the management right; changes are events on the apps topic, so a restart
// (which replays the topic) keeps them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InjectOptions } from 'fastify';
import { basic, listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';

let t: TestService;
let appId: string;
const inject = (options: InjectOptions) => t.service.app.inject(options);
const json = { 'content-type': 'application/json' };

beforeAll(async () => {
  t = await startTestService({ MAX_KEYS_PER_APP: '6' });
  appId = t.key.split('.')[0];
});
afterAll(async () => {
  await t.close();
  removeDir(t.dataDir);
});

const create = (body: unknown, authorization = t.auth) => inject({ method: 'POST', url: `/apps/${appId}/keys`, headers: { authorization, ...json }, payload: JSON.stringify(body) });
const list = (authorization = t.auth) => inject({ url: `/apps/${appId}/keys`, headers: { authorization } });
const update = (keyId: string, body: unknown, authorization = t.auth) =>
  inject({ method: 'PATCH', url: `/apps/${appId}/keys/${keyId}`, headers: { authorization, ...json }, payload: JSON.stringify(body) });
const revoke = (keyId: string, authorization = t.auth) => inject({ method: 'POST', url: `/apps/${appId}/keys/${keyId}/revoke`, headers: { authorization } });
const publish = (key: string, channel: string) =>
  inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: basic(key), ...json }, payload: { name: 'n', data: 'd' } });
const readStats = (key: string) => inject({ url: '/stats', headers: { authorization: basic(key) } });

describe('the default app file and root key', () => {
  it('gives the root key as one name:secret string, with revocableTokens and the management right', () => {
    const file = JSON.parse(readFileSync(join(t.dataDir, 'default-app.json'), 'utf8'));
    expect(file.key).toBe(t.key);
    expect(file.keys[0]).toMatchObject({ revocableTokens: true, management: true });
  });

  it('the root key can revoke its tokens (no 40163)', async () => {
    const res = await inject({
      method: 'POST',
      url: `/keys/${t.key.split(':')[0]}/revokeTokens`,
      headers: { authorization: t.auth, ...json },
      payload: { targets: ['clientId:nobody'] },
    });
    expect(res.statusCode, res.body).toBe(201);
  });
});

describe('/apps/<appId>/keys', () => {
  it('POST makes a key and shows its secret once (201); GET lists the keys without secrets', async () => {
    const res = await create({ name: 'analyst', capability: { '*': ['stats'] } });
    expect(res.statusCode, res.body).toBe(201);
    const made = res.json();
    expect(made).toMatchObject({ appId, name: 'analyst', status: 0, capability: { '*': ['stats'] }, revocableTokens: false, management: false });
    expect(made.key).toMatch(new RegExp(`^${appId}\\.${made.id}:.+`));
    expect((await readStats(made.key)).statusCode).toBe(200);
    const publishRes = await publish(made.key, uniqueChannel());
    expect(publishRes.json().error).toMatchObject({ code: 40160, statusCode: 401 });

    const listed = await list();
    expect(listed.statusCode).toBe(200);
    const keys = listed.json() as Record<string, unknown>[];
    expect(keys.map((k) => k.keyName)).toContain(made.keyName);
    expect(listed.body).not.toContain(made.key.split(':')[1]);
    expect(listed.body).not.toContain(t.key.split(':')[1]);
    expect(keys.every((k) => !('key' in k))).toBe(true);
  });

  it('a key made without a capability gets {"*":["*"]}; revocableTokens and management are kept', async () => {
    const made = (await create({ revocableTokens: true, management: true })).json();
    expect(made).toMatchObject({ capability: { '*': ['*'] }, revocableTokens: true, management: true });
    expect((await list(basic(made.key))).statusCode).toBe(200); // it manages too
  });

  it('PATCH changes the capability, and it takes effect on the next request', async () => {
    const made = (await create({ capability: { 'rooms:*': ['publish'] } })).json();
    expect((await publish(made.key, 'rooms:a')).statusCode).toBe(201);
    expect((await publish(made.key, 'other')).statusCode).toBe(401);
    const res = await update(made.id, { capability: { 'other': ['publish'] }, name: 'moved' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ name: 'moved', capability: { other: ['publish'] } });
    expect(res.json().key).toBeUndefined();
    expect((await publish(made.key, 'other')).statusCode).toBe(201);
    expect((await publish(made.key, 'rooms:a')).json().error.code).toBe(40160);
  });

  it('revoke: the key is refused with 40131, its tokens with 40141; a repeat answers the same', async () => {
    const made = (await create({})).json();
    const token = (
      await inject({
        method: 'POST',
        url: `/keys/${made.keyName}/requestToken`,
        headers: { authorization: basic(made.key), ...json },
        payload: { keyName: made.keyName, timestamp: Date.now() },
      })
    ).json().token as string;
    const res = await revoke(made.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 1 });
    expect((await publish(made.key, uniqueChannel())).json().error).toMatchObject({ code: 40131, statusCode: 401 });
    const byToken = await inject({ url: `/channels/${uniqueChannel()}/messages`, headers: { authorization: `Bearer ${Buffer.from(token).toString('base64')}` } });
    expect(byToken.json().error.code).toBe(40141);
    expect((await revoke(made.keyName)).json()).toMatchObject({ status: 1 }); // the whole key name works too
    const patched = await update(made.id, { name: 'back' });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().error.message).toMatch(/revoked/);
  });
});

describe('refusals, in the error format', () => {
  it('a key without the management right: 40160, nothing made', async () => {
    const plain = (await create({ name: 'plain' })).json();
    const before = (await list()).json().length;
    for (const res of [await create({}, basic(plain.key)), await list(basic(plain.key)), await revoke(plain.id, basic(plain.key)), await update(plain.id, { name: 'x' }, basic(plain.key))]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toMatchObject({ code: 40160, statusCode: 401 });
      expect(res.json().error.message).toMatch(/management/);
    }
    expect((await list()).json().length).toBe(before);
  });

  it('no credentials: 40106; a token: 40162; another app: 40160', async () => {
    expect((await inject({ url: `/apps/${appId}/keys` })).json().error.code).toBe(40106);
    const token = (
      await inject({ method: 'POST', url: `/keys/${t.key.split(':')[0]}/requestToken`, headers: { authorization: t.auth, ...json }, payload: { keyName: t.key.split(':')[0], timestamp: Date.now() } })
    ).json().token as string;
    expect((await list(`Bearer ${Buffer.from(token).toString('base64')}`)).json().error.code).toBe(40162);
    const other = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const res = await inject({ url: `/apps/${other.appId}/keys`, headers: { authorization: t.auth } });
    expect(res.json().error).toMatchObject({ code: 40160 });
  });

  it('bad input: 400 naming the field, nothing made', async () => {
    const before = (await list()).json().length;
    const cases: [unknown, RegExp][] = [
      [{ capability: { '*': ['fly'] } }, /capability/],
      [{ capability: 'not json' }, /capability/],
      [{ capability: { x: ['publish'], y: ['x'.repeat(DEFAULT_LIMITS.maxKeyCapabilityBytes)] } }, /bytes/],
      [{ revocableTokens: 'yes' }, /revocableTokens/],
      [{ management: 1 }, /management/],
      [{ name: 'x'.repeat(DEFAULT_LIMITS.maxKeyNameLength + 1) }, /name/],
      [{ secret: 'mine' }, /unknown field "secret"/],
      [[1, 2], /object/],
    ];
    for (const [body, message] of cases) {
      const res = await create(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.message).toMatch(message);
      expect([40001, 40003]).toContain(res.json().error.code);
    }
    expect((await update('nope', { name: 'x' })).json().error).toMatchObject({ code: 40400, statusCode: 404 });
    expect((await update(t.key.split(':')[0].split('.')[1], {})).statusCode).toBe(400);
    expect((await inject({ method: 'DELETE', url: `/apps/${appId}/keys`, headers: { authorization: t.auth } })).json().error.code).toBe(40400);
    expect((await list()).json().length).toBe(before);
  });

  it('the last management key cannot be revoked or lose the right', async () => {
    const root = t.key.split(':')[0].split('.')[1];
    // Revoke every other management key first (made by the tests above).
    for (const k of (await list()).json() as { id: string; management: boolean; status: number }[]) {
      if (k.management && k.status === 0 && k.id !== root) expect((await revoke(k.id)).statusCode).toBe(200);
    }
    const res = await revoke(root);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/last key .* management/);
    expect((await update(root, { management: false })).statusCode).toBe(400);
    expect((await list()).statusCode).toBe(200);
  });

  it('keys per app are limited (MAX_KEYS_PER_APP, revoked keys count): 403 40127', async () => {
    let res = await create({});
    while (res.statusCode === 201) res = await create({});
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toMatchObject({ code: 40127, statusCode: 403 });
    expect(res.json().error.message).toMatch(/MAX_KEYS_PER_APP=6/);
    expect((await list()).json().length).toBe(6);
  });
});

describe('realtime connections', () => {
  it('on a revoked key end: its basic connections with ERROR 40131, its token connections DISCONNECTED 40141; others stay', async () => {
    const own = await startTestService();
    const port = await listening(own);
    const ownApp = own.key.split('.')[0];
    const clients: RawClient[] = [];
    try {
      const make = async (body: unknown) =>
        (await own.service.app.inject({ method: 'POST', url: `/apps/${ownApp}/keys`, headers: { authorization: own.auth, ...json }, payload: JSON.stringify(body) })).json();
      const doomed = await make({ name: 'doomed' });
      const kept = await make({ name: 'kept' });
      const token = (
        await own.service.app.inject({ method: 'POST', url: `/keys/${doomed.keyName}/requestToken`, headers: { authorization: basic(doomed.key), ...json }, payload: { keyName: doomed.keyName, timestamp: Date.now() } })
      ).json().token as string;
      const connect = async (query: Record<string, string>) => {
        const c = await RawClient.connect(port, query);
        clients.push(c);
        return c;
      };
      const byKey = await connect({ key: doomed.key });
      const byToken = await connect({ access_token: token });
      const other = await connect({ key: kept.key });

      // A capability change applies to what a connection on the key does next.
      const narrowed = await own.service.app.inject({ method: 'PATCH', url: `/apps/${ownApp}/keys/${doomed.id}`, headers: { authorization: own.auth, ...json }, payload: { capability: { 'only-here': ['publish'] } } });
      expect(narrowed.statusCode).toBe(200);
      const refused = await byKey.publish('elsewhere', [{ name: 'n' }]);
      expect(refused.action).toBe(Actions.NACK);
      expect(refused.error).toMatchObject({ code: 40160 });
      expect((await byKey.publish('only-here', [{ name: 'n' }])).action).toBe(Actions.ACK);

      const res = await own.service.app.inject({ method: 'POST', url: `/apps/${ownApp}/keys/${doomed.id}/revoke`, headers: { authorization: own.auth } });
      expect(res.statusCode).toBe(200);
      const error = await byKey.next((pm) => pm.action === Actions.ERROR);
      expect(error.error).toMatchObject({ code: 40131, statusCode: 401 });
      await byKey.closed;
      const disconnected = await byToken.next((pm) => pm.action === Actions.DISCONNECTED);
      expect(disconnected.error).toMatchObject({ code: 40141, statusCode: 401 });
      await other.ping();
      expect(other.frames.some((pm) => pm.action === Actions.ERROR || pm.action === Actions.DISCONNECTED)).toBe(false);
      // A new connection on the revoked key is refused.
      const again = await RawClient.open(port, { key: doomed.key });
      clients.push(again);
      expect((await again.next(() => true)).error).toMatchObject({ code: 40131 });
    } finally {
      for (const c of clients) c.close();
      await own.close();
      removeDir(own.dataDir);
    }
  });
});

describe('a restart', () => {
  it('keeps the keys made, changed and revoked (the apps topic is replayed)', async () => {
    const before = (await list()).json() as { keyName: string; status: number; capability: unknown; name: string }[];
    t = await t.restart();
    const after = (await list()).json() as typeof before;
    expect(after).toEqual(before);
    const revoked = after.find((k) => k.status === 1)!;
    expect(revoked).toBeDefined();
  });
});
