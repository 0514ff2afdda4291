// Issue 26, item 5: in-band occupancy's pacing (src/realtime/occupancy.ts). The figures come from
// the channels projection, which tells of changes after each batch; an attachment that asked for
// them gets the current figures at once, then at most one message per channel per interval, with
// the figures as they are when it is sent, and none when they did not change.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { InbandOccupancy, type OccupancySource } from '../../src/realtime/occupancy.js';
import type { Attachment } from '../../src/realtime/attachment.js';
import type { StoredMessage } from '../../src/domain/message.js';
import { emptyMetrics } from '../../projections/channels/channel-state.js';

const INTERVAL = 1000;

describe('in-band occupancy pacing', () => {
  let figures = emptyMetrics();
  let listener: ((changed: { appId: string; channel: string }[]) => void) | undefined;
  const source: OccupancySource = {
    metrics: () => ({ ...figures }),
    onOccupancyChanged: (l) => {
      listener = l;
      return () => (listener = undefined);
    },
  };
  let sent: { to: string; message: StoredMessage }[];
  let occupancy: InbandOccupancy;
  const attachment = (name: string, category?: 'subscribers'): Attachment =>
    ({ conn: { appId: 'app' }, channel: name, base: 'room', occupancy: category ? { category } : {} }) as unknown as Attachment;
  const change = (): void => listener?.([{ appId: 'app', channel: 'room' }]);
  const connectionsSent = (): unknown[] => sent.map((s) => (s.message.data as { metrics: { connections?: number } }).metrics.connections);

  beforeEach(() => {
    vi.useFakeTimers();
    figures = emptyMetrics();
    sent = [];
    occupancy = new InbandOccupancy({
      source,
      clock: { now: () => Date.now() },
      logger: pino({ level: 'silent' }),
      intervalMs: INTERVAL,
      instanceId: 'i1',
      send: (a, message) => sent.push({ to: a.channel, message }),
    });
    occupancy.start();
  });
  afterEach(() => {
    occupancy.close();
    vi.useRealTimers();
  });

  it('sends the figures on attach, a change at once when none was sent within the interval, then one per interval with the latest figures', () => {
    const a = attachment('room');
    occupancy.attached(a);
    expect(sent.map((s) => s.message.name)).toEqual(['[meta]occupancy']);
    figures.connections = 1;
    change();
    expect(connectionsSent()).toEqual([0, 1]);
    figures.connections = 2;
    change();
    figures.connections = 3;
    change();
    expect(connectionsSent()).toEqual([0, 1]);
    vi.advanceTimersByTime(INTERVAL);
    expect(connectionsSent()).toEqual([0, 1, 3]);
    // A change that changes nothing in the figures sends nothing.
    vi.advanceTimersByTime(INTERVAL);
    change();
    vi.advanceTimersByTime(INTERVAL);
    expect(connectionsSent()).toEqual([0, 1, 3]);
  });

  it('a category attachment gets that figure alone; once every attachment that asked is gone, nothing is sent', () => {
    const category = attachment('[?occupancy=metrics.subscribers]room', 'subscribers');
    const plain = attachment('room');
    occupancy.attached(category);
    occupancy.attached(plain);
    expect(sent[0].message.data).toEqual({ metrics: { subscribers: 0 } });
    occupancy.detached(plain);
    sent = [];
    figures.subscribers = 4;
    change();
    vi.advanceTimersByTime(INTERVAL * 2);
    expect(sent.map((s) => [s.to, s.message.data])).toEqual([['[?occupancy=metrics.subscribers]room', { metrics: { subscribers: 4 } }]]);
    occupancy.detached(category);
    figures.subscribers = 5;
    change();
    vi.advanceTimersByTime(INTERVAL * 2);
    expect(sent.length).toBe(1);
  });
});
