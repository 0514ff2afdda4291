// The console's routes without a browser (README: Console; the browser test is
// test/browser/console.test.ts): the page with its Content-Security-Policy, nothing from another
// origin, its assets under content-hashed names with a year's cache, the SDK's browser build
// exactly as the ably package ships it (licence header included).
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { ablyBrowserBuild } from '../../src/routes/console.js';
import { PAGE_CSP } from '../../src/routes/static-page.js';

let t: TestService;
const get = (url: string) => t.service.app.inject({ url });

beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

describe('GET /console (README: Console)', () => {
  it('answers the page without credentials, with a Content-Security-Policy that allows no inline code and no other origin', async () => {
    const res = await get('/console');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(PAGE_CSP);
    expect(PAGE_CSP).toContain("script-src 'self'");
    expect(PAGE_CSP).toContain("connect-src 'self'");
    expect(PAGE_CSP).not.toMatch(/unsafe-|https?:|\*/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.body).not.toMatch(/<script(?![^>]*\ssrc=)|\sstyle=|<style|\son[a-z]+=/i);
    expect(res.body).not.toMatch(/(?:src|href)="(?!\/|#|data:)/); // every asset and link on this origin (no CDN)
    expect(res.body).not.toContain('{{');
  });

  it("serves the SDK's browser build from the ably package and the page's own files by content hash, cached for a year", async () => {
    const html = (await get('/console')).body;
    const urls = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(urls).toHaveLength(7);
    for (const url of urls) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-type']).toMatch(url.endsWith('.css') ? /^text\/css/ : /^application\/javascript/);
    }
    const ably = ablyBrowserBuild();
    expect(ably.file).toMatch(/ably\/build\/ably\.min\.js$/);
    const sdkUrl = urls.find((u) => /\/ably\.[0-9a-f]{12}\.js$/.test(u))!;
    const sdk = (await get(sdkUrl)).rawPayload;
    expect(sdk.equals(readFileSync(ably.file))).toBe(true);
    expect(sdk.subarray(0, 300).toString()).toMatch(/@license[\s\S]*Apache Licence v2\.0/);
    expect(html).toContain(`ably SDK ${ably.version}`);
  });

  it('answers an unknown asset with 404 in the spec error format, and other methods with 404 40400', async () => {
    const missing = await get('/console/assets/ably.000000000000.js');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toMatchObject({ code: 40400, statusCode: 404 });
    const post = await t.service.app.inject({ method: 'POST', url: '/console' });
    expect(post.statusCode).toBe(404);
    expect(post.json().error.code).toBe(40400);
  });

  it('is linked from GET /', async () => {
    expect((await get('/')).json().links.console).toBe('/console');
  });
});
