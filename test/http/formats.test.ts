import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '@msgpack/msgpack';
import { startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

const get = (url: string, headers: Record<string, string> = {}) =>
  t.service.app.inject({ method: 'GET', url, headers: { authorization: t.auth, ...headers } });

describe('GET /time (spec: Get the service time)', () => {
  it('answers [ms since epoch] in JSON with no authentication', async () => {
    const res = await t.service.app.inject({ url: '/time' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    const [time] = res.json();
    expect(Math.abs(time - Date.now())).toBeLessThan(5000);
  });

  it('answers in MessagePack and HTML', async () => {
    const packed = await t.service.app.inject({ url: '/time', headers: { accept: 'application/x-msgpack' } });
    expect(packed.headers['content-type']).toBe('application/x-msgpack');
    expect((decode(packed.rawPayload) as number[])[0]).toBeGreaterThan(1e12);
    const html = await t.service.app.inject({ url: '/time?format=html' });
    expect(html.headers['content-type']).toMatch(/^text\/html/);
    expect(html.body).toMatch(/<!doctype html>/);
  });
});

describe('formats (spec: Common behaviour)', () => {
  it('the format parameter selects msgpack; Accept wins over it', async () => {
    expect((await get('/time?format=msgpack')).headers['content-type']).toBe('application/x-msgpack');
    expect((await get('/time?format=msgpack', { accept: 'application/json' })).headers['content-type']).toBe('application/json');
  });

  it('JSONP wraps the body in the callback', async () => {
    const res = await get('/time?format=jsonp&callback=handle');
    expect(res.headers['content-type']).toBe('application/javascript');
    expect(res.body).toMatch(/^handle\(\[\d+\]\);$/);
  });

  it('refuses a JSONP callback that is not an identifier', async () => {
    const res = await get('/time?format=jsonp&callback=alert(1)');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40003);
  });

  it('HTML shows history as a table a person can read', async () => {
    const channel = uniqueChannel();
    await t.service.app.inject({
      method: 'POST',
      url: `/channels/${channel}/messages`,
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      payload: { name: '<script>', data: 'x' },
    });
    const res = await get(`/channels/${channel}/messages`, { accept: 'text/html' });
    expect(res.body).toContain('<table>');
    expect(res.body).toContain('&lt;script&gt;');
    expect(res.body).not.toContain('<script>');
  });

  it('an HTML page (on the console\'s origin) runs no script whatever it shows: a Content-Security-Policy of its inline style only, and nosniff; errors too', async () => {
    const channel = uniqueChannel();
    for (const res of [await get(`/channels/${channel}/messages?format=html`), await get(`/channels/${channel}/messages?format=html&limit=5000`)]) {
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.headers['content-security-policy']).toBe("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
    expect((await get(`/channels/${channel}/messages`)).headers['content-security-policy']).toBeUndefined();
  });
});

describe('envelope (spec: Envelope response; README: Envelope)', () => {
  it('envelope=json answers 200 with statusCode, response, headers and rel: headers.link is the Link header', async () => {
    const channel = uniqueChannel();
    for (const name of ['one', 'two']) {
      await t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { name },
      });
    }
    const res = await get(`/channels/${channel}/messages?envelope=json&limit=1`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ statusCode: 200, response: [{ name: 'two' }], rel: { first: expect.stringMatching(/^\.\/messages\?/) } });
    expect(body.headers).toEqual({ link: res.headers.link });
    expect(body.headers.link).toContain('rel="next"');
  });

  it('an error in an envelope is still status 200, with the real status inside and the error headers in headers', async () => {
    const res = await get(`/channels/${uniqueChannel()}/messages?envelope=json&limit=5000`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ statusCode: 400, response: { error: { code: 40003, statusCode: 400, href: '/errors#error-40003' } } });
    expect(body.headers).toEqual({
      'x-service-errorcode': '40003',
      'x-service-errormessage': body.response.error.message,
      'x-ably-errorcode': '40003',
      'x-ably-errormessage': body.response.error.message,
    });
    expect(body).not.toHaveProperty('rel');
  });

  it('every route: a 401 carries WWW-Authenticate, a method not served Allow, an unknown route and an unpaged success their own headers only', async () => {
    const unauthenticated = await t.service.app.inject({ url: `/channels/${uniqueChannel()}/messages?envelope=json&format=jsonp&callback=cb` });
    expect(unauthenticated.statusCode).toBe(200);
    const wrapped = JSON.parse(/^cb\((.*)\);$/s.exec(unauthenticated.body)![1]);
    expect(wrapped).toMatchObject({ statusCode: 401, response: { error: { code: 40106 } }, headers: { 'www-authenticate': expect.any(String), 'x-ably-errorcode': '40106' } });
    const notAllowed = (await t.service.app.inject({ method: 'DELETE', url: '/time?envelope=json' })).json();
    expect(notAllowed).toMatchObject({ statusCode: 404, headers: { allow: expect.stringContaining('GET'), 'x-service-errorcode': String(notAllowed.response.error.code) } });
    const unknown = (await t.service.app.inject({ url: '/no/such/route?envelope=json' })).json();
    expect(unknown).toMatchObject({ statusCode: 404, headers: { 'x-service-errorcode': '40400' } });
    const time = (await t.service.app.inject({ url: '/time?envelope=json' })).json();
    expect(time).toEqual({ statusCode: 200, response: [expect.any(Number)], headers: {} });
    const packed = decode((await get(`/channels/${uniqueChannel()}/messages?envelope=msgpack`, { accept: 'application/x-msgpack' })).rawPayload);
    expect(packed).toMatchObject({ statusCode: 200, response: [], headers: { link: expect.stringContaining('rel="first"') } });
  });

  it('a reply without a body is enveloped too: a publish answers 200 with statusCode 201 (spec: Envelope response 2, the status is always 200)', async () => {
    const channel = uniqueChannel();
    const publish = (query: string) =>
      t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages?${query}`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { name: 'enveloped' },
      });
    const json = await publish('envelope=json');
    expect([json.statusCode, json.headers['content-type']]).toEqual([200, 'application/json']);
    expect(json.json()).toEqual({ statusCode: 201, headers: {} });
    const jsonp = await publish('envelope=json&format=jsonp&callback=got');
    expect([jsonp.statusCode, jsonp.body]).toEqual([200, 'got({"statusCode":201,"headers":{}});']);
    const packed = await publish('envelope=msgpack&format=msgpack');
    expect(packed.statusCode).toBe(200);
    expect(decode(packed.rawPayload)).toEqual({ statusCode: 201, headers: {} });
    // Without an envelope, the spec's 201 and no body, as before.
    const bare = await publish('');
    expect([bare.statusCode, bare.body]).toEqual([201, '']);
    expect((await get(`/channels/${channel}/messages`)).json()).toHaveLength(4);
  });

  it('a JSON envelope is refused with MessagePack', async () => {
    const res = await get('/time?envelope=json&format=msgpack');
    expect(res.statusCode).toBe(400);
  });
});

describe('versions (spec: Versioning)', () => {
  it('accepts X-Service-Version, X-Ably-Version and the v parameter', async () => {
    expect((await get('/time', { 'x-service-version': '0.8' })).statusCode).toBe(200);
    expect((await get('/time', { 'x-ably-version': '6' })).statusCode).toBe(200);
    expect((await get('/time?v=1.2')).statusCode).toBe(200);
  });

  it('a v parameter given twice is refused, not read as no version (the default 0.8 shapes)', async () => {
    const channel = uniqueChannel();
    const batch = (query: string) =>
      t.service.app.inject({
        method: 'POST',
        url: `/messages?${query}`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: { channels: [channel], messages: { name: 'x' } },
      });
    // The version stated once gets its shape: a BatchResult from version 3.
    expect((await batch('v=6')).json()).toMatchObject({ successCount: 1, failureCount: 0 });
    const twice = await batch('v=6&v=6');
    expect([twice.statusCode, twice.json().error.code, twice.headers['x-ably-errorcode']]).toEqual([400, 40003, '40003']);
    expect((await get('/time?v=0.8&v=6')).statusCode).toBe(400);
    expect((await get(`/channels/${channel}/messages`)).json()).toHaveLength(1);
  });

  it('an unknown version gets a clear error', async () => {
    const res = await get('/time', { 'x-service-version': '42' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 40017, message: expect.stringContaining('not supported') });
  });
});

describe('routes', () => {
  it('a known path with a method it does not serve gets 404 (40400) in the error format, as the platform answers', async () => {
    const res = await t.service.app.inject({ method: 'DELETE', url: '/time' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toMatchObject({ code: 40400, statusCode: 404, message: expect.stringContaining('GET') });
    expect(res.headers['x-service-errorcode']).toBe('40400');
    expect(res.headers['x-ably-errorcode']).toBe('40400');
    const put = await t.service.app.inject({ method: 'PUT', url: '/channels/x/messages', headers: { authorization: t.auth } });
    expect(put.statusCode).toBe(404);
    expect(put.json().error.code).toBe(40400);
    const msgpack = await t.service.app.inject({ method: 'GET', url: '/messages', headers: { accept: 'application/x-msgpack' } });
    expect(msgpack.statusCode).toBe(404);
    expect(msgpack.headers['content-type']).toContain('application/x-msgpack');
  });

  it('an unknown route gets 404 (40400), even without credentials', async () => {
    const res = await t.service.app.inject({ url: '/no/such/route' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe(40400);
    expect(res.headers['x-service-errorcode']).toBe('40400');
    // In the format asked for; a bad format or version parameter is refused as on every route.
    const msgpack = await t.service.app.inject({ url: '/no/such/route?format=msgpack' });
    expect([msgpack.statusCode, msgpack.headers['content-type']]).toEqual([404, 'application/x-msgpack']);
    const badVersion = await t.service.app.inject({ url: '/no/such/route?v=9.9' });
    expect([badVersion.statusCode, badVersion.json().error.code]).toEqual([400, 40017]);
    const badEnvelope = await t.service.app.inject({ url: '/no/such/route?envelope=bad' });
    expect([badEnvelope.statusCode, badEnvelope.json().error.code]).toEqual([400, 40003]);
  });

  it('channel names with encoded slashes and unicode reach the route whole', async () => {
    const channel = 'a/b ü';
    const url = `/channels/${encodeURIComponent(channel)}/messages`;
    const post = await t.service.app.inject({
      method: 'POST',
      url,
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      payload: { data: 'slash' },
    });
    expect(post.statusCode).toBe(201);
    expect((await get(url)).json()).toMatchObject([{ data: 'slash' }]);
  });
});

describe('the html format, a page too large for it', () => {
  it('is refused with 40003 in the error format, as an html page, without the Link headers of the page it refused', async () => {
    const channel = uniqueChannel();
    const data = '"'.repeat(60_000);
    for (let i = 0; i < 10; i++) {
      const res = await t.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: t.auth, 'content-type': 'application/json' },
        payload: JSON.stringify(Array.from({ length: 7 }, () => ({ data }))),
      });
      expect(res.statusCode).toBe(201);
    }
    const refused = await get(`/channels/${channel}/messages?format=html&limit=100`);
    expect(refused.statusCode).toBe(400);
    expect(refused.headers['x-service-errorcode']).toBe('40003');
    expect(refused.headers['content-type']).toMatch(/^text\/html/);
    expect(refused.headers.link).toBeUndefined();
    expect(refused.body).toContain('html format shows at most');
    // The same page in JSON, and a smaller one in html, are answered.
    expect((await get(`/channels/${channel}/messages?limit=100`)).statusCode).toBe(200);
    expect((await get(`/channels/${channel}/messages?format=html&limit=2`)).statusCode).toBe(200);
  });
});
