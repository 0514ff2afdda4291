// The JWT check (src/auth/jwt.ts) on its own: one asynchronous check per JWT, its outcome kept
// within a bound and dropped when keys change, the time checks made at each use.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { AppRegistry } from '../../projections/apps/app-registry.js';
import { DEFAULT_JWT_LIMITS, isJwt, JwtVerifier } from '../../src/auth/jwt.js';
import type { AppDefinition } from '../../src/domain/app.js';

const NOW = 1_800_000_000_000;
const app = (secret: string): AppDefinition => ({
  appId: 'app1',
  accountId: 'acc',
  keys: [{ keyName: 'app1.k1', keySecret: secret, capability: '{"*":["*"]}' }],
  namespaces: [],
  source: 'file',
  createdAt: 0,
});
const sign = (claims: Record<string, unknown> = {}, secret = 'secret-1'): Promise<string> =>
  new SignJWT({ iat: NOW / 1000, exp: NOW / 1000 + 60, ...claims }).setProtectedHeader({ alg: 'HS256', kid: 'app1.k1' }).sign(new TextEncoder().encode(secret));
const codeOf = (fn: () => unknown): number | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as { code: number }).code;
  }
  return undefined;
};

/** `catchUp`: a kid not known waits for the apps topic first (src/apps/keys-catch-up.ts), here at once. */
function setup(cacheSize = DEFAULT_JWT_LIMITS.cacheSize, catchUp = false) {
  const apps = new AppRegistry();
  apps.put(app('secret-1'));
  return { apps, jwt: new JwtVerifier(apps, { ...DEFAULT_JWT_LIMITS, cacheSize }, undefined, catchUp ? async () => undefined : undefined) };
}

describe('JwtVerifier', () => {
  it('tells a JWT (three parts) from a native token (two)', () => {
    expect(isJwt('a.b.c')).toBe(true);
    expect(isJwt('claims.signature')).toBe(false);
    expect(isJwt('a..c')).toBe(false);
    expect(isJwt('a.b.c.d')).toBe(false);
  });

  it('checks a JWT once: prepare settles, then verify answers without waiting, and prepare has nothing more to do', async () => {
    const { jwt } = setup();
    const token = await sign({ 'x-ably-clientId': 'amy' });
    expect(codeOf(() => jwt.verify(token, NOW))).toBe(40140); // not checked yet
    const first = jwt.prepare(token, NOW);
    expect(jwt.prepare(token, NOW)).toBe(first); // one check for concurrent asks
    await first;
    expect(jwt.prepare(token, NOW)).toBeUndefined();
    expect(jwt.verify(token, NOW)).toMatchObject({ keyName: 'app1.k1', clientId: 'amy', method: 'token', issued: NOW, expires: NOW + 60_000 });
  });

  it('makes the time check at each use: the same JWT is 40142 once exp has passed', async () => {
    const { jwt } = setup();
    const token = await sign();
    await jwt.prepare(token, NOW);
    expect(jwt.verify(token, NOW + 59_999).keyName).toBe('app1.k1');
    expect(codeOf(() => jwt.verify(token, NOW + 60_000))).toBe(40142);
  });

  it('checks again after keys change: a JWT signed with a secret the key no longer has is refused (40144)', async () => {
    const { apps, jwt } = setup();
    const token = await sign();
    await jwt.prepare(token, NOW);
    expect(jwt.verify(token, NOW).keyName).toBe('app1.k1');
    apps.put(app('secret-2'));
    const again = jwt.prepare(token, NOW);
    expect(again).toBeDefined();
    await again;
    expect(codeOf(() => jwt.verify(token, NOW))).toBe(40144);
  });

  it('a JWT refused for being used before nbf, or with an iat more than 10 minutes ahead, is checked again from then, and taken', async () => {
    const { jwt } = setup();
    const early = await sign({ nbf: NOW / 1000 + 5 });
    await jwt.prepare(early, NOW);
    expect(codeOf(() => jwt.verify(early, NOW))).toBe(40144);
    expect(jwt.prepare(early, NOW + 4_999)).toBeUndefined(); // still refused: nothing to check again yet
    await jwt.prepare(early, NOW + 5_000);
    expect(jwt.verify(early, NOW + 5_000).keyName).toBe('app1.k1');

    const ahead = await sign({ iat: NOW / 1000 + 660, exp: NOW / 1000 + 720 });
    await jwt.prepare(ahead, NOW);
    expect(codeOf(() => jwt.verify(ahead, NOW))).toBe(40144);
    await jwt.prepare(ahead, NOW + 60_000);
    expect(jwt.verify(ahead, NOW + 60_000).issued).toBe(NOW + 660_000);

    const forged = await sign({ nbf: NOW / 1000 + 5 }, 'not-the-secret');
    await jwt.prepare(forged, NOW);
    await jwt.prepare(forged, NOW + 5_000);
    expect(codeOf(() => jwt.verify(forged, NOW + 5_000))).toBe(40144);
    expect(jwt.prepare(forged, NOW + 10_000)).toBeUndefined(); // checked again once, then kept
  });

  it('keeps at most cacheSize outcomes, the oldest going first', async () => {
    const { jwt } = setup(2);
    const tokens = await Promise.all([1, 2, 3].map((n) => sign({ n })));
    for (const token of tokens) await jwt.prepare(token, NOW);
    expect(jwt.prepare(tokens[0], NOW)).toBeDefined(); // dropped: checked again when asked
    expect(jwt.prepare(tokens[2], NOW)).toBeUndefined();
  });

  it('keeps no outcome for a JWT over maxJwtLength: it is refused (40144) at once, and a client sending megabyte "JWTs" (an AUTH frame holds 1 MiB) cannot fill the cache with them nor push out the others', async () => {
    const { jwt } = setup(1);
    const good = await sign();
    await jwt.prepare(good, NOW);
    const huge = `${'a'.repeat(DEFAULT_JWT_LIMITS.maxJwtLength)}.b.c`;
    await jwt.prepare(huge, NOW);
    expect(jwt.verify(good, NOW).keyName).toBe('app1.k1'); // not pushed out
    expect(codeOf(() => jwt.verify(huge, NOW))).toBe(40144);
    expect(jwt.prepare(huge, NOW)).toBeUndefined(); // nothing to check: refused as it is
  });

  it.each([false, true])('what the kept outcomes hold is bounded in bytes: cacheSize JWTs of maxJwtLength from a client with no credentials (an unknown kid, a bad signature) hold a few MB, not the JWTs themselves (64 MB); waiting for unknown kids: %s', async (catchUp) => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { jwt } = setup(DEFAULT_JWT_LIMITS.cacheSize, catchUp);
    const header = (kid: string): string => Buffer.from(JSON.stringify({ alg: 'HS256', kid })).toString('base64url');
    const junk = (n: number): string => {
      // Half name a key and fail the signature check; half name no app, with a kid of 4 KB the refusal could echo.
      const head = n % 2 === 0 ? header('app1.k1') : header(`x${n}.${'k'.repeat(4000)}`);
      const pad = 'p'.repeat(DEFAULT_JWT_LIMITS.maxJwtLength - head.length - 100);
      return `${head}.${Buffer.from(JSON.stringify({ iat: 1, exp: 2, pad: `${pad}${n}` })).toString('base64url').slice(0, DEFAULT_JWT_LIMITS.maxJwtLength - head.length - 45)}.${'s'.repeat(43)}`;
    };
    expect(junk(1).length).toBeLessThanOrEqual(DEFAULT_JWT_LIMITS.maxJwtLength);
    expect(junk(1).length).toBeGreaterThan(DEFAULT_JWT_LIMITS.maxJwtLength - 100);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let n = 0; n < DEFAULT_JWT_LIMITS.cacheSize; n++) await jwt.prepare(junk(n), NOW);
    gc();
    const held = process.memoryUsage().heapUsed - before;
    expect(codeOf(() => jwt.verify(junk(0), NOW))).toBe(40144); // kept: not checked again
    expect(codeOf(() => jwt.verify(junk(1), NOW))).toBe(40400);
    expect(held).toBeLessThan(8 * 1024 * 1024);
  });
});
