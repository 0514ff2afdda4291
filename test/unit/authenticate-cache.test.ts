// The cache of verified credentials (src/auth/authenticate.ts) is a resource every client can make
// the service spend: bounded in entries and in bytes, and one client filling it does not push every
// other client's credentials out at once.
import { describe, expect, it, vi } from 'vitest';
import { AppRegistry } from '../../projections/apps/app-registry.js';
import { Authenticator, CREDENTIALS_CACHE_KEY_CHARS, CREDENTIALS_CACHE_SIZE } from '../../src/auth/authenticate.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const KEY = 'app.k1:secret';

function authenticator(): { auth: Authenticator; lookups: () => number } {
  const apps = new AppRegistry();
  apps.put({ appId: 'app', accountId: 'app', keys: [{ keyName: 'app.k1', keySecret: 'secret', capability: '{"*":["*"]}' }], namespaces: [], source: 'file', createdAt: 0 });
  const key = vi.spyOn(apps, 'key');
  return { auth: new Authenticator(apps), lookups: () => key.mock.calls.length };
}

describe('the verified-credentials cache', () => {
  it('answers the same Authorization header from the cache the second time', () => {
    const { auth, lookups } = authenticator();
    auth.authenticate(`Basic ${b64(KEY)}`, undefined, 0);
    auth.authenticate(`Basic ${b64(KEY)}`, undefined, 0);
    expect(lookups()).toBe(1);
  });

  it('does not keep a header longer than the bound (padding a valid key): it is verified every time', () => {
    const { auth, lookups } = authenticator();
    const padded = `Basic ${' '.repeat(CREDENTIALS_CACHE_KEY_CHARS)}${b64(KEY)}`;
    expect(auth.authenticate(padded, undefined, 0).keyName).toBe('app.k1');
    auth.authenticate(padded, undefined, 0);
    expect(lookups()).toBe(2);
  });

  it('when full, drops its oldest entry only: a client sending many clientIds does not push out the others', () => {
    const { auth, lookups } = authenticator();
    const header = `Basic ${b64(KEY)}`;
    auth.authenticate(header, b64('oldest'), 0);
    auth.authenticate(header, b64('second'), 0);
    for (let i = 0; i < CREDENTIALS_CACHE_SIZE - 2; i++) auth.authenticate(header, b64(`filler-${i}`), 0);
    auth.authenticate(header, b64('one-more'), 0); // the cache is full: "oldest" goes
    const before = lookups();
    auth.authenticate(header, b64('second'), 0);
    expect(lookups()).toBe(before); // still cached
    auth.authenticate(header, b64('oldest'), 0);
    expect(lookups()).toBe(before + 1);
  });
});
