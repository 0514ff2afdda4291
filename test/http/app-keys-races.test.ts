// Key changes racing on one instance: each is checked against the keys as the changes before it
// left them (src/apps/key-admin.ts serializes an app's changes). Before, concurrent requests were
// each checked against the same keys: two management keys revoking each other left the app with
// none (which the route promises never to do), and creations racing passed MAX_KEYS_PER_APP.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { basic, startTestService, type TestService } from '../helpers/service.js';

let t: TestService;
beforeAll(async () => void (t = await startTestService({ MAX_KEYS_PER_APP: '5' })));
afterAll(() => t.close());

/** A key management request on the default app's keys (`path` after /apps/<appId>/keys). */
const keysCall = (authorization: string, method: 'GET' | 'POST', path = '', body?: unknown) =>
  t.service.app.inject({ method, url: `/apps/${t.key.split('.')[0]}/keys${path}`, headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { payload: JSON.stringify(body) }) });
const create = (body: unknown, authorization = t.auth) => keysCall(authorization, 'POST', '', body);
const revoke = (keyId: string, authorization: string) => keysCall(authorization, 'POST', `/${keyId}/revoke`);
const list = (authorization: string) => keysCall(authorization, 'GET');

/** A second management key, made by the first test's race (its first creation). */
let second = '';

it('creations racing do not pass MAX_KEYS_PER_APP: 201 up to it, 403 40127 after', async () => {
  expect((await list(t.auth)).json()).toHaveLength(1);
  const results = await Promise.all(Array.from({ length: 6 }, (_, i) => create(i === 0 ? { management: true } : {})));
  second = results[0].json().key as string;
  expect(results.map((r) => r.statusCode)).toEqual([201, 201, 201, 201, 403, 403]);
  expect(results.slice(4).map((r) => r.json().error.code)).toEqual([40127, 40127]);
  expect((await list(t.auth)).json()).toHaveLength(5);
});

it('two management keys revoking each other at once: one is revoked, the other refused (400): a manager stays', async () => {
  const rootId = t.key.split(':')[0].split('.')[1];
  const secondId = second.split(':')[0].split('.')[1];
  const [a, b] = await Promise.all([revoke(rootId, basic(second)), revoke(secondId, t.auth)]);
  expect([a.statusCode, b.statusCode].sort()).toEqual([200, 400]);
  const manager = a.statusCode === 200 ? basic(second) : t.auth;
  const keys = (await list(manager)).json() as { management: boolean; status: number }[];
  expect(keys.filter((k) => k.management && k.status === 0)).toHaveLength(1);
});
