// The stats dashboard (/dashboard) in a real browser: Debian's chromium driven by playwright-core,
// against a listening service with known traffic (sandbox POST /stats fixtures over two hours, and
// real publishes, token and refused requests in one minute of them). The page's totals must equal
// that traffic, at every page size and unit; errors show the service's message; an empty range
// says so. A screenshot goes to test/output/dashboard.png (ignored by git).
// Without chromium the suite warns loudly and skips; with REQUIRE_INFRA=1 it fails instead.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { basic, startTestService, type TestService } from '../helpers/service.js';
import { requireInfra } from '../helpers/infra.js';
import { connectionState, realtimeClient } from '../helpers/realtime.js';
import { PAGE_CSP } from '../../src/routes/static-page.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OUTPUT = resolve(dirname(fileURLToPath(import.meta.url)), '../output');
const haveChromium = existsSync(CHROMIUM);

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

if (!haveChromium) {
  const hint = `install Debian's chromium (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH`;
  if (requireInfra) {
    describe('dashboard in a browser', () => {
      it('needs chromium', () => {
        throw new Error(`chromium not found at ${CHROMIUM} and REQUIRE_INFRA=1 (${hint})`);
      });
    });
  } else {
    const line = '!'.repeat(100);
    console.warn(`\n${line}\n!!! CHROMIUM NOT FOUND at ${CHROMIUM}: "dashboard in a browser" IS SKIPPED. To run it: ${hint}.\n${line}\n`);
    describe.skip('dashboard in a browser (skipped: chromium not found)', () => {
      it('needs chromium', () => {});
    });
  }
} else {
  describe('dashboard in a browser (README: Dashboard)', () => {
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

  describe('dashboard against live traffic (README: Dashboard): the page equals GET /stats', () => {
    // The real clock, moved two hours on once the traffic is counted: the page's own requests
    // then fall outside the range it is compared over.
    let offset = 0;
    const liveClock = { now: () => Date.now() + offset };
    let t: TestService;
    let base: string;
    let browser: Browser;
    let key: string;
    let firstMinute: number;
    const problems: string[] = [];
    const minute = (ms: number): number => ms - (ms % 60_000);
    const inputValue = (ms: number): string => new Date(ms).toISOString().slice(0, 16);

    /** Every record of GET /stats (version 2, flat entries) for the query, following `next`. */
    async function restRecords(query: Record<string, string>): Promise<{ intervalId: string; entries: Record<string, number> }[]> {
      const records: { intervalId: string; entries: Record<string, number> }[] = [];
      let url: string | undefined = `/stats?${new URLSearchParams({ direction: 'forwards', limit: '1000', ...query })}`;
      while (url) {
        const res: { statusCode: number; json(): unknown; headers: Record<string, unknown> } = await t.service.app.inject({ url, headers: { authorization: basic(key), 'x-service-version': '2' } });
        expect(res.statusCode).toBe(200);
        records.push(...(res.json() as typeof records));
        const next: string | undefined = /<([^>]*)>;\s*rel="next"/.exec(String(res.headers.link ?? ''))?.[1];
        url = next ? next.replace(/^https?:\/\/[^/]+/, '').replace(/^\.\//, '/') : undefined;
      }
      return records;
    }
    /** Totals of `fields` over records, as the README says the page makes them (peaks: the highest; derived parts: from their fields). */
    function totalsOf(records: { entries: Record<string, number> }[], fields: string[]): Record<string, number> {
      const sum = (f: string): number => records.reduce((n, r) => n + (r.entries[f] ?? 0), 0);
      const stored = (w: string): number => sum(`messages.all.all.${w}`) - sum(`messages.inbound.all.all.${w}`) - sum(`messages.outbound.all.all.${w}`);
      const out: Record<string, number> = {};
      for (const f of fields) {
        const derived = /^derived\.(stored|historyReads)\.(count|data)$/.exec(f);
        if (derived) out[f] = derived[1] === 'stored' ? stored(derived[2]) : sum(`messages.persisted.all.${derived[2]}`) - stored(derived[2]);
        else if (f.endsWith('.peak')) out[f] = Math.max(0, ...records.map((r) => r.entries[f] ?? 0));
        else out[f] = sum(f);
      }
      return out;
    }
    /** Usage appended and the stats written; `closedOnly` leaves the current interval to its connection reading (taken in its middle). */
    const flushStats = async (closedOnly = false): Promise<void> => {
      await t.service.usage.flush(!closedOnly);
      await new Promise((r) => setImmediate(r));
      await t.service.stats.flush();
    };
    const shownTotals = (page: Page): Promise<Record<string, number>> =>
      page.$$eval('#totals td[data-field]', (cells) => Object.fromEntries(cells.map((c) => [(c as HTMLElement).dataset.field!, Number((c as HTMLElement).dataset.value)])));
    const settled = (page: Page, loads = 1) =>
      page.waitForFunction((n) => {
        const s = document.getElementById('status')!;
        return ['done', 'empty', 'error', 'truncated'].includes(s.dataset.state ?? '') && Number(s.dataset.loads ?? 0) >= n;
      }, loads);
    async function newPage(): Promise<Page> {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
      page.on('console', (m) => {
        if ((m.type() === 'error' && !m.text().startsWith('Failed to load resource')) || /Content.Security.Policy/i.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      return page;
    }

    beforeAll(async () => {
      t = await startTestService({}, { clock: liveClock });
      await t.service.app.listen({ port: 0, host: '127.0.0.1' });
      const address = t.service.app.server.address();
      if (!address || typeof address === 'string') throw new Error('the service is not listening on a port');
      base = `http://127.0.0.1:${address.port}`;
      const inject = t.service.app.inject.bind(t.service.app);
      const created = await inject({ method: 'POST', url: '/apps', payload: { keys: [{}], namespaces: [{ id: 'persisted', persisted: true }] } });
      expect(created.statusCode).toBe(201);
      key = created.json().keys[0].keyStr;
      firstMinute = minute(liveClock.now());

      // A realtime connection in presence on a channel, subscribed to it.
      const client = realtimeClient(address.port, false, { key, clientId: 'analyst' });
      await connectionState(client, 'connected');
      const channel = client.channels.get('room');
      const received: unknown[] = [];
      await channel.subscribe((m) => received.push(m));
      await channel.presence.enter({ here: true });
      await channel.publish('from-realtime', 'hello');
      // REST: publishes to that channel and a persisted one, and a read of its history.
      const json = { authorization: basic(key), 'content-type': 'application/json' };
      expect((await inject({ method: 'POST', url: '/channels/room/messages', headers: json, payload: [{ data: 'abc' }, { data: 'de' }] })).statusCode).toBe(201);
      expect((await inject({ method: 'POST', url: '/channels/persisted%3Aorders/messages', headers: json, payload: [{ data: 'order-1' }, { data: 'order-2' }] })).statusCode).toBe(201);
      const history = await inject({ url: '/channels/persisted%3Aorders/messages', headers: { authorization: basic(key) } });
      expect(history.statusCode).toBe(200);
      expect(history.json()).toHaveLength(2);

      // Wait until the stats hold every kind of figure the page charts, the connection's reading included.
      const wanted = ['messages.inbound.all.presence.count', 'messages.outbound.all.presence.count', 'messages.outbound.all.all.count', 'connections.all.peak', 'connections.all.opened', 'channels.peak', 'apiRequests.all.succeeded'];
      for (let attempt = 0; ; attempt++) {
        await flushStats(true);
        const totals = totalsOf(await restRecords({ unit: 'minute', start: String(firstMinute), end: String(liveClock.now()) }), [...wanted, 'derived.stored.count', 'derived.historyReads.count']);
        if (Object.values(totals).every((v) => v > 0) && received.length >= 3) break;
        if (attempt > 300) throw new Error(`the stats did not show the traffic: ${JSON.stringify(totals)}, ${received.length} received`);
        await new Promise((r) => setTimeout(r, 100));
      }
      client.close();
      await connectionState(client, 'closed');
      await flushStats();
      offset = 2 * 3600_000;
      await flushStats();

      browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await t?.close();
    });

    /** The traffic's range, ending a minute before the clock moved on, as the page's From/To name it. */
    const range = () => ({ start: firstMinute, to: minute(Date.now() + offset) - 3600_000 });

    it('shows per figure what it counts, and totals equal to GET /stats for the same range; all = inbound + outbound + stored', async () => {
      const page = await newPage();
      const { start, to } = range();
      await page.goto(`${base}/dashboard?start=${inputValue(start)}&end=${inputValue(to)}&unit=minute&refresh=0`);
      await page.waitForSelector('body[data-ready="true"]');
      expect(await page.inputValue('#preset')).toBe('custom');
      await page.fill('#credential', key);
      await page.click('#load');
      await settled(page);
      expect(await page.getAttribute('#status', 'data-state')).toBe('done');
      const shown = await shownTotals(page);
      const records = await restRecords({ unit: 'minute', start: String(start), end: String(to + 59_999) });
      const rest = totalsOf(records, Object.keys(shown));
      expect(shown).toEqual(rest);
      const n = records.length;
      expect(await page.textContent('#status')).toBe(
        `${n} ${n === 1 ? 'interval' : 'intervals'} with data (per minute) from ${inputValue(start).replace('T', ' ')} to ${inputValue(to).replace('T', ' ')} UTC, in 1 page.`,
      );
      // The figures the page is asked to chart, each with traffic in it (so the comparison is not of zeros).
      for (const f of ['messages.inbound.all.presence.count', 'messages.outbound.all.presence.count', 'connections.all.opened', 'connections.all.peak', 'channels.peak', 'apiRequests.all.succeeded', 'derived.stored.count', 'derived.historyReads.count']) {
        expect(shown[f], f).toBeGreaterThan(0);
      }
      expect(shown['messages.all.all.count']).toBe(shown['messages.inbound.all.all.count'] + shown['messages.outbound.all.all.count'] + shown['derived.stored.count']);
      expect(shown['messages.persisted.all.count']).toBe(shown['derived.stored.count'] + shown['derived.historyReads.count']);
      expect(shown['derived.stored.count']).toBe(2); // the two persisted messages
      expect(shown['derived.historyReads.count']).toBe(2); // read back once
      // Every row says what it counts; the charts include presence, connections, channels and API requests.
      const definitions = await page.$$eval('#totals tbody tr', (rows) => rows.map((r) => r.querySelector('td.def')?.textContent ?? ''));
      expect(definitions.every((d) => d.length > 10)).toBe(true);
      for (const id of ['messages', 'presence', 'connections', 'channels', 'api']) expect(await page.locator(`#chart-${id} canvas`).count(), id).toBe(1);
      expect(await page.textContent('#chart-channels .note')).toContain('or a realtime connection attached to it (a subscriber or presence member)');
      // The legend shows numbers without a hover: the newest interval's.
      const legend = await page.$$eval('#chart-presence .u-legend .u-series .u-value', (cells) => cells.map((c) => c.textContent ?? ''));
      expect(legend[0]).toBe(`newest ${inputValue(to).replace('T', ' ')}`);
      expect(legend.every((v) => v !== '–' && v !== '')).toBe(true);
      mkdirSync(OUTPUT, { recursive: true });
      await page.screenshot({ path: join(OUTPUT, 'dashboard-live.png'), fullPage: true });
      expect(problems).toEqual([]);
      await page.close();
    }, 120_000);

    it('exports the table shown as CSV, value for value', async () => {
      const page = await newPage();
      const { start, to } = range();
      await page.goto(`${base}/dashboard?start=${inputValue(start)}&end=${inputValue(to)}&unit=hour&refresh=0`);
      await page.waitForSelector('body[data-ready="true"]');
      await page.fill('#credential', key);
      await page.click('#load');
      await settled(page);
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#csv')]);
      expect(download.suggestedFilename()).toBe(`stats-${inputValue(start).replace(':', '')}-${inputValue(to).replace(':', '')}-hour.csv`);
      const csv = readFileSync((await download.path())!, 'utf8');
      // RFC 4180 rows: quoted fields may hold commas.
      const rows = csv
        .trimEnd()
        .split('\r\n')
        .map((line) => [...line.matchAll(/("(?:[^"]|"")*"|[^,]*)(?:,|$)/g)].map((m) => m[1].replace(/^"|"$/g, '').replace(/""/g, '"')).slice(0, 6));
      const table = await page.$$eval('#totals tr', (trs) =>
        trs.map((tr) => [...tr.children].map((c) => ((c as HTMLElement).dataset.value !== undefined ? (c as HTMLElement).dataset.value! : c.textContent ?? ''))),
      );
      // The table leaves the chart's name out after its first row; the CSV names it on every row.
      let chart = '';
      const filled = table.map((row, i) => (i === 0 ? row : [(chart = row[0] || chart), ...row.slice(1)]));
      expect(rows).toEqual(filled);
      const shown = await shownTotals(page);
      const rest = totalsOf(await restRecords({ unit: 'hour', start: String(start), end: String(to + 59_999) }), Object.keys(shown));
      expect(Object.fromEntries(rows.slice(1).map((r) => [r[3].replace(/^derived: /, 'derived.'), Number(r[5])]))).toEqual(rest);
      await page.close();
    }, 120_000);

    it('keeps the range in the URL: a reload shows the same range and numbers', async () => {
      const page = await newPage();
      const { start, to } = range();
      await page.goto(`${base}/dashboard?refresh=0`);
      await page.waitForSelector('body[data-ready="true"]');
      await page.fill('#credential', key);
      await page.check('#remember');
      await page.selectOption('#preset', 'custom');
      await page.fill('#start', inputValue(start));
      await page.fill('#end', inputValue(to));
      await page.selectOption('#unit', 'minute');
      await page.click('#load');
      await settled(page);
      const before = await shownTotals(page);
      const url = new URL(page.url());
      expect(Object.fromEntries(url.searchParams)).toEqual({ start: inputValue(start), end: inputValue(to), unit: 'minute', refresh: '0' });
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await settled(page); // the remembered credential: it shows at once
      expect([await page.inputValue('#preset'), await page.inputValue('#start'), await page.inputValue('#end'), await page.inputValue('#unit')]).toEqual(['custom', inputValue(start), inputValue(to), 'minute']);
      expect(await shownTotals(page)).toEqual(before);
      // A preset is kept by name.
      await page.selectOption('#preset', '24h');
      await page.click('#load');
      await settled(page, 2);
      expect(new URL(page.url()).searchParams.get('range')).toBe('24h');
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await settled(page);
      expect(await page.inputValue('#preset')).toBe('24h');
      expect(await page.inputValue('#unit')).toBe('hour');
      await page.close();
    }, 120_000);

    it("by default shows the app's data from its first stats, in a unit that spreads it, and refreshes on its own", async () => {
      const page = await newPage();
      await page.goto(`${base}/dashboard?refresh=5`);
      await page.waitForSelector('body[data-ready="true"]');
      expect(await page.inputValue('#preset')).toBe('data');
      await page.fill('#credential', key);
      await page.click('#load');
      await settled(page);
      const first = (await restRecords({ unit: 'minute', limit: '1' }))[0].intervalId;
      expect(await page.inputValue('#start')).toBe(first.replace(/^(\d{4}-\d\d-\d\d):(\d\d:\d\d)$/, '$1T$2'));
      expect(await page.inputValue('#unit')).toBe('minute'); // two hours of data: per minute
      expect(await page.textContent('#status')).toMatch(/^\d+ intervals? with data \(per minute\) from .* in 1 page\. Refreshed every 5 s\.$/);
      // New traffic shows without pressing Show.
      const inbound = (await shownTotals(page))['messages.inbound.all.all.count'];
      const published = await t.service.app.inject({
        method: 'POST',
        url: '/channels/room/messages',
        headers: { authorization: basic(key), 'content-type': 'application/json' },
        payload: { data: 'later' },
      });
      expect(published.statusCode).toBe(201);
      await flushStats();
      await page.waitForFunction(
        (n) => Number(document.querySelector('#totals td[data-field="messages.inbound.all.all.count"]')?.getAttribute('data-value')) === n,
        inbound + 1,
        { timeout: 30_000 },
      );
      expect(Number(await page.getAttribute('#status', 'data-loads'))).toBeGreaterThan(1);
      expect(problems).toEqual([]);
      await page.close();
    }, 120_000);
  });
}
