// The developer console (/console) in a real browser: Debian's chromium driven by playwright-core,
// against a listening service in the mode startTestService starts (embedded; with
// TEST_SERVICE_MODE=production on Kafka and ClickHouse, as .ci/run runs it too: the console uses
// only the public REST and realtime interfaces, so both modes must serve it the same). A publish from the page arrives in a second
// browser context; a member the node SDK enters shows in the page; the page enters, updates and
// leaves presence itself, seen by the node SDK and another context; active channels with occupancy,
// a channel's status, history a page at a time along Link headers, a metachannel; the URL restores
// what is open; a bad key shows the service's error. Screenshots (desktop and a 390 px phone) go to
// test/output/console*.png (ignored by git) and are checked: not blank, the expected parts visible
// and inside the phone's width. Every request the page makes stays on the service's origin.
// Without chromium the suite warns loudly and skips; with REQUIRE_INFRA=1 it fails instead.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import * as Ably from 'ably';
import { basic, listening, publishJson, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { realtimeClient } from '../helpers/realtime.js';
import { CHROMIUM, describeInChromium, OUTPUT } from './chromium.js';

describeInChromium('console in a browser (README: Console)', () => {
  let t: TestService;
  let port: number;
  let base: string;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  const sdkClients: Ably.Realtime[] = [];
  /** Console errors, CSP reports, page errors and requests to another origin, of every page. */
  const problems: string[] = [];
  /** The WebSocket URLs pages opened: realtime goes over the WebSocket, not the SDK's fallback. */
  const websockets: string[] = [];

  beforeAll(async () => {
    t = await startTestService();
    port = await listening(t);
    base = `http://127.0.0.1:${port}`;
    browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    for (const c of sdkClients) c.close();
    await browser?.close();
    await t?.close();
    if (t) removeDir(t.dataDir);
  });

  /** A fresh context (its own storage) and page, watched for problems. */
  async function newPage(viewport = { width: 1280, height: 900 }, expectRefusals = false): Promise<Page> {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    const page = await context.newPage();
    page.on('console', (m) => {
      const text = m.text();
      // A refused request is logged by the browser ("Failed to load resource: ... 401"), and the SDK logs a refused connection: expected where the test asks for them.
      const expected = expectRefusals && (text.startsWith('Failed to load resource') || /Ably:/.test(text));
      if ((m.type() === 'error' && !expected) || /Content.Security.Policy/i.test(text)) problems.push(`console ${m.type()}: ${text}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.host !== `127.0.0.1:${port}` && url.protocol !== 'data:') problems.push(`request to another origin: ${r.url()}`);
    });
    page.on('websocket', (ws) => {
      websockets.push(ws.url());
      if (new URL(ws.url()).host !== `127.0.0.1:${port}`) problems.push(`websocket to another origin: ${ws.url()}`);
    });
    return page;
  }

  /** Opens the console (at `path`, /console by default), enters the key and waits for the connection. */
  async function connected(page: Page, opts: { key?: string; path?: string; remember?: boolean } = {}): Promise<void> {
    await page.goto(`${base}${opts.path ?? '/console'}`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#credential', opts.key ?? t.key);
    if (opts.remember) await page.check('#remember');
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="connected"]');
  }

  async function openChannel(page: Page, name: string): Promise<void> {
    await page.fill('#channel', name);
    await page.click('#attach');
    await page.waitForSelector('#channel-state[data-state="attached"]');
  }

  /** A new page, connected, with `channel` open. */
  async function pageOn(channel: string): Promise<Page> {
    const page = await newPage();
    await connected(page);
    await openChannel(page, channel);
    return page;
  }

  /** A new page connected with a token of the root key's (bound to `clientId` if given), with `channel` open. */
  async function pageWithToken(channel: string, clientId?: string): Promise<Page> {
    const keyName = t.key.slice(0, t.key.indexOf(':'));
    const payload = { keyName, timestamp: Date.now(), ...(clientId === undefined ? {} : { clientId }) };
    const issued = await t.service.app.inject({ method: 'POST', url: `/keys/${keyName}/requestToken`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload });
    expect(issued.statusCode).toBe(200);
    const page = await newPage();
    await page.goto(`${base}/console`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.selectOption('#auth-kind', 'token');
    await page.fill('#credential', issued.json().token as string);
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="connected"]');
    await openChannel(page, channel);
    return page;
  }

  const restPublish = (channel: string, messages: unknown) => publishJson(t, channel, messages);

  it('publishes from the page (name, JSON data, extras) and a second browser context subscribed to the channel receives it', async () => {
    const channel = uniqueChannel('console-pub');
    const watcher = await pageOn(channel);

    const publisher = await pageOn(channel);
    await publisher.fill('#pub-name', 'greeting');
    await publisher.fill('#pub-data', '{"hello": "from the console", "n": 7}');
    await publisher.check('#pub-json');
    await publisher.fill('#pub-extras', '{"headers": {"kind": "console-test"}}');
    await publisher.click('#publish');
    await publisher.waitForSelector('#publish-state[data-state="done"]');

    const entry = watcher.locator('#log li[data-kind="message"][data-name="greeting"]');
    await entry.waitFor();
    expect(await entry.locator('pre.data').textContent()).toBe('{"hello":"from the console","n":7}');
    expect(await entry.locator('pre.extras').textContent()).toBe('extras {"headers":{"kind":"console-test"}}');

    // The service stored what the page sent: JSON data, its extras.
    const history = await t.service.app.inject({ url: `/channels/${channel}/messages`, headers: { authorization: t.auth } });
    expect(history.json()).toEqual([
      expect.objectContaining({ name: 'greeting', data: '{"hello":"from the console","n":7}', encoding: 'json', extras: { headers: { kind: 'console-test' } } }),
    ]);

    // The page's history shows it decoded (the REST body says `encoding: json`), as the subscriber got it.
    await publisher.click('#history-load');
    await publisher.waitForSelector('#history-state[data-state="done"][data-count="1"]');
    expect(await publisher.locator('#history tbody tr td').allTextContents()).toEqual([
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/),
      'greeting',
      '{"hello":"from the console","n":7}',
      '',
      expect.any(String),
    ]);

    expect(websockets.filter((u) => u.startsWith(`ws://127.0.0.1:${port}/?`)).length).toBeGreaterThanOrEqual(2);

    // A bad JSON data is refused in the page, before any request.
    await publisher.fill('#pub-data', '{not json');
    await publisher.click('#publish');
    await publisher.waitForSelector('#publish-state[data-state="error"]');
    expect(await publisher.textContent('#publish-state')).toContain('Data is not JSON');
    expect(problems).toEqual([]);
  }, 120_000);

  it('shows a member that the node SDK enters, live, with its data; and its leave', async () => {
    const channel = uniqueChannel('console-presence');
    const page = await pageOn(channel);
    expect(await page.locator('#members tbody tr').count()).toBe(0);

    const sdk = realtimeClient(port, false, { key: t.key, clientId: 'sdk-member' });
    sdkClients.push(sdk);
    await sdk.channels.get(channel).presence.enter({ from: 'node' });

    const row = page.locator('#members tbody tr[data-client-id="sdk-member"]');
    await row.waitFor();
    expect(await row.locator('td').allTextContents()).toEqual(['sdk-member', sdk.connection.id, '{"from":"node"}']);
    await page.locator('#log li[data-kind="presence"][data-action="enter"][data-client-id="sdk-member"]').waitFor();
    expect(await page.textContent('#members-count')).toBe('(1)');

    // The status (GET /channels/<id>) counts the member, once refreshed.
    await page.click('#status-refresh');
    await page.waitForFunction(() => document.querySelector('#status dd[data-field="presenceMembers"]')?.textContent === '1');

    await sdk.channels.get(channel).presence.leave();
    await page.locator('#log li[data-kind="presence"][data-action="leave"][data-client-id="sdk-member"]').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('#members tbody tr').length === 0);
    expect(problems).toEqual([]);
  }, 120_000);

  it('enters presence from the page (clientId, JSON data), updates and leaves: the node SDK and a second browser context see it', async () => {
    const channel = uniqueChannel('console-enter');
    const rest = new Ably.Rest({ key: t.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false });
    const members = async () => (await rest.channels.get(channel).presence.get()).items.map((m) => [m.clientId, m.data]);
    const page = await pageOn(channel);
    const watcher = await pageOn(channel);

    await page.fill('#presence-client-id', 'page-member');
    await page.fill('#presence-data', '{"from": "the page"}');
    await page.check('#presence-json');
    await page.click('#presence-enter');
    await page.waitForSelector('#presence-state[data-state="present"]');
    expect(await members()).toEqual([['page-member', { from: 'the page' }]]);
    // The page's own member is in its list, marked as its own; the other context sees it as anyone's.
    const own = page.locator('#members tbody tr[data-client-id="page-member"]');
    await own.waitFor();
    expect(await own.getAttribute('data-own')).toBe('true');
    expect(await own.locator('td').allTextContents()).toEqual(['page-member', await page.evaluate(() => document.querySelector('#connection')!.textContent!.match(/connection (\S+)\)/)![1]), '{"from":"the page"}']);
    const seen = watcher.locator('#members tbody tr[data-client-id="page-member"]');
    await seen.waitFor();
    expect(await seen.getAttribute('data-own')).toBeNull();
    expect(await seen.locator('td').nth(2).textContent()).toBe('{"from":"the page"}');

    await page.uncheck('#presence-json');
    await page.fill('#presence-data', 'updated text');
    await page.click('#presence-update');
    await watcher.locator('#log li[data-kind="presence"][data-action="update"][data-client-id="page-member"]').waitFor();
    await watcher.waitForFunction(() => document.querySelector('#members tbody tr[data-client-id="page-member"] td:nth-child(3)')?.textContent === 'updated text');
    expect(await members()).toEqual([['page-member', 'updated text']]);

    await page.click('#presence-leave');
    await page.waitForSelector('#presence-state[data-state="absent"]');
    await watcher.locator('#log li[data-kind="presence"][data-action="leave"][data-client-id="page-member"]').waitFor();
    await watcher.waitForFunction(() => document.querySelectorAll('#members tbody tr').length === 0);
    expect(await members()).toEqual([]);

    // Entering again, then closing the channel, leaves too; an empty clientId is refused in the page.
    await page.click('#presence-enter');
    await page.waitForSelector('#presence-state[data-state="present"]');
    await seen.waitFor();
    await page.click('#detach');
    await watcher.waitForFunction(() => document.querySelectorAll('#members tbody tr').length === 0);
    expect(await members()).toEqual([]);
    await openChannel(page, channel);
    await page.fill('#presence-client-id', '');
    await page.click('#presence-enter');
    await page.waitForSelector('#presence-state[data-state="error"]');
    expect(await page.textContent('#presence-state')).toBe('Enter a clientId (not *) to be present as.');
    expect(problems).toEqual([]);
  }, 120_000);

  it('lists active channels with their occupancy (GET /channels) and opens one: its status shows', async () => {
    const channel = uniqueChannel('console-list');
    const sdk = realtimeClient(port, false, { key: t.key, clientId: 'lister' });
    sdkClients.push(sdk);
    await sdk.channels.get(channel).presence.enter('here');

    const page = await newPage();
    await connected(page);
    await page.fill('#prefix', 'console-list');
    await page.click('#list-channels');
    await page.waitForSelector('#channels-state[data-state="done"]');
    const row = page.locator(`#channels tbody tr[data-channel="${channel}"]`);
    expect(await row.locator('td[data-metric="presenceMembers"]').textContent()).toBe('1');
    expect(await row.locator('td[data-metric="connections"]').textContent()).toBe('1');

    // Two a page (`?limit=2` on the page's URL): "More channels" follows the next Link.
    const paged = await newPage();
    const others = [uniqueChannel('console-list'), uniqueChannel('console-list')];
    for (const other of others) await restPublish(other, { data: 'active' });
    await connected(paged, { path: '/console?limit=2' });
    await paged.fill('#prefix', 'console-list');
    await paged.click('#list-channels');
    await paged.waitForSelector('#channels-state[data-state="done"]');
    expect(await paged.locator('#channels tbody tr').count()).toBe(2);
    expect(await paged.textContent('#channels-state')).toBe('2 active channels so far.');
    await paged.click('#channels-more');
    await paged.waitForSelector('#channels-state[data-state="done"]');
    expect(await paged.locator('#channels tbody tr').count()).toBe(3);
    expect(await paged.isVisible('#channels-more')).toBe(false);
    expect((await paged.$$eval('#channels tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.channel))).sort()).toEqual([channel, ...others].sort());

    await row.locator('button').click();
    await page.waitForSelector('#channel-state[data-state="attached"]');
    expect(await page.inputValue('#channel')).toBe(channel);
    await page.waitForSelector('#status[data-state="done"]');
    expect(await page.textContent('#status dd[data-field="channelId"]')).toBe(channel);
    expect(await page.textContent('#status dd[data-field="isActive"]')).toBe('true');
    await page.locator('#members tbody tr[data-client-id="lister"]').waitFor();
    expect(new URL(page.url()).hash).toBe(`#channel=${channel}`);
    expect(problems).toEqual([]);
  }, 120_000);

  it('reads history a page at a time along the Link headers, in a range the URL keeps across a reload', async () => {
    const channel = uniqueChannel('console-history');
    await restPublish(
      channel,
      Array.from({ length: 25 }, (_, i) => ({ name: `m${i}`, data: `message ${i}` })),
    );
    const page = await newPage();
    await connected(page, { remember: true });
    await openChannel(page, channel);
    await page.fill('#history-limit', '10');
    await page.fill('#history-start', '2000-01-01T00:00:00');
    await page.click('#history-load');
    await page.waitForSelector('#history-state[data-state="done"][data-page="1"]');
    const names = () => page.$$eval('#history tbody tr td:nth-child(2)', (cells) => cells.map((c) => c.textContent));
    const seen = [...(await names())];
    expect(seen).toEqual(Array.from({ length: 10 }, (_, i) => `m${24 - i}`));
    for (const pageNumber of [2, 3]) {
      await page.click('#history-next');
      await page.waitForSelector(`#history-state[data-state="done"][data-page="${pageNumber}"]`);
      seen.push(...(await names()));
    }
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `m${24 - i}`));
    expect(await page.isVisible('#history-next')).toBe(false);
    expect(await page.textContent('#history-state')).toBe('Page 3: 5 messages, newest first; no older ones.');
    await page.click('#history-first');
    await page.waitForSelector('#history-state[data-state="done"][data-page="1"]');
    expect(await names()).toEqual(seen.slice(0, 10));

    // The URL keeps the channel and the range; a reload (credentials remembered in the tab) restores them.
    const hash = new URLSearchParams(new URL(page.url()).hash.slice(1));
    // (chromium's datetime-local drops zero seconds from its value)
    expect(Object.fromEntries(hash)).toEqual({ channel, start: '2000-01-01T00:00', limit: '10' });
    await page.reload();
    await page.waitForSelector('#channel-state[data-state="attached"]');
    await page.waitForSelector('#history-state[data-state="done"][data-page="1"]');
    expect(await page.inputValue('#channel')).toBe(channel);
    expect(await page.inputValue('#history-limit')).toBe('10');
    expect(await names()).toEqual(seen.slice(0, 10));

    // The same link in a new tab without the credential: it says what it will open, and opens it once a key is entered.
    const shared = await newPage();
    await shared.goto(page.url());
    await shared.waitForSelector('body[data-ready="true"]');
    expect(await shared.textContent('#channel-state')).toBe(`Enter a key or token and press Connect to open ${channel}.`);
    await shared.fill('#credential', t.key);
    await shared.click('#connect');
    await shared.waitForSelector('#history-state[data-state="done"][data-page="1"]');
    expect(await shared.$$eval('#history tbody tr td:nth-child(2)', (cells) => cells.map((c) => c.textContent))).toEqual(seen.slice(0, 10));

    // A range with nothing in it says so.
    await page.fill('#history-start', '2000-01-01T00:00:00');
    await page.fill('#history-end', '2000-01-02T00:00:00');
    await page.click('#history-load');
    await page.waitForSelector('#history-state[data-state="done"]');
    expect(await page.textContent('#history-state')).toBe('No messages in this range.');
    expect(problems).toEqual([]);
  }, 120_000);

  it('works with a token instead of a key: connects, publishes, reads history and lists channels', async () => {
    const channel = uniqueChannel('console-token');
    const page = await pageWithToken(channel);
    await page.fill('#pub-name', 'by-token');
    await page.fill('#pub-data', 'plain text');
    await page.click('#publish');
    await page.locator('#log li[data-name="by-token"]').waitFor();
    await page.click('#history-load');
    await page.waitForSelector('#history-state[data-state="done"][data-count="1"]');
    expect(await page.textContent('#history tbody td[data-label="data"]')).toBe('plain text');
    await page.click('#list-channels');
    await page.waitForSelector(`#channels tbody tr[data-channel="${channel}"]`);
    expect(problems).toEqual([]);
  }, 120_000);

  it('a token bound to a clientId enters presence as that clientId, shown in the field and not editable', async () => {
    const channel = uniqueChannel('console-token-presence');
    const page = await pageWithToken(channel, 'token-client');
    await page.waitForFunction(() => (document.querySelector('#presence-client-id') as HTMLInputElement).value === 'token-client');
    expect(await page.getAttribute('#presence-client-id', 'readonly')).not.toBeNull();
    await page.click('#presence-enter');
    await page.waitForSelector('#presence-state[data-state="present"]');
    await page.locator('#members tbody tr[data-client-id="token-client"][data-own="true"]').waitFor();
    expect(problems).toEqual([]);
  }, 120_000);

  it('attaches to a metachannel: [meta]channel.lifecycle shows a channel becoming active', async () => {
    const page = await pageOn('[meta]channel.lifecycle');
    const channel = uniqueChannel('console-lifecycle');
    await restPublish(channel, { data: 'wakes it up' });
    const entry = page.locator('#log li[data-kind="message"]').filter({ hasText: channel }).first();
    await entry.waitFor();
    expect(await entry.getAttribute('data-name')).toMatch(/^channel\./);
    expect(new URL(page.url()).hash).toBe(`#channel=${encodeURIComponent('[meta]channel.lifecycle')}`);
    expect(problems).toEqual([]);
  }, 120_000);

  it("shows the service's error for a bad key, not a blank page, and keeps the page usable", async () => {
    const bad = `${t.key.slice(0, t.key.indexOf(':'))}:wrong-secret`;
    const rest = (await t.service.app.inject({ url: '/channels', headers: { authorization: basic(bad) } })).json().error;
    const page = await newPage({ width: 1280, height: 900 }, true);
    await page.goto(`${base}/console`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#credential', bad);
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="failed"]');
    await page.waitForSelector('#error:not([hidden])');
    const shown = await page.textContent('#error');
    expect(shown).toMatch(/\(code 401\d\d, status 401\)$/);
    // The REST side says the same as the service answers.
    await page.waitForSelector('#channels-state[data-state="error"]');
    expect(await page.textContent('#channels-state')).toBe(`${rest.message} (code ${rest.code}, status ${rest.statusCode})`);
    expect(await page.isVisible('h1')).toBe(true);
    mkdirSync(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, 'console-bad-key.png'), fullPage: true });

    // A key the SDK cannot even parse is refused in the page, with a message.
    await page.fill('#credential', 'not-a-key');
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="failed"]');
    expect((await page.textContent('#error'))!.length).toBeGreaterThan(0);

    // The right key then connects in the same page.
    await page.fill('#credential', t.key);
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="connected"]');
    expect(await page.isVisible('#error')).toBe(false);
    expect(problems).toEqual([]);
  }, 120_000);

  it('is readable at a phone width (390 px): nothing wider than the screen, the parts visible; screenshots are not blank', async () => {
    const channel = uniqueChannel('console-phone');
    await restPublish(channel, [{ name: 'first', data: 'a message long enough to wrap on a phone screen, '.repeat(3) }, { name: 'second', data: { json: true } }]);
    const sdk = realtimeClient(port, false, { key: t.key, clientId: 'phone-member' });
    sdkClients.push(sdk);
    await sdk.channels.get(channel).presence.enter({ on: 'phone' });

    const page = await newPage({ width: 390, height: 844 });
    await connected(page);
    await openChannel(page, channel);
    await page.waitForSelector('#history-state[data-state="done"]');
    await page.locator('#members tbody tr[data-client-id="phone-member"]').waitFor();
    await restPublish(channel, { name: 'live', data: 'arrives while watching' });
    await page.locator('#log li[data-name="live"]').waitFor();

    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    for (const selector of ['h1', '#credential', '#connect', '#list-channels', '#channel', '#attach', '#log', '#members', '#presence-enter', '#publish', '#history-load', '#history']) {
      const box = await page.locator(selector).boundingBox();
      expect(box, selector).not.toBeNull();
      expect(box!.x, selector).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width, selector).toBeLessThanOrEqual(390);
    }
    mkdirSync(OUTPUT, { recursive: true });
    const phone = await page.screenshot({ path: join(OUTPUT, 'console-phone.png'), fullPage: true });

    const desktop = await newPage({ width: 1280, height: 900 });
    await connected(desktop);
    await openChannel(desktop, channel);
    await desktop.waitForSelector('#history-state[data-state="done"]');
    const wide = await desktop.screenshot({ path: join(OUTPUT, 'console.png'), fullPage: true });

    for (const [name, png] of [
      ['phone', phone],
      ['desktop', wide],
    ] as const) {
      const look = await pixels(png);
      expect(look.width, name).toBe(name === 'phone' ? 390 : 1280);
      // Text and controls, not an empty page: many colours, and a fair share of non-white pixels.
      expect(look.colours, name).toBeGreaterThan(20);
      expect(look.inkShare, name).toBeGreaterThan(0.02);
    }
    expect(problems).toEqual([]);
  }, 120_000);

  /** Decodes a screenshot in a blank page of the browser (no CSP there): size, colours, share of non-white. */
  async function pixels(png: Buffer): Promise<{ width: number; colours: number; inkShare: number }> {
    const context = await browser.newContext();
    contexts.push(context);
    const scratch = await context.newPage();
    return scratch.evaluate(async (b64: string) => {
      const img = new Image();
      img.src = `data:image/png;base64,${b64}`;
      await img.decode();
      const canvas = document.createElement('canvas');
      canvas.width = img.width;
      canvas.height = img.height;
      const ctx = canvas.getContext('2d')!;
      ctx.drawImage(img, 0, 0);
      const data = ctx.getImageData(0, 0, img.width, img.height).data;
      const colours = new Set<number>();
      let ink = 0;
      for (let i = 0; i < data.length; i += 4) {
        colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
        if (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200) ink++;
      }
      return { width: img.width, colours: colours.size, inkShare: ink / (data.length / 4) };
    }, png.toString('base64'));
  }
});
