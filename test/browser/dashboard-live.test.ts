// The stats dashboard (/dashboard) in a real browser against live traffic (README: Dashboard):
// realtime and REST traffic on the real clock, then the page's figures, its CSV export, the range
// kept in the URL and the default range (the app's first stats, refreshed on its own) checked
// against GET /stats for the same range. The fixtures' suite is dashboard.test.ts. Without
// chromium the suite warns loudly and skips; with REQUIRE_INFRA=1 it fails instead.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { basic, startTestService, type TestService } from '../helpers/service.js';
import { connectionState, realtimeClient } from '../helpers/realtime.js';
import { CHROMIUM, describeInChromium, OUTPUT } from './chromium.js';

describeInChromium('dashboard against live traffic (README: Dashboard): the page equals GET /stats', () => {
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
