import { describe, expect, it, vi } from 'vitest';

// Counts the hashes the channels projection computes (its shortened cursors are sha256 of a name).
const hashes = vi.hoisted(() => ({ count: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const crypto = await importOriginal<typeof import('node:crypto')>();
  return { ...crypto, createHash: (...args: Parameters<typeof crypto.createHash>) => (hashes.count++, crypto.createHash(...args)) };
});

const { ChannelsProjection } = await import('../../projections/channels/channels-projection.js');

const NOW = Date.UTC(2030, 0, 1);
const projection = () => new ChannelsProjection({ idleMs: 60_000, windowMs: 120_000, occupancyThrottleMs: 0, region: 'local' });
/** A cursor as cursorOf makes one for a long name: a mark, 43 characters of hash, the name's first 100 characters. */
const forged = (head: string) => `\u0001${'A'.repeat(43)}${head}`;

describe('GET /channels cursors of names too long for a Link header (README: Channels, Enumeration)', () => {
  it('a forged shortened cursor costs the page, not a hash of every channel of the app', () => {
    const p = projection();
    for (let i = 0; i < 20_000; i++) p.activate('a', `c${String(i).padStart(6, '0')}`, NOW);
    p.list('a', { prefix: '', limit: 10 }, NOW);
    hashes.count = 0;
    const page = p.list('a', { prefix: '', after: forged(''), limit: 10 }, NOW);
    // Unknown: from the names that start like its head (here all of them).
    expect(page.channels[0]).toBe('c000000');
    expect(hashes.count).toBe(0);
  });

  it('a walk over long names with a common head hashes each name once, and visits each once', () => {
    const p = projection();
    const head = 'h'.repeat(700);
    const names = Array.from({ length: 2_000 }, (_, i) => `${head}${String(i).padStart(5, '0')}`);
    for (const n of names) p.activate('a', n, NOW);
    hashes.count = 0;
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const { channels, more } = p.list('a', { prefix: '', after, limit: 100 }, NOW);
      seen.push(...channels);
      if (!more) break;
      after = ChannelsProjection.cursorOf(channels[channels.length - 1]);
      expect(after.length).toBeLessThan(200);
    }
    expect(seen).toEqual(names);
    // Each name's hash once (the index keeps it), and one per page for the next cursor.
    expect(hashes.count).toBeLessThanOrEqual(names.length + 20);
  });
});
