// The flood cool-down's table (src/realtime/flood-cooldown.ts): what it remembers, for how long, and
// how much; and what an origin is made of.
import { describe, expect, it } from 'vitest';
import { FloodCooldown, originOf } from '../../src/realtime/flood-cooldown.js';
import type { Credentials } from '../../src/auth/credentials.js';

const credentials = (keyName: string, method: 'basic' | 'token', clientId?: string): Credentials => ({ keyName, method, clientId, app: {} as Credentials['app'], capability: {} as Credentials['capability'] });

describe('flood cool-down', () => {
  it('an origin cut off cools for REALTIME_FLOOD_COOLDOWN_MS after its last cut, then not', () => {
    let now = 1_000;
    const cooldown = new FloodCooldown(30_000, 100, () => now);
    expect(cooldown.cooling('a')).toBe(false);
    cooldown.cutOff('a');
    now += 29_999;
    expect(cooldown.cooling('a')).toBe(true);
    expect(cooldown.cooling('b')).toBe(false);
    cooldown.cutOff('a');
    now += 29_999;
    expect(cooldown.cooling('a')).toBe(true);
    now += 1;
    expect(cooldown.cooling('a')).toBe(false);
  });

  it('0 turns it off', () => {
    const cooldown = new FloodCooldown(0, 100, () => 5);
    cooldown.cutOff('a');
    expect(cooldown.cooling('a')).toBe(false);
    expect(cooldown.size).toBe(0);
  });

  it('holds at most its bound of origins, however many are cut within the cool-down', () => {
    const now = 1_000;
    const cooldown = new FloodCooldown(30_000, 1_000, () => now);
    for (let i = 0; i < 100_000; i++) {
      cooldown.cutOff(`origin-${i}`);
      expect(cooldown.size).toBeLessThanOrEqual(1_000);
    }
    // The most recent are still remembered.
    expect(cooldown.cooling('origin-99999')).toBe(true);
  });

  it("an origin is the key and the address, and a token's fixed clientId; a clientId a key asks for is not part of it", () => {
    const base = originOf({ credentials: credentials('app.k1', 'basic'), address: '10.0.0.1' });
    expect(originOf({ credentials: credentials('app.k1', 'basic', 'chosen'), address: '10.0.0.1' })).toBe(base);
    expect(originOf({ credentials: credentials('app.k1', 'token', '*'), address: '10.0.0.1' })).toBe(base);
    expect(originOf({ credentials: credentials('app.k1', 'token', 'fixed'), address: '10.0.0.1' })).not.toBe(base);
    expect(originOf({ credentials: credentials('app.k1', 'basic'), address: '10.0.0.2' })).not.toBe(base);
    expect(originOf({ credentials: credentials('app.k2', 'basic'), address: '10.0.0.1' })).not.toBe(base);
    expect(originOf({ credentials: credentials('app.k1', 'token', 'x'.repeat(100_000)), address: '10.0.0.1' })).toHaveLength(24);
  });
});
