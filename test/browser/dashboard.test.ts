// The stats dashboard (/dashboard) in a real browser: Debian's chromium driven by playwright-core,
// against a listening service with known traffic (sandbox POST /stats fixtures over two hours, and
// real publishes, token and refused requests in one minute of them). The page's totals must equal
// that traffic, at every page size and unit; errors show the service's message; an empty range
// says so. A screenshot goes to test/output/dashboard.png (ignored by git). Against live traffic:
// dashboard-live.test.ts. Without chromium the suite warns loudly and skips; with
// REQUIRE_INFRA=1 it fails instead.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { basic, startTestService, type TestService } from '../helpers/service.js';
import { PAGE_CSP } from '../../src/routes/static-page.js';
import { CHROMIUM, describeInChromium, OUTPUT } from './chromium.js';

// A fixed clock: the traffic is at 2030-01-15 10:00-11:59 UTC; the service's own requests (POST
// /apps, the fixtures) a day before, and the page's requests two hours after, outside the range.
const T0 = Date.UTC(2030, 0, 15, 10, 0, 0);
let now = T0 - 86_400_000;
const clock = { now: () => now };

/** One fixture per minute i of the two hours, except every third minute (gaps the chart fills). */
const MINUTES = Array.from({ length: 120 }, (_, i) => i).filter((i) => i % 3 !== 2);
const fixture = (i: number) => ({
  intervalId: `2030-01-15:${10 + Math.floor(i / 60)}:${String(i % 60).padStart(2, '0')}`,
  inbound: { rest: { messages: { count: i + 1, data: 10 * (i + 1) } }, realtime: { messages: { count: 2, data: 7 }, presence: { count: i % 2, data: 0 } } },
  outbound: { realtime: { messages: { count: i % 4, data: 3 * (i % 4) } } },
  persisted: { messages: { count: i % 2, data: 5 * (i % 2) } },
  apiRequests: { succeeded: 3, refused: i % 5 === 0 ? 1 : 0, failed: i % 7 === 0 ? 1 : 0 },
  tokenRequests: { succeeded: i % 10 === 0 ? 1 : 0, refused: i % 20 === 0 ? 1 : 0 },
  channels: { peak: 1 + (i % 6), opened: i % 3 === 0 ? 1 : 0 },
  connections: { all: { peak: i % 9, opened: i % 4 === 0 ? 2 : 0 } },
});
/** The real traffic's minute (11:02, which has no fixture). */
const LIVE_MINUTE = 62;

const total = (f: (i: number) => number): number => MINUTES.reduce((n, i) => n + f(i), 0);
/**
 * What the range holds, by stats field, from the fixtures above and the live minute: 2 plain
 * messages (8 bytes) and 1 persisted one (5 bytes, counted twice), 2 channels, 3 succeeded
 * requests (2 publishes and a token request), 1 refused (a publish without the right), 1 failed.
 */
function expectedTotals(): Record<string, number> {
  const inboundCount = total((i) => i + 1 + 2 + (i % 2)) + 3;
  const inboundData = total((i) => 10 * (i + 1) + 7) + 13;
  const outboundCount = total((i) => i % 4);
  const outboundData = total((i) => 3 * (i % 4));
  const persistedCount = total((i) => i % 2) + 1;
  const persistedData = total((i) => 5 * (i % 2)) + 5;
  return {
    'messages.all.all.count': inboundCount + outboundCount + persistedCount,
    'messages.inbound.all.all.count': inboundCount,
    'messages.outbound.all.all.count': outboundCount,
    'messages.persisted.all.count': persistedCount,
    'messages.all.all.data': inboundData + outboundData + persistedData,
    'messages.inbound.all.all.data': inboundData,
    'messages.outbound.all.all.data': outboundData,
    'messages.persisted.all.data': persistedData,
    'derived.stored.count': persistedCount,
    'derived.historyReads.count': 0,
    'derived.stored.data': persistedData,
    'derived.historyReads.data': 0,
    'messages.inbound.all.presence.count': total((i) => i % 2),
    'messages.outbound.all.presence.count': 0,
    'messages.persisted.presence.count': 0,
    'apiRequests.all.succeeded': total(() => 3) + 3,
    'apiRequests.all.refused': total((i) => (i % 5 === 0 ? 1 : 0)) + 1,
    'apiRequests.all.failed': total((i) => (i % 7 === 0 ? 1 : 0)) + 1,
    'apiRequests.tokenRequests.succeeded': total((i) => (i % 10 === 0 ? 1 : 0)) + 1,
    'apiRequests.tokenRequests.refused': total((i) => (i % 20 === 0 ? 1 : 0)),
    'apiRequests.tokenRequests.failed': 0,
    'channels.peak': Math.max(2, ...MINUTES.map((i) => 1 + (i % 6))),
    'channels.opened': total((i) => (i % 3 === 0 ? 1 : 0)) + 2,
    'connections.all.peak': Math.max(...MINUTES.map((i) => i % 9)),
    'connections.all.opened': total((i) => (i % 4 === 0 ? 2 : 0)),
  };
}

describeInChromium('dashboard in a browser (README: Dashboard)', () => {
  let t: TestService;
  let base: string;
  let browser: Browser;
  let page: Page;
  let key: string;
  let subscribeOnlyKey: string;
  const problems: string[] = [];

  beforeAll(async () => {
    t = await startTestService({}, { clock });
    await t.service.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.service.app.server.address();
    if (!address || typeof address === 'string') throw new Error('the service is not listening on a port');
    base = `http://127.0.0.1:${address.port}`;
    const inject = t.service.app.inject.bind(t.service.app);

    // A fresh app, so its stats hold exactly this file's traffic.
    const created = await inject({
      method: 'POST',
      url: '/apps',
      payload: { keys: [{}, { capability: '{"*":["subscribe"]}' }], namespaces: [{ id: 'persisted', persisted: true }] },
    });
    expect(created.statusCode).toBe(201);
    key = created.json().keys[0].keyStr;
    subscribeOnlyKey = created.json().keys[1].keyStr;
    const auth = basic(key);
    const fixtures = await inject({ method: 'POST', url: '/stats', headers: { authorization: auth }, payload: MINUTES.map(fixture) });
    expect(fixtures.statusCode).toBe(201);

    // The live minute: publishes, a token request, a refused publish, a failed read.
    now = T0 + LIVE_MINUTE * 60_000 + 1000;
    const json = { authorization: auth, 'content-type': 'application/json' };
    expect((await inject({ method: 'POST', url: '/channels/plain/messages', headers: json, payload: [{ data: 'abcde' }, { data: 'xyz' }] })).statusCode).toBe(201);
    expect((await inject({ method: 'POST', url: '/channels/persisted%3Ap/messages', headers: json, payload: { data: 'hello' } })).statusCode).toBe(201);
    const keyName = key.slice(0, key.indexOf(':'));
    expect((await inject({ method: 'POST', url: `/keys/${keyName}/requestToken`, headers: json, payload: { keyName, timestamp: now } })).statusCode).toBe(200);
    const refused = await inject({
      method: 'POST',
      url: '/channels/plain/messages',
      headers: { authorization: basic(subscribeOnlyKey), 'content-type': 'application/json' },
      payload: { data: 'no' },
    });
    expect(refused.statusCode).toBe(401);
    expect((await inject({ url: '/channels/plain/messages?limit=99999', headers: { authorization: auth } })).statusCode).toBe(400);
    now += 1000;
    await t.service.usage.flush();
    await new Promise((r) => setImmediate(r));
    await t.service.stats.flush();

    // The page's own requests come two hours later, outside the range it is asked for.
    now = T0 + 3 * 3600_000;
    browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('console', (m) => {
      // The browser logs every refused request ("Failed to load resource: ... 401"): expected here.
      if ((m.type() === 'error' && !m.text().startsWith('Failed to load resource')) || /Content.Security.Policy/i.test(m.text())) {
        problems.push(`console ${m.type()}: ${m.text()}`);
      }
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** Loads the page (page size `limit`), fills the form and waits for the result. */
  async function show(opts: { credential: string; kind?: 'key' | 'token'; start: string; end: string; unit: string; limit?: number; reload?: boolean }) {
    if (opts.reload !== false) {
      await page.goto(`${base}/dashboard${opts.limit ? `?limit=${opts.limit}` : ''}`);
      await page.waitForSelector('body[data-ready="true"]');
    }
    await page.selectOption('#auth-kind', opts.kind ?? 'key');
    await page.fill('#credential', opts.credential);
    await page.selectOption('#preset', 'custom');
    await page.fill('#start', opts.start);
    await page.fill('#end', opts.end);
    await page.selectOption('#unit', opts.unit);
    await page.click('#load');
    await page.waitForSelector('#status:is([data-state="done"], [data-state="empty"], [data-state="error"], [data-state="truncated"])');
    return page.getAttribute('#status', 'data-state');
  }

  /** The totals table, by stats field. */
  const shownTotals = (): Promise<Record<string, number>> =>
    page.$$eval('#totals td[data-field]', (cells) => Object.fromEntries(cells.map((c) => [(c as HTMLElement).dataset.field!, Number((c as HTMLElement).dataset.value)])));

  it('serves the page with a Content-Security-Policy and uPlot from the package, cached for a year', async () => {
    const res = await fetch(`${base}/dashboard`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe(PAGE_CSP);
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)/); // no inline script
    expect(html).not.toMatch(/\sstyle=|<style/); // no inline style
    const uplot = /\/dashboard\/assets\/uplot\.[0-9a-f]+\.js/.exec(html)?.[0];
    expect(uplot).toBeDefined();
    const asset = await fetch(`${base}${uplot}`);
    expect(asset.headers.get('cache-control')).toContain('max-age=31536000');
    expect(await asset.text()).toContain('uPlot');
  });

  it('charts GET /stats over every page of the range: the totals shown equal the traffic (minute, 7 per page)', async () => {
    const state = await show({ credential: key, start: '2030-01-15T10:00', end: '2030-01-15T11:59', unit: 'minute', limit: 7 });
    expect(state).toBe('done');
    const intervals = MINUTES.length + 1; // the fixtures' minutes and the live one
    expect(await page.getAttribute('#status', 'data-intervals')).toBe(String(intervals));
    expect(await page.getAttribute('#status', 'data-pages')).toBe(String(Math.ceil(intervals / 7)));
    expect(await shownTotals()).toEqual(expectedTotals());
    expect(await page.locator('#charts .chart canvas').count()).toBe(7);
    // The credentials were not stored (nothing in localStorage; sessionStorage only when asked).
    expect(await page.evaluate(() => [localStorage.length, sessionStorage.length])).toEqual([0, 0]);

    // The numbers on hover: the legend shows the minute under the cursor and its values.
    const chart = page.locator('#chart-messages .u-over');
    await chart.scrollIntoViewIfNeeded();
    // Before any hover, the legend shows the newest interval (11:59, no data: zeros), never "–".
    expect(await page.$$eval('#chart-messages .u-legend .u-series .u-value', (cells) => cells.map((c) => c.textContent))).toEqual([
      'newest 2030-01-15 11:59',
      ...Array(5).fill('0'),
    ]);
    const box = (await chart.boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.waitForFunction(() => /^\d{4}-/.test(document.querySelector('#chart-messages .u-legend .u-series .u-value')?.textContent ?? ''));
    const legend = await page.$$eval('#chart-messages .u-legend .u-series', (rows) =>
      rows.map((r) => [r.querySelector('.u-label')?.textContent ?? '', r.querySelector('.u-value')?.textContent ?? '']),
    );
    const hovered = legend[0][1]; // e.g. 2030-01-15 10:35
    const m = /^2030-01-15 (\d\d):(\d\d)$/.exec(hovered);
    expect(m, `legend time: ${hovered}`).not.toBeNull();
    const i = (Number(m![1]) - 10) * 60 + Number(m![2]);
    const inbound = MINUTES.includes(i) ? i + 1 + 2 + (i % 2) : i === LIVE_MINUTE ? 3 : 0;
    expect(Object.fromEntries(legend)['inbound']).toBe(String(inbound));

    mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, 'dashboard.png'), fullPage: true });
    expect(problems).toEqual([]);
  }, 120_000);

  it('gives the same totals per hour in one page, and with a token instead of the key', async () => {
    expect(await show({ credential: key, start: '2030-01-15T10:00', end: '2030-01-15T11:59', unit: 'hour' })).toBe('done');
    expect(await page.getAttribute('#status', 'data-intervals')).toBe('2');
    expect(await page.getAttribute('#status', 'data-pages')).toBe('1');
    expect(await shownTotals()).toEqual(expectedTotals());

    const keyName = key.slice(0, key.indexOf(':'));
    const issued = await t.service.app.inject({
      method: 'POST',
      url: `/keys/${keyName}/requestToken`,
      headers: { authorization: basic(key), 'content-type': 'application/json' },
      payload: { keyName, timestamp: now },
    });
    const token = issued.json().token as string;
    expect(await show({ credential: token, kind: 'token', start: '2030-01-15T10:00', end: '2030-01-15T11:59', unit: 'day', limit: 1 })).toBe('done');
    expect(await shownTotals()).toEqual(expectedTotals());
    expect(problems).toEqual([]);
  }, 120_000);

  it("a preset range ends at the service's time (GET /time), not the browser's", async () => {
    await page.goto(`${base}/dashboard`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#credential', key);
    await page.selectOption('#preset', '24h'); // last 24 hours, per hour
    await page.click('#load');
    await page.waitForSelector('#status[data-state="done"]');
    expect(await page.inputValue('#end')).toBe('2030-01-15T13:00'); // the service clock: T0 + 3 h
    expect(await page.inputValue('#start')).toBe('2030-01-14T13:00');
    expect(await page.inputValue('#unit')).toBe('hour');
    const totals = await shownTotals();
    const expected = expectedTotals();
    // The messages are all in the range; the API requests now include the page's own.
    for (const field of ['messages.all.all.count', 'messages.inbound.all.all.data', 'channels.opened']) expect(totals[field]).toBe(expected[field]);
    expect(problems).toEqual([]);
  }, 120_000);

  it("shows the service's error message (spec: Errors) for bad credentials and a missing capability", async () => {
    const bad = `${key.slice(0, key.indexOf(':'))}:wrong-secret`;
    const expected = (await t.service.app.inject({ url: '/stats', headers: { authorization: basic(bad) } })).json().error;
    expect(await show({ credential: bad, start: '2030-01-15T10:00', end: '2030-01-15T11:59', unit: 'minute' })).toBe('error');
    expect(await page.textContent('#error')).toBe(`${expected.message} (code ${expected.code}, status ${expected.statusCode})`);
    expect(await page.isVisible('#totals-section')).toBe(false);

    const denied = (await t.service.app.inject({ url: '/stats', headers: { authorization: basic(subscribeOnlyKey) } })).json().error;
    expect(denied.code).toBe(40160);
    expect(await show({ credential: subscribeOnlyKey, start: '2030-01-15T10:00', end: '2030-01-15T11:59', unit: 'minute', reload: false })).toBe('error');
    expect(await page.textContent('#error')).toBe(`${denied.message} (code 40160, status 401)`);
  }, 120_000);

  it('keeps the credential across a reload only when asked, in the tab (sessionStorage), never in localStorage', async () => {
    await page.goto(`${base}/dashboard`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#credential', key);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.inputValue('#credential')).toBe('');
    await page.fill('#credential', key);
    await page.check('#remember');
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.inputValue('#credential')).toBe(key);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await page.uncheck('#remember');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  }, 120_000);

  it('says so when the range has no stats, with zero totals', async () => {
    expect(await show({ credential: key, start: '2030-01-14T00:00', end: '2030-01-14T01:00', unit: 'minute' })).toBe('empty');
    expect(await page.textContent('#empty')).toContain('No stats in this range');
    const totals = await shownTotals();
    expect(Object.keys(totals).sort()).toEqual(Object.keys(expectedTotals()).sort());
    expect(Object.values(totals).every((v) => v === 0)).toBe(true);
    expect(await page.locator('#charts canvas').count()).toBe(0);
    expect(problems).toEqual([]);
  }, 120_000);
});
