import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { decode } from '@msgpack/msgpack';
import { basic, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

const setup = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;
const FIXTURES = 'persisted:presence_fixtures';
let t: TestService;
let auth: string;
let appId: string;
let keys: { keyStr: string; capability: string }[];

beforeAll(async () => {
  t = await startTestService();
  const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json();
  appId = created.appId;
  keys = created.keys;
  auth = basic(keys[0].keyStr);
});
afterAll(() => t.close());

const get = (url: string, headers: Record<string, string> = {}) => t.service.app.inject({ url, headers: { authorization: auth, ...headers } });
const path = (channel: string, rest = 'presence') => `/channels/${encodeURIComponent(channel)}/${rest}`;
const links = (header: unknown): Record<string, string> =>
  Object.fromEntries([...String(header ?? '').matchAll(/<([^>]+)>; rel="(\w+)"/g)].map((m) => [m[2], m[1]]));

describe('GET /channels/<channel_id>/presence (spec: Retrieve current presence members)', () => {
  it('lists the members now present, each with action present (1)', async () => {
    const res = await get(path(FIXTURES));
    expect(res.statusCode).toBe(200);
    const members = res.json();
    expect(members).toHaveLength(6);
    for (const m of members) {
      expect(m).toMatchObject({ action: 1, clientId: expect.any(String), connectionId: expect.any(String), id: expect.any(String), timestamp: expect.any(Number) });
    }
  });

  it('returns data and encoding unchanged; encrypted data stays as it came', async () => {
    const members = (await get(path(FIXTURES))).json() as { clientId: string; data: string; encoding?: string }[];
    const encoded = members.find((m) => m.clientId === 'client_encoded')!;
    expect(encoded.data).toBe('HO4cYSP8LybPYBPZPHQOtuD53yrD3YV3NBoTEYBh4U0N1QXHbtkfsDfTspKeLQFt');
    expect(encoded.encoding).toBe('json/utf-8/cipher+aes-128-cbc/base64');
    expect(members.find((m) => m.clientId === 'client_decoded')).toMatchObject({ encoding: 'json' });
  });

  it('filters by clientId and by connectionId', async () => {
    const one = (await get(`${path(FIXTURES)}?clientId=client_bool`)).json();
    expect(one).toMatchObject([{ clientId: 'client_bool', data: 'true' }]);
    const byConnection = (await get(`${path(FIXTURES)}?connectionId=${one[0].connectionId}`)).json();
    expect(byConnection).toHaveLength(6);
    expect((await get(`${path(FIXTURES)}?connectionId=nobody`)).json()).toEqual([]);
    // Both filters: the one member with that key, or none.
    const both = (await get(`${path(FIXTURES)}?clientId=client_bool&connectionId=${one[0].connectionId}`)).json();
    expect(both).toEqual(one);
    expect((await get(`${path(FIXTURES)}?clientId=client_bool&connectionId=nobody`)).json()).toEqual([]);
    expect((await get(`${path(FIXTURES)}?clientId=nobody&connectionId=${one[0].connectionId}`)).json()).toEqual([]);
  });

  it('pages with limit and Link next, each member exactly once', async () => {
    let res = await get(`${path(FIXTURES)}?limit=4`);
    const seen: string[] = [];
    for (;;) {
      seen.push(...res.json().map((m: { clientId: string }) => m.clientId));
      const next = links(res.headers.link).next;
      if (!next) break;
      expect(next.startsWith('./presence?')).toBe(true);
      res = await get(`${path(FIXTURES)}${next.slice('./presence'.length)}`);
    }
    expect(seen.sort()).toEqual(['client_bool', 'client_decoded', 'client_encoded', 'client_int', 'client_json', 'client_string']);
  });

  it('answers an empty array when nobody is present', async () => {
    expect((await get(path(uniqueChannel()))).json()).toEqual([]);
  });

  it('refuses limit above 1000', async () => {
    expect((await get(`${path(FIXTURES)}?limit=1001`)).json().error.code).toBe(40003);
  });

  it('answers in MessagePack', async () => {
    const res = await get(path(FIXTURES), { accept: 'application/x-msgpack' });
    expect((decode(res.rawPayload) as unknown[]).length).toBe(6);
  });

  it('members are unique by (clientId, connectionId); update, leave and a dropped connection change the set', async () => {
    const channel = uniqueChannel();
    const p = t.service.presenceProducer;
    await p.append(appId, channel, [
      { action: 'enter', clientId: 'a', connectionId: 'c1', data: 'one' },
      { action: 'enter', clientId: 'a', connectionId: 'c2', data: 'two' },
      { action: 'enter', clientId: 'b', connectionId: 'c1' },
      { action: 'update', clientId: 'a', connectionId: 'c1', data: 'one-bis' },
    ]);
    const now = (await get(path(channel))).json() as { clientId: string; connectionId: string; data?: string }[];
    expect(now.map((m) => `${m.clientId}@${m.connectionId}=${m.data ?? ''}`).sort()).toEqual(['a@c1=one-bis', 'a@c2=two', 'b@c1=']);
    await p.append(appId, channel, [{ action: 'leave', clientId: 'a', connectionId: 'c2' }]);
    await p.append(appId, channel, [{ action: 'drop', connectionId: 'c1' }]);
    expect((await get(path(channel))).json()).toEqual([]);
    const history = (await get(`${path(channel, 'presence/history')}?direction=forwards`)).json() as { action: number; clientId: string }[];
    expect(history.map((h) => `${h.action}:${h.clientId}`)).toEqual(['2:a', '2:a', '2:b', '4:a', '3:a', '3:a', '3:b']);
  });
});

describe('GET /channels/<channel_id>/presence/history (spec: Retrieve presence history)', () => {
  it('keeps the original actions (enter) of the fixtures, with start/end/limit/direction and Link paging', async () => {
    const res = await get(`${path(FIXTURES, 'presence/history')}?limit=4&direction=forwards`);
    expect(res.statusCode).toBe(200);
    const page = res.json();
    expect(page).toHaveLength(4);
    expect(page.every((e: { action: number }) => e.action === 2)).toBe(true);
    const next = links(res.headers.link).next;
    expect(next.startsWith('./history?')).toBe(true);
    const rest = (await get(`${path(FIXTURES, 'presence')}/${next.slice(2)}`)).json();
    expect(rest).toHaveLength(2);
  });

  it('refuses bad parameters like message history does', async () => {
    expect((await get(`${path(FIXTURES, 'presence/history')}?direction=up`)).statusCode).toBe(400);
    expect((await get(`${path(FIXTURES, 'presence/history')}?limit=2000`)).statusCode).toBe(400);
  });

  it('survives a restart for a persisted namespace (the fixtures channel)', async () => {
    await t.service.presence.history.flush();
    t = await t.restart();
    expect((await get(`${path(FIXTURES, 'presence/history')}`)).json()).toHaveLength(6);
    expect((await get(path(FIXTURES))).json()).toHaveLength(6);
  });
});

describe('GET /presence (spec: Batch presence)', () => {
  it('reads several channels in request order, comma-separated', async () => {
    const empty = uniqueChannel();
    const res = await get(`/presence?channel=${encodeURIComponent(`${FIXTURES},${empty}`)}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.map((r: { channel: string }) => r.channel)).toEqual([FIXTURES, empty]);
    expect(body[0].presence).toHaveLength(6);
    expect(body[1].presence).toEqual([]);
  });

  it('accepts `channels` (as the SDK sends it) and a custom separator', async () => {
    expect((await get(`/presence?channels=${encodeURIComponent(`${FIXTURES},x`)}`)).json()).toHaveLength(2);
    const res = await get(`/presence?channel=${encodeURIComponent(`${FIXTURES}|a,b`)}&separator=|`);
    expect(res.json().map((r: { channel: string }) => r.channel)).toEqual([FIXTURES, 'a,b']);
  });

  it('a channel named more than once is read and answered once, at its first place (a name repeated counts once)', async () => {
    // Repeats would each carry the whole member set: 2,000 of them in a short query string made
    // one GET answer hundreds of megabytes (review finding).
    const empty = uniqueChannel();
    const names = [FIXTURES, empty, ...Array.from({ length: 2000 }, () => FIXTURES), empty];
    const res = await get(`/presence?channel=${encodeURIComponent(names.join(','))}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.map((r: { channel: string }) => r.channel)).toEqual([FIXTURES, empty]);
    expect(body[0].presence).toHaveLength(6);
  });

  it('at least one failed: 400 with 40020 and batchResponse', async () => {
    const restricted = basic(keys.find((k) => k.capability.includes('channel0'))!.keyStr);
    const res = await get('/presence?channel=channel2,channel0', { authorization: restricted });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: { code: 40020 },
      batchResponse: [{ channel: 'channel2', presence: [] }, { channel: 'channel0', error: { code: 40160 } }],
    });
  });

  it.each([
    ['no channel', '/presence'],
    ['an empty name', '/presence?channel=a,,b'],
    ['an empty separator', '/presence?channel=a&separator='],
    ['more than 100 channels', `/presence?channel=${Array.from({ length: 101 }, (_, i) => `c${i}`).join(',')}`],
    ['an invalid channel name inside', '/presence?channel=%5Bbad%5Dx'],
  ])('refuses %s with a clear error, never a 5xx', async (_what, url) => {
    const res = await get(url);
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(res.json().error.code).toBeGreaterThanOrEqual(40000);
  });

  it('a reply holds at most MAX_BATCH_PRESENCE_MEMBERS members in all: a channel whose set would pass it fails on its own (91003), the others are answered whole', async () => {
    const bounded = await startTestService({ MAX_BATCH_PRESENCE_MEMBERS: '8' });
    try {
      const members = (n: number) => Array.from({ length: n }, (_, i) => ({ clientId: `m${i}` }));
      const payload = { keys: [{}], channels: [{ name: 'a', presence: members(5) }, { name: 'b', presence: members(3) }, { name: 'c', presence: members(1) }] };
      const made = (await bounded.service.app.inject({ method: 'POST', url: '/apps', payload })).json();
      const res = await bounded.service.app.inject({ url: '/presence?channel=a,b,c,d', headers: { authorization: basic(made.keys[0].keyStr) } });
      expect(res.statusCode).toBe(400);
      const body = res.json();
      expect(body.error.code).toBe(40020);
      expect(body.batchResponse.map((r: { channel: string; presence?: unknown[]; error?: { code: number } }) => [r.channel, r.presence?.length ?? r.error?.code])).toEqual([
        ['a', 5],
        ['b', 3],
        ['c', 91003],
        ['d', 0],
      ]);
      expect(body.batchResponse[2].error.message).toMatch(/page by page/);
      // Alone, that channel is answered.
      const alone = await bounded.service.app.inject({ url: '/presence?channel=c', headers: { authorization: basic(made.keys[0].keyStr) } });
      expect(alone.json()).toMatchObject([{ channel: 'c', presence: [{ clientId: 'm0' }] }]);
    } finally {
      await bounded.close();
    }
  });

  it('protocol version 3 and later: {successCount, failureCount, results}', async () => {
    for (const version of ['3', '6']) {
      const res = await get(`/presence?channels=${encodeURIComponent(FIXTURES)}`, { 'x-ably-version': version });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ successCount: 1, failureCount: 0, results: [{ channel: FIXTURES, presence: expect.any(Array) }] });
    }
  });

  it('protocol version 2: the spec\'s array of per-channel results', async () => {
    const res = await get(`/presence?channels=${encodeURIComponent(FIXTURES)}`, { 'x-ably-version': '2' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject([{ channel: FIXTURES, presence: expect.any(Array) }]);
  });
});
