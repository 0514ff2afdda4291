import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import * as Ably from 'ably';
import { basic, listening, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { allPages, WIRE_FORMATS } from '../helpers/sdk.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

/** The service listening, once for the file's SDK clients. */
let listeningOnce: Promise<number> | undefined;
const listeningPort = (): Promise<number> => (listeningOnce ??= listening(t));

const get = (url: string) => t.service.app.inject({ method: 'GET', url, headers: { authorization: t.auth } });

/** The Link header's relations, each an URL resolved against the query's own (spec: Pagination 2 and 4). */
function links(header: string | string[] | undefined, base: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of String(header ?? '').split(/,\s*(?=<)/)) {
    const m = /^<([^>]*)>;\s*rel="(\w+)"$/.exec(part.trim());
    if (m) {
      const url = new URL(m[1], `http://service${base}`);
      out[m[2]] = url.pathname + url.search;
    }
  }
  return out;
}

describe('Link relations keep the response-control parameters (spec: Pagination 3, Control of response content)', () => {
  it('history: current is the present page and next the following one, both still shaped by fields', async () => {
    const channel = uniqueChannel();
    for (const name of ['one', 'two', 'three']) {
      const res = await t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { name, data: 'x' },
      });
      expect(res.statusCode).toBe(201);
    }
    const url = `/channels/${channel}/messages?limit=1&fields=name`;
    const first = await get(url);
    expect(first.json()).toEqual([{ name: 'three' }]);
    const rel = links(first.headers.link, url);
    expect(Object.keys(rel).sort()).toEqual(['current', 'first', 'next']);
    expect((await get(rel.current)).json()).toEqual([{ name: 'three' }]);
    expect((await get(rel.first)).json()).toEqual([{ name: 'three' }]);
    expect((await get(rel.next)).json()).toEqual([{ name: 'two' }]);
  });

  it('history with flatten and select: the next page is flattened and selected as the first was', async () => {
    const channel = uniqueChannel();
    for (const data of [{ a: 1 }, { a: 2 }]) {
      await t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { data },
      });
    }
    const flat = `/channels/${channel}/messages?limit=1&flatten=true`;
    const page = await get(flat);
    expect(page.json()).toHaveProperty(['0.data.a'], 2);
    expect((await get(links(page.headers.link, flat).next)).json()).toHaveProperty(['0.data.a'], 1);
    const selected = `/channels/${channel}/messages?limit=1&select=*.data.a`;
    const selPage = await get(selected);
    expect(selPage.json()).toEqual({ '0.data.a': 2 });
    expect((await get(links(selPage.headers.link, selected).next)).json()).toEqual({ '0.data.a': 1 });
  });

  it('channel enumeration: next keeps fields', async () => {
    const prefix = uniqueChannel();
    for (const c of ['a', 'b']) {
      await t.service.app.inject({
        method: 'POST',
        url: `/channels/${prefix}-${c}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { data: 'x' },
      });
    }
    const url = `/channels?prefix=${prefix}&limit=1&fields=channelId`;
    const page = await get(url);
    expect(page.statusCode).toBe(200);
    expect(page.json()).toEqual([{ channelId: expect.stringContaining(prefix) }]);
    const next = await get(links(page.headers.link, url).next);
    expect(next.json()).toEqual([{ channelId: expect.stringContaining(prefix) }]);
  });
});

describe('the SDK follows every relation (spec: Pagination 2 to 5; ably-js v2 reads a link as ./<resource>?<params>)', () => {
  let port: number;
  beforeAll(async () => {
    port = await listeningPort();
  });
  it('channel enumeration without parameters: first and current are links the SDK can follow', async () => {
    const rest = new Ably.Rest({ key: t.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false, logLevel: 0 });
    const channel = uniqueChannel();
    await rest.channels.get(channel).publish('x', 'y');
    const page = await rest.request('get', '/channels', 6, {}, null);
    expect(page.statusCode).toBe(200);
    for (const rel of ['first', 'current'] as const) {
      const again = (await page[rel]()) as Ably.HttpPaginatedResponse;
      expect(again.statusCode, rel).toBe(200);
      expect(again.items, rel).toEqual(page.items);
    }
  });

  it('history with fields: the SDK\'s next page is shaped as its first', async () => {
    const rest = new Ably.Rest({ key: t.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: true, logLevel: 0 });
    const channel = uniqueChannel();
    await rest.channels.get(channel).publish([{ name: 'one' }, { name: 'two' }]);
    const page = await rest.request('get', `/channels/${channel}/messages`, 6, { limit: 1, fields: 'name' }, null);
    expect(page.items).toEqual([{ name: 'two' }]);
    expect(page.hasNext()).toBe(true);
    expect((await page.next())!.items).toEqual([{ name: 'one' }]);
  });
});

describe('an SDK that cannot read Link headers pages through the envelope (spec: Envelope response; ably-js in a browser: supportsLinkHeaders false)', () => {
  let port: number;
  beforeAll(async () => {
    port = await listeningPort();
  });

  /** A client on the browser build's path: every query in an envelope, its links read from the envelope's headers. */
  const browserLike = (useBinaryProtocol: boolean): Ably.Rest => {
    const rest = new Ably.Rest({ key: t.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
    (rest as unknown as { http: { platformHttp: { supportsLinkHeaders: boolean } } }).http.platformHttp.supportsLinkHeaders = false;
    return rest;
  };

  for (const { format, useBinaryProtocol } of WIRE_FORMATS) {
    it(`${format}: history, presence history and channel enumeration page to the end with next`, async () => {
      const rest = browserLike(useBinaryProtocol);
      const channel = uniqueChannel('envelope');
      await rest.channels.get(channel).publish(['one', 'two', 'three'].map((name) => ({ name })));
      const history = await allPages(await rest.channels.get(channel).history({ limit: 1 }));
      expect(history.items.map((m) => m.name)).toEqual(['three', 'two', 'one']);
      expect(history.pages).toBe(3);
      const p = t.service.presenceProducer;
      const appId = t.key.split('.')[0];
      await p.append(appId, channel, ['a', 'b'].map((clientId) => ({ action: 'enter' as const, clientId, connectionId: 'c1' })));
      const presence = await allPages(await rest.channels.get(channel).presence.history({ limit: 1, direction: 'forwards' }));
      expect(presence.items.map((m) => m.clientId)).toEqual(['a', 'b']);
      const enumerated = await rest.request('get', '/channels', 6, { limit: 1, prefix: channel }, null);
      expect(enumerated.items).toHaveLength(1);
      expect((await enumerated.current()).items).toEqual(enumerated.items);
      expect((await enumerated.first()).items).toEqual(enumerated.items);
    });
  }
});

describe('Link URLs carry the query credentials a request authenticated with (spec: Pagination 4 and 5, Authentication; README: Pagination)', () => {
  const setup = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;
  const PRESENCE = 'persisted:presence_fixtures';
  let key: string;
  let token: string;
  let channel: string;
  beforeAll(async () => {
    key = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: setup })).json().keys[0].keyStr;
    const keyAuth = basic(key);
    channel = uniqueChannel('qauth');
    for (const name of ['one', 'two', 'three']) {
      const res = await t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: keyAuth, 'content-type': 'application/json' },
        payload: { name },
      });
      expect(res.statusCode).toBe(201);
    }
    const stats = await t.service.app.inject({
      method: 'POST',
      url: '/stats',
      headers: { authorization: keyAuth, 'content-type': 'application/json' },
      payload: ['2031-02-01:10:00', '2031-02-01:10:01', '2031-02-01:10:02'].map((intervalId) => ({ intervalId, channels: { peak: 1 } })),
    });
    expect(stats.statusCode).toBe(201);
    const keyName = key.split(':')[0];
    const issued = await t.service.app.inject({
      method: 'POST',
      url: `/keys/${keyName}/requestToken`,
      headers: { authorization: keyAuth, 'content-type': 'application/json' },
      payload: { keyName, timestamp: Date.now() },
    });
    expect(issued.statusCode, issued.body).toBe(200);
    token = issued.json().token;
  });

  /** Every paginated route, each asked for one record a page so that it has a next page. */
  const routes = (): [string, string][] => [
    ['history', `/channels/${channel}/messages?limit=1`],
    ['presence', `/channels/${encodeURIComponent(PRESENCE)}/presence?limit=1`],
    ['presence history', `/channels/${encodeURIComponent(PRESENCE)}/presence/history?limit=1`],
    ['stats', '/stats?unit=minute&start=2031-02-01:10:00&end=2031-02-01:10:59&limit=1'],
    ['channel enumeration', '/channels?limit=1'],
  ];
  const noHeaders = (url: string) => t.service.app.inject({ method: 'GET', url });

  for (const credential of ['key', 'access_token'] as const) {
    it(`?${credential}=: every relation of every paginated route is followed with no other credentials (not 40106)`, async () => {
      const value = credential === 'key' ? key : token;
      for (const [what, route] of routes()) {
        const url = `${route}&${credential}=${encodeURIComponent(value)}`;
        const page = await noHeaders(url);
        expect(page.statusCode, `${what}: ${page.body}`).toBe(200);
        const rel = links(page.headers.link, url);
        expect(Object.keys(rel).sort(), what).toEqual(['current', 'first', 'next']);
        for (const [name, link] of Object.entries(rel)) {
          expect(new URL(link, 'http://service').searchParams.get(credential), `${what} ${name}`).toBe(value);
          const followed = await noHeaders(link);
          expect(followed.statusCode, `${what} ${name}: ${followed.body}`).toBe(200);
          expect(followed.json(), `${what} ${name}`).toHaveLength(1);
        }
        expect((await noHeaders(rel.next)).json(), what).not.toEqual(page.json());
        expect((await noHeaders(rel.current)).json(), what).toEqual(page.json());
      }
    });
  }

  it('a header-authenticated request gets links without credentials, even with a key or access_token in its query (unused: the header wins)', async () => {
    for (const [what, route] of routes()) {
      const url = `${route}&key=${encodeURIComponent(key)}&access_token=${encodeURIComponent(token)}`;
      const page = await t.service.app.inject({ method: 'GET', url, headers: { authorization: basic(key) } });
      expect(page.statusCode, what).toBe(200);
      const header = String(page.headers.link);
      expect(header, what).toContain('rel="next"');
      for (const secret of [key, token, encodeURIComponent(key), encodeURIComponent(token), key.split(':')[1]]) expect(header, what).not.toContain(secret);
      expect(header, what).not.toMatch(/[?&](key|access_token)=/);
    }
  });

  it('in an envelope, rel and headers.link carry it as the Link header does', async () => {
    const url = `${routes()[0][1]}&envelope=json&key=${encodeURIComponent(key)}`;
    const res = await noHeaders(url);
    const body = res.json();
    expect(body.headers.link).toBe(res.headers.link);
    const next = new URL(body.rel.next, `http://service${url}`);
    expect((await noHeaders(next.pathname + next.search)).json()).toMatchObject({ statusCode: 200, response: [{ name: 'two' }] });
  });
});
