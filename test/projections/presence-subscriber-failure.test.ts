// A subscriber of the presence projection (the realtime gateway's delivery of PRESENCE messages)
// is called inside the projection's apply: one that throws for one channel must not fail the batch,
// which the log would hand again for ever, holding back every app on the partition (in production
// mode, the other projections sharing the topic's consumer too) and re-emitting each earlier
// change of the batch as an update at every retry.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { PresenceAction, PresenceProjection } from '../../projections/presence/presence-projection.js';

const NOW = 1_900_000_000_000;
const clock = { now: () => NOW };

const enter = (offset: number, appId: string, clientId: string): LogRecord => ({
  topic: 'presence',
  partition: 0,
  offset,
  key: `${appId}:room`,
  timestamp: NOW + offset,
  value: encodeEvent({ type: 'presence.changed', appId, channel: 'room', event: { id: `e${offset}`, timestamp: NOW + offset, action: 'enter', clientId, connectionId: `c-${clientId}` } }),
});

describe('presence subscribers that throw', () => {
  let dir: string;
  let store: SqliteHistoryStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'presence-subscriber-'));
    store = new SqliteHistoryStore(join(dir, 'projections.db'));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a subscriber's throw for one app's change is reported, and the batch is applied once: the other apps' changes are told once, as enters", async () => {
    const reported: unknown[] = [];
    const p = new PresenceProjection({ store, clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000, onSubscriberError: (err) => reported.push(err) });
    await p.start();
    const told: [string, string, number][] = [];
    p.onApplied((appId, _channel, messages) => {
      for (const m of messages) told.push([appId, m.clientId!, m.action!]);
    });
    p.onApplied((appId) => {
      if (appId === 'bad') throw new Error('a connection of app bad cannot be sent to');
    });
    const batch = [enter(0, 'good', 'a'), enter(1, 'bad', 'b'), enter(2, 'good', 'c')];
    // The log hands a failed batch again (Subscription): as it would, until it is applied.
    for (let attempt = 0; ; attempt++) {
      try {
        p.apply(batch);
        break;
      } catch (err) {
        if (attempt === 3) throw err;
      }
    }
    // Before: apply threw at the second record, and each retry told a's enter again as an update.
    expect(told).toEqual([
      ['good', 'a', PresenceAction.enter],
      ['bad', 'b', PresenceAction.enter],
      ['good', 'c', PresenceAction.enter],
    ]);
    expect(reported).toHaveLength(1);
    expect(p.memberCount()).toBe(3);
    expect(p.progress.nextOf('presence', 0)).toBe(3);
    await p.close();
  });
});
