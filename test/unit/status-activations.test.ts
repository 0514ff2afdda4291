import { describe, expect, it } from 'vitest';
import { StatusActivations } from '../../projections/channels/status-activations.js';
import { ChannelsProjection } from '../../projections/channels/channels-projection.js';

const T0 = Date.UTC(2030, 0, 1);
const IDLE = 10_000;

describe('channels status requests activate (spec: Channel status), in memory and bounded', () => {
  it('active for the idle time after the last request', () => {
    const a = new StatusActivations(IDLE, 100);
    a.add('app', 'c', T0);
    expect(a.isActive('app', 'c', T0 + IDLE - 1)).toBe(true);
    a.add('app', 'c', T0 + 5_000);
    expect(a.expire(T0 + IDLE)).toEqual([]);
    expect(a.expire(T0 + 5_000 + IDLE)).toEqual([['app', 'c']]);
    expect(a.isActive('app', 'c', T0 + 5_000 + IDLE)).toBe(false);
    expect(a.size).toBe(0);
  });

  it('holds at most max channels, a quarter of them for one app: the oldest activation ends early', () => {
    const a = new StatusActivations(IDLE, 8);
    const dropped = [];
    for (let i = 0; i < 5; i++) dropped.push(...a.add('flood', `f${i}`, T0 + i));
    expect(dropped).toEqual([['flood', 'f0'], ['flood', 'f1'], ['flood', 'f2']]);
    for (let i = 0; i < 2; i++) for (const app of ['x', 'y', 'z']) a.add(app, `c${i}`, T0 + 10 + i);
    expect(a.size).toBe(8);
    // One more of an app at its share: its own oldest goes.
    expect(a.add('z', 'c2', T0 + 20)).toEqual([['z', 'c0']]);
    // One more over the total: an app holding the most gives up its oldest.
    expect(a.add('w', 'c0', T0 + 21)).toEqual([['flood', 'f3']]);
    expect(a.size).toBe(8);
    expect(a.isActive('x', 'c0', T0 + 20)).toBe(true);
  });

  it('the projection lists a requested channel while active and drops it after (GET /channels)', () => {
    const p = new ChannelsProjection({ idleMs: IDLE, windowMs: 120_000, occupancyThrottleMs: 0, region: 'local', maxStatusActivations: 4 });
    p.activate('a', 'r1', T0);
    p.activate('a', '[meta]channel.lifecycle', T0);
    expect(p.list('a', { prefix: '', limit: 10 }, T0).channels).toEqual(['r1']);
    expect(p.details('a', 'r1', T0).status.isActive).toBe(true);
    // Nothing to announce: a status request is on no log.
    expect(p.announce(T0)).toEqual([]);
    expect(p.announce(T0 + IDLE)).toEqual([]);
    expect(p.list('a', { prefix: '', limit: 10 }, T0 + IDLE).channels).toEqual([]);
    expect(p.size).toBe(0);
  });
});
