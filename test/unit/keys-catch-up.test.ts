// A credential naming a key this instance does not know yet waits for the apps topic to be applied
// up to its end (src/apps/keys-catch-up.ts): a key made through another instance works at once.
// The production end to end: test/e2e/production-key-elsewhere.test.ts.
import { describe, expect, it } from 'vitest';
import { AppRegistry } from '../../projections/apps/app-registry.js';
import { Authenticator } from '../../src/auth/authenticate.js';
import { TokenService } from '../../src/auth/tokens.js';
import { KeysCatchUp } from '../../src/apps/keys-catch-up.js';
import type { AppDefinition } from '../../src/domain/app.js';

const app = (appId: string, keyId: string): AppDefinition => ({
  appId, accountId: appId, namespaces: [], source: 'sandbox', createdAt: 0,
  keys: [{ keyName: `${appId}.${keyId}`, keySecret: 'secret-secret', capability: '{"*":["*"]}' }],
});
const basic = (key: string): string => `Basic ${Buffer.from(key).toString('base64')}`;
const bearer = (token: string): string => `Bearer ${Buffer.from(token).toString('base64')}`;

describe('Authenticator: a key not known here yet', () => {
  it('basic credentials and a token of it wait for the catch-up, then check out; a known key waits for nothing', async () => {
    const registry = new AppRegistry();
    registry.put(app('known', 'k1'));
    let catchUps = 0;
    // The catch-up applies what the topic held: the app made elsewhere.
    const auth = new Authenticator(registry, new TokenService(registry), undefined, async () => {
      catchUps++;
      registry.put(app('elsewhere', 'k2'));
    });
    expect(auth.pending(basic('known.k1:secret-secret'), undefined, Date.now())).toBeUndefined();
    const wait = auth.pending(basic('elsewhere.k2:secret-secret'), undefined, Date.now());
    expect(wait).toBeInstanceOf(Promise);
    await wait;
    expect(auth.authenticate(basic('elsewhere.k2:secret-secret'), undefined, Date.now()).keyName).toBe('elsewhere.k2');

    // A token of a key made elsewhere (issued by the instance that knows it).
    const issuer = new AppRegistry();
    issuer.put(app('later', 'k3'));
    const { token } = new TokenService(issuer).issue('later.k3', 'secret-secret', new Map([['*', new Set(['*'])]]), 60_000, undefined, Date.now());
    const late = new AppRegistry();
    const lateAuth = new Authenticator(late, new TokenService(late), undefined, async () => void late.put(app('later', 'k3')));
    const tokenWait = lateAuth.pending(bearer(token), undefined, Date.now());
    expect(tokenWait).toBeInstanceOf(Promise);
    await tokenWait;
    expect(lateAuth.authenticate(bearer(token), undefined, Date.now()).keyName).toBe('later.k3');
    expect(lateAuth.keyPending('later.k3')).toBeUndefined();
    expect(catchUps).toBe(1);
  });
});

describe('KeysCatchUp', () => {
  it('waits until what the topic held at the call is applied; calls while one looks share the next look, which begins after them', async () => {
    let end = 1;
    let applied = 0;
    const looks: number[] = [];
    const appliedWaiters: (() => void)[] = [];
    const catchUp = new KeysCatchUp({
      end: async () => (looks.push(end), new Map([[0, end]])),
      applied: (target) => new Promise((resolve) => {
        const check = () => ((target.get(0) ?? 0) <= applied ? resolve(true) : appliedWaiters.push(check));
        check();
      }),
      timeoutMs: 5_000,
      failed: () => undefined,
    });
    let firstDone = false;
    const first = catchUp.wait().then(() => (firstDone = true));
    await new Promise((r) => setImmediate(r));
    end = 2; // a key made after the first look
    let secondDone = false;
    const second = catchUp.wait().then(() => (secondDone = true));
    const third = catchUp.wait();
    applied = 1;
    appliedWaiters.splice(0).forEach((w) => w());
    await first;
    await new Promise((r) => setImmediate(r));
    expect(secondDone).toBe(false); // its look read end 2, not applied yet
    applied = 2;
    appliedWaiters.splice(0).forEach((w) => w());
    await Promise.all([second, third]);
    expect(firstDone && secondDone).toBe(true);
    expect(looks).toEqual([1, 2]); // the second and third shared one look
  });

  it('a log that fails or does not answer holds no caller past the bound, and never rejects', async () => {
    const failures: unknown[] = [];
    const failing = new KeysCatchUp({ end: () => Promise.reject(new Error('down')), applied: async () => true, timeoutMs: 1_000, failed: (err) => failures.push(err) });
    await failing.wait();
    expect(failures).toHaveLength(1);
    const hanging = new KeysCatchUp({ end: () => new Promise(() => undefined), applied: async () => true, timeoutMs: 50, failed: () => undefined });
    const started = Date.now();
    await hanging.wait();
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
