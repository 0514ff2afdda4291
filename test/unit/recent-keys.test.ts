// RecentKeys (src/recent-keys.ts): what the publisher's idempotency memory and the gateway's
// ended connections keep, in bounded memory and constant time.
import { describe, expect, it } from 'vitest';
import { RecentKeys } from '../../src/recent-keys.js';

describe('RecentKeys', () => {
  it('keeps a key at least a window while fewer than half of max come in a window', () => {
    let now = 0;
    const keys = new RecentKeys<number>(100, 1000, () => now);
    keys.set('a', 1);
    now = 999;
    expect(keys.get('a')).toBe(1);
    now = 1000; // the window rolls: 'a' is in the older generation, still there
    keys.set('b', 2);
    expect(keys.get('a')).toBe(1);
    now = 2000; // rolls again: 'a' goes, 'b' stays
    expect(keys.has('a')).toBe(false);
    expect(keys.get('b')).toBe(2);
  });

  it('holds at most max keys, the newest, however many come', () => {
    const keys = new RecentKeys<true>(1000, Number.MAX_SAFE_INTEGER, () => 0);
    for (let i = 0; i < 100_000; i++) keys.set(`k${i}`, true);
    expect(keys.size).toBeLessThanOrEqual(1000);
    expect(keys.size).toBeGreaterThanOrEqual(500);
    expect(keys.has('k99999')).toBe(true);
    expect(keys.has('k99500')).toBe(true);
    expect(keys.has('k0')).toBe(false);
  });

  it('set moves a key to the newer generation; delete removes it from both', () => {
    let now = 0;
    const keys = new RecentKeys<string>(100, 1000, () => now);
    keys.set('a', 'old');
    now = 1000;
    keys.set('a', 'new');
    now = 2000;
    expect(keys.get('a')).toBe('new');
    keys.delete('a');
    expect(keys.has('a')).toBe(false);
  });
});
