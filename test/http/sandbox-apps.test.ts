import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { basic, startTestService, type TestService } from '../helpers/service.js';

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
    const records = await t.service.log.read('presence', 0, 0, 10_000);
    const { decodeEvent } = await import('../../src/log/events.js');
    const events = records.map((r) => decodeEvent(r.value)).filter((e) => e.type === 'presence.changed' && e.appId === appId);
    expect(events).toHaveLength(6);
    const encoded = events.find((e) => e.type === 'presence.changed' && e.event.clientId === 'client_encoded');
    expect(encoded).toMatchObject({ channel: 'persisted:presence_fixtures', event: { action: 'enter', encoding: 'json/utf-8/cipher+aes-128-cbc/base64' } });
    expect(new Set(events.map((e) => (e.type === 'presence.changed' ? e.event.connectionId : '')))).toHaveProperty('size', 1);
  });

  it('refuses a malformed setup body with 400, not 5xx', async () => {
    for (const payload of [{ keys: 'x' }, { keys: [{ capability: 'nope' }] }, { namespaces: [{}] }, { channels: [{ name: '[bad]x' }] }]) {
      const res = await t.service.app.inject({ method: 'POST', url: '/apps', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    }
  });

  it('DELETE /apps/<appId> with that app key removes it; its keys stop working', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const auth = basic(created.keys[0].keyStr);
    const other = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: t.auth } });
    expect(other.statusCode).toBe(401);
    const res = await t.service.app.inject({ method: 'DELETE', url: `/apps/${created.appId}`, headers: { authorization: auth } });
    expect(res.statusCode).toBe(204);
    const after = await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: auth } });
    expect(after.json().error.code).toBe(40101);
  });

  it('apps created this way survive a restart', async () => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json();
    t = await t.restart();
    const res = await t.service.app.inject({ url: '/channels/x/messages', headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(res.statusCode).toBe(200);
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
