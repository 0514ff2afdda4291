// The SDK's browser build (node_modules/ably/build/ably.js) in a real browser, on its long-polling
// transport only (`transports: ['xhr_polling']`, the browser's name for comet: the same requests,
// made with XMLHttpRequest and never streamed): connect, attach, publish and receive, presence,
// close. Debian's chromium driven by playwright-core, on a page of the service's own origin.
// Without chromium the suite warns loudly and skips; with REQUIRE_INFRA=1 it fails instead.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { listening, removeDir, startTestService, type TestService } from '../helpers/service.js';
import { CHROMIUM, describeInChromium } from './chromium.js';

const ABLY_BROWSER_BUILD = resolve(dirname(fileURLToPath(import.meta.url)), '../../node_modules/ably/build/ably.js');

describeInChromium('the browser SDK on xhr_polling (README: Comet fallback)', () => {
  let ts: TestService;
  let port: number;
  let browser: Browser;

  beforeAll(async () => {
    ts = await startTestService();
    port = await listening(ts);
    browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    await browser?.close();
    await ts?.close();
    if (ts) removeDir(ts.dataDir);
  });

  it('connects, attaches, publishes and receives, enters presence and reads it back, and closes', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(err.message));
    // An empty page of the service's origin for the SDK to run in, made by the browser itself (the
    // service's own html pages run no script: their Content-Security-Policy); the SDK's requests
    // from it go to the service.
    const blank = `http://127.0.0.1:${port}/sdk-test-page`;
    await page.route(blank, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>sdk</title>' }));
    await page.goto(blank);
    await page.addScriptTag({ path: ABLY_BROWSER_BUILD });
    const result = await page.evaluate(async (key: string) => {
      type Client = {
        connection: { id?: string; state: string; once(event: string): Promise<unknown>; connectionManager: { activeProtocol?: { transport?: { shortName?: string } } } };
        channels: { get(name: string): { subscribe(listener: (m: { name: string; data: unknown }) => void): Promise<unknown>; publish(name: string, data: unknown): Promise<void>; presence: { enter(data: unknown): Promise<void>; get(): Promise<{ clientId: string; data: unknown }[]> } } };
        close(): void;
      };
      const Ably = (window as unknown as { Ably: { Realtime: new (options: Record<string, unknown>) => Client } }).Ably;
      const client = new Ably.Realtime({ key, clientId: 'browser', endpoint: location.hostname, port: Number(location.port), tls: false, transports: ['xhr_polling'], logLevel: 0 });
      await client.connection.once('connected');
      const transport = client.connection.connectionManager.activeProtocol?.transport?.shortName;
      const channel = client.channels.get('browser-comet');
      const received: string[] = [];
      const arrived = new Promise<void>((resolve) => {
        void channel.subscribe((m) => {
          received.push(`${m.name}:${String(m.data)}`);
          if (received.length === 2) resolve();
        });
      });
      await channel.publish('one', 'from the browser');
      await channel.publish('two', 'over long polling');
      await arrived;
      await channel.presence.enter({ where: 'browser' });
      const members = (await channel.presence.get()).map((m) => [m.clientId, m.data]);
      const id = client.connection.id;
      client.close();
      await client.connection.once('closed');
      return { transport, id, received, members };
    }, ts.key);
    expect(problems).toEqual([]);
    expect(result.transport).toBe('xhr_polling');
    expect(result.id).toEqual(expect.any(String));
    expect(result.received).toEqual(['one:from the browser', 'two:over long polling']);
    expect(result.members).toEqual([['browser', { where: 'browser' }]]);
    // The service saw it as a comet connection and published what it sent.
    const history = (await (await fetch(`http://127.0.0.1:${port}/channels/browser-comet/messages?direction=forwards`, { headers: { authorization: ts.auth } })).json()) as { name: string; connectionId: string }[];
    expect(history.map((m) => [m.name, m.connectionId])).toEqual([
      ['one', result.id],
      ['two', result.id],
    ]);
    await page.close();
  }, 60_000);
});
