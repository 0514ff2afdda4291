import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { errorTableMarkdown } from '../../src/error-list.js';
import { ready, startTestService, type TestService } from '../helpers/service.js';

// GET / and GET /errors (issue 24 item 5): the service's address says what it is and where to
// go; every error's href points at this service's own explanation of its code.

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

const get = (url: string, headers: Record<string, string> = {}) => t.service.app.inject({ method: 'GET', url, headers });

describe('GET /', () => {
  it('answers without credentials with what the service is and links to the dashboard, errors, health, readiness and metrics', async () => {
    const res = await get('/');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ service: 'channel-messaging', version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    expect(body.links).toMatchObject({ dashboard: '/dashboard', errors: '/errors', health: '/health', ready: '/ready', metrics: '/metrics', time: '/time' });
    // A production instance is not ready until its consumers read the log (some 3 s after its start: README, Health).
    await ready(t);
    for (const link of Object.values(body.links as Record<string, string>)) expect((await get(link)).statusCode, link).toBe(200);
  });

  it('a browser (Accept: text/html) gets a page', async () => {
    const res = await get('/', { accept: 'text/html' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.body).toContain('/dashboard');
  });

  it('another method on / is 404 with an Allow header, as elsewhere', async () => {
    const res = await t.service.app.inject({ method: 'POST', url: '/', headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(res.statusCode).toBe(404);
    expect(res.headers.allow).toBe('GET');
  });
});

describe('GET /errors and the errors’ href', () => {
  it('lists every code the service answers with, each with its statuses, a title and what to do', async () => {
    const list = (await get('/errors')).json() as { code: number; statusCodes: number[]; title: string; what: string }[];
    const codes = new Set(Object.values(ErrorCodes).map((e) => e.code));
    expect(list.map((e) => e.code).sort()).toEqual([...codes].sort());
    for (const e of list) {
      expect(e.title.length, String(e.code)).toBeGreaterThan(3);
      expect(e.what.length, String(e.code)).toBeGreaterThan(10);
      for (const [, c] of Object.entries(ErrorCodes)) if (c.code === e.code) expect(e.statusCodes).toContain(c.statusCode);
    }
  });

  it("an error's href points at its entry on this service, and the page has that anchor", async () => {
    const refused = await get('/channels/x/messages');
    expect(refused.statusCode).toBe(401);
    const { error } = refused.json() as { error: { code: number; href: string } };
    expect(error.href).toBe(`/errors#error-${error.code}`);
    const page = await get(error.href.split('#')[0], { accept: 'text/html' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(`id="error-${error.code}"`);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
  });

  it("the README's error table is the one generated from src/error-list.ts", () => {
    const readme = readFileSync(resolve(import.meta.dirname, '../../README.md'), 'utf8');
    const shown = /<!-- errors:start -->\n([\s\S]*?)<!-- errors:end -->/.exec(readme)?.[1];
    expect(shown, `paste this between the errors markers of README.md:\n${errorTableMarkdown()}\n`).toBe(`${errorTableMarkdown()}\n`);
  });
});
