// The README's SDK snippet (issue 24, item 6), as written there, against the listening service:
// it publishes, reads the message back, and the SDK logs nothing (no deprecation warning; the
// snippet used `restHost`, which the SDK deprecates for `endpoint`). Only the key and the port
// are put in, as a reader would.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import * as Ably from 'ably';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { removeDir, startTestService, type TestService } from '../helpers/service.js';
import { ROOT } from '../helpers/spawn-service.js';

let ts: TestService;
let port: number;

beforeAll(async () => {
  ts = await startTestService();
  // `localhost`, as in the snippet: both loopback addresses, whichever the resolver gives first.
  await ts.service.app.listen({ port: 0, host: 'localhost' });
  port = (ts.service.app.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** The README's first ```js block that makes an Ably.Rest client. */
function readmeSnippet(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes('new Ably.Rest('));
  if (!block) throw new Error('the README has no ```js block with new Ably.Rest(');
  return block;
}

describe('the README SDK snippet', () => {
  it('uses endpoint, not the deprecated restHost', () => {
    expect(readmeSnippet()).toMatch(/endpoint: 'localhost'/);
    expect(readmeSnippet()).not.toMatch(/restHost|realtimeHost|environment:/);
  });

  it('publishes and reads the message back, with nothing logged by the SDK', async () => {
    const body = readmeSnippet()
      .replace(/^import \* as Ably from 'ably';\n/m, '')
      .replaceAll('APPID.KEYID:SECRET', ts.key)
      .replaceAll('port: 8080', `port: ${port}`);
    expect(body).not.toContain('import ');
    const logged = [vi.spyOn(console, 'log'), vi.spyOn(console, 'warn'), vi.spyOn(console, 'error'), vi.spyOn(console, 'info')];
    try {
      const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...args: string[]) => (ably: typeof Ably) => Promise<Ably.PaginatedResult<Ably.Message>>;
      const page = await new AsyncFunction('Ably', `${body}\nreturn page;`)(Ably);
      expect(page.items.map((m) => [m.name, m.data])).toEqual([['greeting', 'hello']]);
      for (const spy of logged) expect(spy.mock.calls).toEqual([]);
    } finally {
      for (const spy of logged) spy.mockRestore();
    }
  });
});
