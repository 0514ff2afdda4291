import { describe, expect, it } from 'vitest';
import { NonceCache } from '../../src/auth/nonce-cache.js';
import { ServiceError } from '../../src/errors.js';

const WINDOW = 10 * 60_000;
const T = Date.UTC(2030, 0, 1);

/** The error a call throws, or undefined. */
const thrown = (f: () => unknown): ServiceError | undefined => {
  try {
    f();
  } catch (err) {
    return err as ServiceError;
  }
  return undefined;
};

describe('token nonce cache: bounded, replay protection never silently off', () => {
  it('a nonce is refused again while remembered, for the same key only', () => {
    const cache = new NonceCache({ maxTokenNonces: 10, maxTokenNoncesPerApp: 10 });
    expect(cache.remember('app', 'app.k1', 'n'.repeat(16), T + WINDOW, T)).toBe(true);
    expect(cache.remember('app', 'app.k1', 'n'.repeat(16), T + WINDOW, T + 1)).toBe(false);
    expect(cache.remember('app', 'app.k2', 'n'.repeat(16), T + WINDOW, T + 1)).toBe(true);
  });

  it('holds at most maxTokenNonces entries: the next new nonce is refused with 42910 (429), a replay is still caught', () => {
    const cache = new NonceCache({ maxTokenNonces: 100, maxTokenNoncesPerApp: 100 });
    for (let i = 0; i < 100; i++) cache.remember(`app${i % 7}`, 'k', `nonce-${i}`.padEnd(16, '-'), T + WINDOW, T);
    expect(cache.size).toBe(100);
    const err = thrown(() => cache.remember('other', 'k', 'a-new-nonce-xxxxx', T + WINDOW, T));
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ code: 42910, statusCode: 429 });
    expect(cache.size).toBe(100);
    expect(cache.remember('app0', 'k', 'nonce-0'.padEnd(16, '-'), T + WINDOW, T)).toBe(false);
  });

  it('one app cannot take more than its share: others still get theirs', () => {
    const cache = new NonceCache({ maxTokenNonces: 100, maxTokenNoncesPerApp: 30 });
    for (let i = 0; i < 30; i++) cache.remember('flood', 'k', `nonce-${i}`.padEnd(16, '-'), T + WINDOW, T);
    expect(thrown(() => cache.remember('flood', 'k', 'one-more-nonce-xx', T + WINDOW, T))).toMatchObject({ code: 42910 });
    expect(cache.remember('quiet', 'k', 'one-more-nonce-xx', T + WINDOW, T)).toBe(true);
    expect(cache.heldBy('flood')).toBe(30);
  });

  it('entries are forgotten once their time has passed, never before, freeing room and the app share', () => {
    const cache = new NonceCache({ maxTokenNonces: 3, maxTokenNoncesPerApp: 3 });
    cache.remember('a', 'k', 'first-nonce-xxxxx', T + 1000, T);
    cache.remember('a', 'k', 'second-nonce-xxxx', T + 2000, T);
    cache.remember('a', 'k', 'third-nonce-xxxxx', T + 3000, T);
    expect(thrown(() => cache.remember('a', 'k', 'fourth-nonce-xxxx', T + 4000, T + 999))).toMatchObject({ code: 42910 });
    // At its forget time the first goes, and only it.
    expect(cache.remember('a', 'k', 'fourth-nonce-xxxx', T + 4000, T + 1000)).toBe(true);
    expect(cache.remember('a', 'k', 'second-nonce-xxxx', T + 4000, T + 1000)).toBe(false);
    expect(cache.heldBy('a')).toBe(3);
    expect(cache.remember('a', 'k', 'first-nonce-xxxxx', T + 5000, T + 5000)).toBe(true);
    expect(cache.size).toBe(1);
  });

  it('an entry whose forget time is earlier than an older entry\'s is kept until that one goes (insertion order is expiry order)', () => {
    const cache = new NonceCache({ maxTokenNonces: 10, maxTokenNoncesPerApp: 10 });
    cache.remember('a', 'k', 'late-nonce-xxxxxx', T + 20 * 60_000, T); // a timestamp 10 minutes ahead
    cache.remember('a', 'k', 'early-nonce-xxxxx', T + 10 * 60_000, T);
    // Past the early entry's own time it is still remembered, so a replay is still refused.
    expect(cache.remember('a', 'k', 'early-nonce-xxxxx', T + 30 * 60_000, T + 15 * 60_000)).toBe(false);
    expect(cache.remember('a', 'k', 'early-nonce-xxxxx', T + 30 * 60_000, T + 20 * 60_000)).toBe(true);
  });

  it('a long nonce is kept as a fixed-size digest', () => {
    const cache = new NonceCache({ maxTokenNonces: 10, maxTokenNoncesPerApp: 10 });
    const long = 'x'.repeat(100_000);
    expect(cache.remember('a', 'k', long, T + WINDOW, T)).toBe(true);
    expect(cache.remember('a', 'k', long, T + WINDOW, T)).toBe(false);
    expect(cache.remember('a', 'k', `${long}y`, T + WINDOW, T)).toBe(true);
    const ids = [...(cache as unknown as { entries: Map<string, number> }).entries.keys()];
    expect(Math.max(...ids.map((id) => id.length))).toBeLessThan(40);
  });
});
