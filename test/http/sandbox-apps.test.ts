import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { basic, listening, startTestService, type TestService } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import { decodeEvent } from '../../src/log/event-codec.js';
import { keyString } from '../../src/domain/app.js';

const setup = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

describe('sandbox provisioning (SANDBOX=1)', () => {
  it('POST /apps answers 201 with appId, accountId, keys and namespaces in the harness shape', async () => {
    const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.appId).toEqual(expect.any(String));
    expect(body.accountId).toEqual(expect.any(String));
    expect(body.keys).toHaveLength(setup.keys.length);
    for (const key of body.keys) {
      expect(key.keyStr).toBe(`${key.keyName}:${key.keySecret}`);
      expect(key.keyName.startsWith(`${body.appId}.`)).toBe(true);
      expect(() => JSON.parse(key.capability)).not.toThrow();
    }
    expect(body.namespaces.map((n: { id: string }) => n.id)).toEqual(['persisted', 'pushenabled', 'mutable']);
  });

  it('stores the presence fixtures as presence events on the log', async () => {
    const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup });
    const appId = res.json().appId;
    const records = [];
    for (let p = 0; p < (await t.service.log.partitions('presence')); p++) records.push(...(await t.service.log.read('presence', p, 0, 10_000)));
    const events = records.map((r) => decodeEvent(r.value)).filter((e) => e.type === 'presence.changed' && e.appId === appId);
    expect(events).toHaveLength(6);
    const encoded = events.find((e) => e.type === 'presence.changed' && e.event.clientId === 'client_encoded');
    expect(encoded).toMatchObject({ channel: 'persisted:presence_fixtures', event: { action: 'enter', encoding: 'json/utf-8/cipher+aes-128-cbc/base64' } });
    expect(new Set(events.map((e) => (e.type === 'presence.changed' ? e.event.connectionId : '')))).toHaveProperty('size', 1);
  });

  it('refuses a malformed setup body with 400, not 5xx', async () => {
    for (const payload of [{ keys: 'x' }, { keys: [{ capability: 'nope' }] }, { keys: [{ capability: '{"a":["*","publish"]}' }] }, { namespaces: [{}] }, { channels: [{ name: '[bad]x' }] }]) {
      const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    }
  });

  it('DELETE /apps/<appId> with that app key removes it; its keys stop working (40400: no such app)', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const auth = basic(created.keys[0].keyStr);
    const other = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: t.auth } });
    expect(other.statusCode).toBe(401);
    const res = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: auth } });
    expect(res.statusCode).toBe(204);
    const after = await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: auth } });
    expect(after.json().error.code).toBe(40400);
  });

  it('DELETE /apps/<appId> of the default app (or an APPS_FILE app) is refused (40160), nothing appended: only sandbox apps; the app and its key stay, a restart included', async () => {
    const appId = t.key.split('.')[0];
    const res = await t.service.app.inject({ method: 'DELETE', url: `/apps/${appId}`, headers: { authorization: t.auth } });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
    expect((await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: t.auth } })).statusCode).toBe(200);
    t = await t.restart();
    expect((await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: t.auth } })).statusCode).toBe(200);
  });

  it('DELETE /apps/<appId> makes its presence members leave: its fixtures no longer count against the presence limits, and a restart does not bring them back', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json();
    const auth = basic(created.keys[0].keyStr);
    const members = await t.service.app.inject({ url: '/channels/persisted:presence_fixtures/presence', headers: { authorization: auth } });
    expect(members.json()).toHaveLength(6);
    expect(t.service.presence.memberCount(created.appId)).toBe(6);
    const before = t.service.presence.memberCount();
    const res = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: auth } });
    expect(res.statusCode).toBe(204);
    for (let i = 0; i < 500 && t.service.presence.memberCount(created.appId) > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(t.service.presence.memberCount(created.appId)).toBe(0);
    expect(t.service.presence.memberCount()).toBe(before - 6);
    // Each left: a leave in the log, so every instance and a rebuild agree.
    const records = [];
    for (let p = 0; p < (await t.service.log.partitions('presence')); p++) records.push(...(await t.service.log.read('presence', p, 0, 100_000)));
    const leaves = records.map((r) => decodeEvent(r.value)).filter((e) => e.type === 'presence.changed' && e.appId === created.appId && e.event.action === 'drop');
    expect(leaves).toHaveLength(1);
    t = await t.restart();
    expect(t.service.presence.memberCount(created.appId)).toBe(0);
  });

  it('DELETE /apps/<appId> ends the realtime connections on its keys (ERROR 40400): none publishes or enters presence after it', async () => {
    const port = await listening(t);
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const client = await RawClient.connect(port, { key: created.keys[0].keyStr, clientId: 'me' });
    try {
      await client.attach('room');
      expect((await client.presence('room', [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
      const failed = client.next((pm) => pm.action === Actions.ERROR);
      const res = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: basic(created.keys[0].keyStr) } });
      expect(res.statusCode).toBe(204);
      expect((await failed).error).toMatchObject({ code: 40400, statusCode: 404 });
      expect((await client.closed).code).toBeDefined();
      for (let i = 0; i < 500 && t.service.presence.memberCount(created.appId) > 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(t.service.presence.memberCount(created.appId)).toBe(0);
    } finally {
      client.close();
    }
  });

  it('apps created this way survive a restart', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json();
    t = await t.restart();
    const res = await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(res.statusCode).toBe(200);
  });

  it('holds at most MAX_SANDBOX_APPS apps, creations racing included (403, 40128, no app); a deleted app makes room', async () => {
    const bounded = await startTestService({ MAX_SANDBOX_APPS: '3' });
    try {
      const post = () => bounded.service.app.inject({ method: 'POST', url: '/apps', payload: setup });
      const sandboxApps = () => bounded.service.registry.all().filter((a) => a.source === 'sandbox');
      const answers = await Promise.all([post(), post(), post(), post(), post()]);
      expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 201, 201, 403, 403]);
      const refused = answers.find((r) => r.statusCode === 403)!.json().error;
      expect(refused).toMatchObject({ code: 40128, statusCode: 403 });
      expect(refused.message).toMatch(/DELETE \/apps/);
      expect(sandboxApps()).toHaveLength(3);
      const made = answers.find((r) => r.statusCode === 201)!.json();
      const deleted = await bounded.service.app.inject({ method: 'DELETE', url: `/apps/${made.appId}`, headers: { authorization: basic(made.keys[0].keyStr) } });
      expect(deleted.statusCode).toBe(204);
      expect((await post()).statusCode).toBe(201);
      expect((await post()).statusCode).toBe(403);
      expect(sandboxApps()).toHaveLength(3);
    } finally {
      await bounded.close();
    }
  });

  it('without SANDBOX=1 there is no /apps route', async () => {
    const plain = await startTestService({ SANDBOX: '0' });
    try {
      expect((await plain.service.app.inject({ method: 'POST', url: '/apps', payload: {} })).statusCode).toBe(404);
    } finally {
      await plain.close();
    }
  });
});

describe('POST /apps validates the whole body first and creates an app whole or not at all', () => {
  /** Everything on the apps and presence topics, to show a refusal appended nothing. */
  const logSize = async (): Promise<number> =>
    (await t.service.log.read('apps', 0, 0, 100_000)).length + (await t.service.log.read('presence', 0, 0, 100_000)).length;

  const nested = (depth: number): unknown => {
    let v: unknown = 'leaf';
    for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { d: v };
    return v;
  };

  it.each([
    ['presence data nested 200 deep', { channels: [{ name: 'ok', presence: [{ clientId: 'a', data: 'fine' }] }, { name: 'deep', presence: [{ clientId: 'b', data: nested(200) }] }] }, 400, 40013],
    // Written out as text: JSON.stringify itself runs out of stack at this depth.
    ['presence data nested 10,000 deep', `{"channels":[{"name":"deep","presence":[{"clientId":"b","data":${'{"d":['.repeat(5000)}1${']}'.repeat(5000)}}]}]}`, 400, 40013],
    ['a namespace flag nested 200 deep', { namespaces: [{ id: 'x', deep: nested(200) }] }, 400, 40001],
    ['a namespace flag that is an object', { namespaces: [{ id: 'x', persisted: { yes: true } }] }, 400, 40001],
    ['more fixture members than an app may have', { channels: [{ name: 'a', presence: Array.from({ length: 600 }, (_, i) => ({ clientId: `a${i}` })) }, { name: 'b', presence: Array.from({ length: 401 }, (_, i) => ({ clientId: `b${i}` })) }] }, 400, 40001],
    ['a member larger than a message may be', { channels: [{ name: 'big', presence: [{ clientId: 'a', data: 'x'.repeat(65_537) }] }] }, 400, 40009],
    ['presence that is not an array', { channels: [{ name: 'a', presence: { clientId: 'a' } }] }, 400, 40001],
    ['a body over the route limit', { channels: [{ name: 'a', presence: [{ clientId: 'a', data: 'x'.repeat(300 * 1024) }] }] }, 413, 40009],
  ])('%s: a 4xx in the error format, and nothing appended', async (_what, payload, status, code) => {
    const apps = t.service.registry.all().length;
    const before = await logSize();
    const res = await t.service.app.inject({ method: 'POST', url: '/apps', headers: { 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(status);
    expect(res.headers['x-ably-errorcode']).toBe(String(code));
    expect(res.json().error).toMatchObject({ code, statusCode: status, message: expect.any(String) });
    expect(t.service.registry.all().length).toBe(apps);
    expect(await logSize()).toBe(before);
  });

  it('data nested as deep as a message may be is accepted', async () => {
    const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload: { channels: [{ name: 'a', presence: [{ clientId: 'a', data: nested(31) }] }] } });
    expect(res.statusCode).toBe(201);
  });
});

describe('POST /apps when the log fails part-way', () => {
  let failing: TestService;
  /** The topic whose next append fails, if any. */
  let failOn: string | undefined;
  /** app.created events the service tried to append. */
  const attempted: string[] = [];

  beforeAll(async () => {
    failing = await startTestService(
      {},
      {
        adapters: (dataDir) => {
          const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir }));
          const log = adapters.log;
          const append = log.append.bind(log);
          log.append = async (topic, records) => {
            if (topic === 'apps') {
              for (const r of records) {
                const event = decodeEvent(r.value);
                if (event.type === 'app.created') attempted.push(keyString(event.app.keys[0]));
              }
            }
            if (topic === failOn) throw new Error(`injected ${topic} append failure`);
            return append(topic, records);
          };
          return adapters;
        },
      },
    );
  });
  afterAll(() => failing.close());

  it.each(['presence', 'apps'])('an append to %s that fails answers 503 and leaves no app behind, before or after a restart', async (topic) => {
    const apps = failing.service.registry.all().length;
    failOn = topic;
    attempted.length = 0;
    const res = await failing.service.app.inject({ method: 'POST', url: '/apps', payload: setup });
    failOn = undefined;
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toMatchObject({ code: 50005, statusCode: 503 });
    expect(res.json().error.message).not.toMatch(/injected/);
    expect(failing.service.registry.all().length).toBe(apps);
    // The key the app would have had (the fixtures go first: if they fail, no app event is even tried).
    expect(attempted).toHaveLength(topic === 'apps' ? 1 : 0);
    for (const key of attempted) {
      const get = await failing.service.app.inject({ url: '/channels/x/messages', headers: { authorization: basic(key) } });
      expect(get.json().error.code).toBe(40400); // no such app
    }
    failing = await failing.restart();
    expect(failing.service.registry.all().length).toBe(apps);
    for (const key of attempted) {
      const get = await failing.service.app.inject({ url: '/channels/x/messages', headers: { authorization: basic(key) } });
      expect(get.json().error.code).toBe(40400); // no such app
    }
    // And the next creation succeeds whole.
    expect((await failing.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).statusCode).toBe(201);
  });

  it.each(['presence', 'apps'])('a DELETE /apps/<appId> whose append to %s fails answers 503 (retry), not 500, and the app stays', async (topic) => {
    const created = (await failing.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json();
    const auth = basic(created.keys[0].keyStr);
    failOn = topic;
    const res = await failing.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: auth } });
    failOn = undefined;
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toMatchObject({ code: 50005, statusCode: 503 });
    expect(res.json().error.message).not.toMatch(/injected/);
    expect((await failing.service.app.inject({ url: '/channels/x/messages', headers: { authorization: auth } })).statusCode).toBe(200);
    expect((await failing.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: auth } })).statusCode).toBe(204);
  });
});
