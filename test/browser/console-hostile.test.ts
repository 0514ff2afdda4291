// The console (/console) showing what hostile clients put in a channel: a channel name, message
// names, data, extras and a clientId made of markup are shown as text, never run or parsed as
// HTML (the page writes them with textContent; its Content-Security-Policy would also refuse any
// script they carried, and a refusal is a failure here). Debian's chromium via playwright-core.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type * as Ably from 'ably';
import { listening, publishJson, removeDir, startTestService, type TestService } from '../helpers/service.js';
import { realtimeClient } from '../helpers/realtime.js';
import { CHROMIUM, describeInChromium } from './chromium.js';

const MARKUP = '<img src=x onerror="window.__xss=1"><b class="xss">b</b><script>window.__xss=2</script>';

describeInChromium('console with hostile channel content (README: Console)', () => {
  let t: TestService;
  let port: number;
  let browser: Browser;
  let sdk: Ably.Realtime | undefined;
  const problems: string[] = [];

  beforeAll(async () => {
    t = await startTestService();
    port = await listening(t);
    browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    sdk?.close();
    await browser?.close();
    await t?.close();
    if (t) removeDir(t.dataDir);
  });

  /** Nothing the clients sent became an element, and no script ran. */
  const nothingRan = (page: Page) =>
    page.evaluate(() => ({ xss: (window as { __xss?: number }).__xss, elements: document.querySelectorAll('img, b.xss, script:not([src])').length }));

  it('shows a markup channel name, message name, data, extras and clientId as text, in the channel list, live log, members and history', async () => {
    const channel = `hostile-${MARKUP}`;
    await publishJson(t, channel, { name: MARKUP, data: MARKUP, extras: { headers: { h: MARKUP } } });
    const page = await browser.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' || /Content.Security.Policy/i.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/console`);
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('#credential', t.key);
    await page.click('#connect');
    await page.waitForSelector('#connection[data-state="connected"]');

    // The channel list (it is active: a member is in it).
    sdk = realtimeClient(port, false, { key: t.key, clientId: MARKUP });
    await sdk.channels.get(channel).presence.enter(MARKUP);
    await page.fill('#prefix', 'hostile-');
    await page.click('#list-channels');
    await page.locator('#channels tbody tr').first().waitFor();
    expect(await page.locator('#channels tbody tr button').first().textContent()).toBe(channel);

    // The channel: members, live log, history.
    await page.fill('#channel', channel);
    await page.click('#attach');
    await page.waitForSelector('#channel-state[data-state="attached"]');
    await page.locator('#members tbody tr').first().waitFor();
    expect(await page.locator('#members tbody tr td').first().textContent()).toBe(MARKUP);
    await publishJson(t, channel, { name: MARKUP, data: MARKUP });
    await page.locator('#log li[data-kind="message"]').first().waitFor();
    expect(await page.locator('#log li[data-kind="message"] pre.data').first().textContent()).toBe(MARKUP);
    await page.click('#history-load');
    await page.waitForSelector('#history-state[data-state="done"][data-count="2"]');
    expect(await page.locator('#history tbody').textContent()).toContain(MARKUP);

    expect(await nothingRan(page)).toEqual({ xss: undefined, elements: 0 });
    expect(problems).toEqual([]);
  }, 120_000);
});
