// The dashboard's routes without a browser (README: Dashboard; the browser test is
// test/browser/dashboard.test.ts): the page with its Content-Security-Policy, its assets under
// content-hashed names with a year's cache, uPlot exactly as its npm package ships it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { PAGE_CSP } from '../../src/routes/static-page.js';

let t: TestService;
const get = (url: string) => t.service.app.inject({ url });

beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

describe('GET /dashboard (README: Dashboard)', () => {
  it('answers the page without credentials, with a Content-Security-Policy that allows no inline code', async () => {
    const res = await get('/dashboard');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.headers['content-security-policy']).toBe(PAGE_CSP);
    expect(PAGE_CSP).toContain("script-src 'self'");
    expect(PAGE_CSP).not.toContain('unsafe-inline');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.body).not.toMatch(/<script(?![^>]*\ssrc=)|\sstyle=|<style|\son[a-z]+=/i);
    expect(res.body).not.toMatch(/https?:\/\//); // nothing from another origin (no CDN)
    expect(res.body).not.toContain('{{');
  });

  it('serves uPlot from its npm package and the page assets by content hash, cached for a year', async () => {
    const html = (await get('/dashboard')).body;
    const urls = [...html.matchAll(/(?:src|href)="(\/dashboard\/assets\/[^"]+)"/g)].map((m) => m[1]);
    expect(urls).toHaveLength(8);
    const pkg = dirname(createRequire(import.meta.url).resolve('uplot/package.json'));
    const uplotUrl = urls.find((u) => /\/uplot\.[0-9a-f]{12}\.js$/.test(u))!;
    for (const url of urls) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-type']).toMatch(url.endsWith('.css') ? /^text\/css/ : /^application\/javascript/);
    }
    expect((await get(uplotUrl)).rawPayload.equals(readFileSync(join(pkg, 'dist/uPlot.iife.min.js')))).toBe(true);
  });

  it('answers an unknown asset with 404 in the spec error format, and other methods with 404 40400 (as every known path does)', async () => {
    const missing = await get('/dashboard/assets/uplot.000000000000.js');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error).toMatchObject({ code: 40400, statusCode: 404 });
    expect(missing.headers['x-service-errorcode']).toBe('40400');
    const post = await t.service.app.inject({ method: 'POST', url: '/dashboard' });
    expect(post.statusCode).toBe(404);
    expect(post.json().error.code).toBe(40400);
  });
});
