// A presence rule learns who is present where it starts by reading the presence topic before it
// (projections/webhooks/presence-members.ts): every app's records, from the beginning. On the
// embedded log a read answers at once, so that catch-up must hand the event loop back between
// pages: 200,000 presence records of other apps held it (every app, every connection) for 0.5 s
// at each presence rule an app created.
import { afterEach, describe, expect, it } from 'vitest';
import { Topics } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import { PresenceMembers } from '../../projections/webhooks/presence-members.js';
import { startTestService, testServiceMode, type TestService } from '../helpers/service.js';

const open: TestService[] = [];
afterEach(async () => {
  for (const ts of open.splice(0)) await ts.close();
});

describe.runIf(testServiceMode === 'embedded')('a presence rule catching up with who is present (embedded log)', () => {
  it('hands the event loop back between pages while it reads, and knows the members of its own app only', { timeout: 120_000 }, async () => {
    const ts = await startTestService();
    open.push(ts);
    const log = ts.service.log;
    const change = (appId: string, i: number) => ({
      key: channelKey(appId, `c${i % 100}`),
      timestamp: Date.now(),
      value: encodeEvent({ type: 'presence.changed', appId, channel: `c${i % 100}`, event: { action: 'enter', id: `p${i}`, timestamp: Date.now(), clientId: `u${i}`, connectionId: `conn${i}` } }),
    });
    for (let i = 0; i < 20_000; i += 5_000) await log.append(Topics.presence, Array.from({ length: 5_000 }, (_, j) => change('other', i + j)));
    await log.append(Topics.presence, [change('mine', 1)]);

    const members = new PresenceMembers('mine', () => true);
    let turns = 0;
    let reading = true;
    const turn = (): void => {
      turns++;
      if (reading) setImmediate(turn);
    };
    setImmediate(turn);
    const ends = await log.endOffsets(Topics.presence);
    turns = 0;
    await members.catchUp(log, Topics.presence, ends);
    reading = false;
    expect(turns).toBeGreaterThan(0);
    // Its own app's member is known (a second enter of it is an update), another app's is not.
    const [partition] = [...ends.keys()];
    expect(members.apply(partition, 'c1', { action: 'enter', id: 'again', timestamp: Date.now(), clientId: 'u1', connectionId: 'conn1' })).toBe(true);
    expect(members.apply(partition, 'c2', { action: 'enter', id: 'again', timestamp: Date.now(), clientId: 'u2', connectionId: 'conn2' })).toBe(false);
  });
});
