// Backlog replays read from the log a few at a time (src/realtime/backlog.ts): one connection that
// asks for many (hundreds of ATTACHes far behind) waits behind its own, not in front of every other
// connection's resume.
import { describe, expect, it } from 'vitest';
import { FairSlots } from '../../src/realtime/backlog.js';

describe('backlog replay slots', () => {
  it('one a connection at a time, connections served in turn: a late connection goes before a busy one\'s queue', async () => {
    const slots = new FairSlots(2);
    const busy = {};
    const other = {};
    const late = {};
    const order: string[] = [];
    const run = (owner: object, name: string) => slots.take(owner).then(() => void order.push(name));
    const taken = [run(busy, 'busy-1'), run(busy, 'busy-2'), run(busy, 'busy-3'), run(other, 'other-1'), run(late, 'late-1')];
    await Promise.resolve();
    await Promise.resolve();
    // Two slots: busy's first, and other's (busy holds one already).
    expect(order).toEqual(['busy-1', 'other-1']);
    slots.give(busy); // busy's queue was first in turn: its second, and busy goes to the back
    await Promise.resolve();
    slots.give(other); // late's turn before busy's third
    await Promise.resolve();
    slots.give(late); // busy's third waits until busy gives its second back: one a connection
    await Promise.resolve();
    expect(order).toEqual(['busy-1', 'other-1', 'busy-2', 'late-1']);
    slots.give(busy);
    await Promise.all(taken);
    expect(order).toEqual(['busy-1', 'other-1', 'busy-2', 'late-1', 'busy-3']);
  });
});
