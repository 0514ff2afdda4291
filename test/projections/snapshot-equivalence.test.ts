// A restored projection equals the one built from the log (README: A bounded start): for any
// sequence of events and any point at which a snapshot is taken, the state of a projection that
// applied the whole log equals that of one restored from the snapshot that then applied only the
// records after it (the records its consumer would get, from the positions start() returns).
// Property-style, with fast-check: presence (the member set) and channels (activity, occupancy,
// and what announce() says at each call, its own lifecycle messages read back as the log holds them).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { SnapshotStore } from '../../projections/snapshots.js';
import { PresenceProjection, type PresenceSnapshot } from '../../projections/presence/presence-projection.js';
import { SqliteHistoryStore } from '../../projections/history/sqlite-history-store.js';
import { ChannelsProjection } from '../../projections/channels/channels-projection.js';
import type { Announcement } from '../../projections/channels/channel-state.js';
import { LIFECYCLE_CHANNEL } from '../../src/domain/channel.js';
import type { ChannelsSnapshot } from '../../projections/channels/channels-snapshot.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Checkpoint, type LogRecord, type Topic } from '../../src/log/port.js';
import { Flag } from '../../src/realtime/protocol.js';

const T0 = Date.UTC(2030, 0, 1);
const silent = pino({ level: 'silent' });

/** Assigns offsets per topic and partition, as a log would. */
class Records {
  private readonly next = new Map<string, number>();
  make(topic: Topic, partition: number, timestamp: number, event: LogEvent): LogRecord {
    const k = `${topic}/${partition}`;
    const offset = this.next.get(k) ?? 0;
    this.next.set(k, offset + 1);
    return { topic, partition, offset, timestamp, key: 'k', value: encodeEvent(event) };
  }
}

const delivered = (r: LogRecord, from: Map<Topic, Checkpoint>): boolean => r.offset >= (from.get(r.topic as Topic)?.get(r.partition) ?? 0);

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'cm-snap-eq-'));
}

function snapshotStore(dir: string): SnapshotStore {
  return new SnapshotStore({ dir: join(dir, 'snapshots'), logId: 'test', log: { endOffsets: async () => new Map([[0, 1e9], [1, 1e9]]) }, logger: silent });
}

const channelNames = ['c0', 'c1', 'c2'];
const presenceOp = fc.record({
  channel: fc.constantFrom(...channelNames),
  clientId: fc.constantFrom('a', 'b', 'c', undefined),
  connectionId: fc.constantFrom('k0', 'k1', 'k2'),
  action: fc.constantFrom('enter', 'enter', 'update', 'leave', 'drop'),
  data: fc.option(fc.oneof(fc.string({ maxLength: 8 }), fc.uint8Array({ maxLength: 4 })), { nil: undefined }),
  dt: fc.integer({ min: 0, max: 3000 }),
});

/** Sorted, so two member sets compare by content (a Map's order is not part of the state). */
const normalPresence = (s: PresenceSnapshot): unknown =>
  s.channels.map(([k, ms]) => [k, [...ms].sort((a, b) => (`${a.clientId}/${a.connectionId}` < `${b.clientId}/${b.connectionId}` ? -1 : 1))]).sort((a, b) => ((a[0] as string) < (b[0] as string) ? -1 : 1));

describe('presence: restored from a snapshot equals rebuilt from the log', () => {
  it('for any presence churn and any snapshot point, the member set, its counts and its queries are equal', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(presenceOp, { minLength: 1, maxLength: 60 }), fc.nat(), async (ops, cutSeed) => {
        const dir = tempDir();
        try {
          const recs = new Records();
          let ts = T0;
          const records = ops.map((op, i) => {
            // At least a second apart: each record leaves a mark where presence history can resume.
            ts += 1000 + op.dt;
            const partition = channelNames.indexOf(op.channel) % 2;
            return recs.make(Topics.presence, partition, ts, {
              type: 'presence.changed',
              appId: 'app',
              channel: op.channel,
              event: { action: op.action as 'enter', id: `p${i}`, timestamp: ts, clientId: op.clientId, connectionId: op.connectionId, instanceId: 'i0', data: op.data },
            });
          });
          const cut = cutSeed % (records.length + 1);
          // Long after the records: a restart's history window holds none of them.
          const clock = { now: () => ts + 3600_000 };
          const options = (db: string) => ({ store: new SqliteHistoryStore(join(dir, db), 'presence-history', 'presence'), clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000 });

          const whole = new PresenceProjection(options('whole.db'));
          expect(await whole.start()).toEqual(new Map());
          for (const r of records) whole.apply([r]);

          const before = new PresenceProjection(options('restored.db'));
          await before.start(snapshotStore(dir));
          for (const r of records.slice(0, cut)) before.apply([r]);
          const taken = before.snapshot();
          await before.close();
          await snapshotStore(dir).save(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, taken.positions, taken.state);

          const restored = new PresenceProjection(options('restored.db'));
          const from = await restored.start(snapshotStore(dir));
          // The consumer resumes where the snapshot ends: it gets only the records after it.
          expect(from).toEqual(taken.positions.get(Topics.presence));
          for (const r of records) if (delivered(r, new Map([[Topics.presence, from]]))) restored.apply([r]);

          expect(normalPresence(restored.snapshot().state)).toEqual(normalPresence(whole.snapshot().state));
          expect(restored.snapshot().positions).toEqual(whole.snapshot().positions);
          expect(restored.memberCount()).toBe(whole.memberCount());
          expect(restored.memberCount('app')).toBe(whole.memberCount('app'));
          for (const channel of channelNames) {
            for (const q of [{}, { clientId: 'a' }, { connectionId: 'k1' }, { clientId: 'b', connectionId: 'k2' }]) {
              const query = { appId: 'app', channel, limit: 100, ...q };
              expect(restored.query(query)).toEqual(whole.query(query));
            }
          }
          await whole.close();
          await restored.close();
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe('presence: a restart inside the history window', () => {
  it('passes over a snapshot newer than where presence history resumes for an older one, so the window holds the same entries as a full replay', async () => {
    const dir = tempDir();
    try {
      // One change a second on one channel: even records enter (with data), odd ones leave
      // without data (a leave carries the member's last data: presence history needs the member set).
      const recs = new Records();
      const records = [...Array(30).keys()].map((i) =>
        recs.make(Topics.presence, 0, T0 + i * 1000, {
          type: 'presence.changed',
          appId: 'app',
          channel: 'c0',
          event: i % 2 === 0 ? { action: 'enter', id: `p${i}`, timestamp: T0 + i * 1000, clientId: `m${i % 6}`, connectionId: 'k', data: `d${i}` } : { action: 'leave', id: `p${i}`, timestamp: T0 + i * 1000, clientId: `m${(i - 1) % 6}`, connectionId: 'k' },
        }),
      );
      let now = T0 + 30 * 1000;
      const clock = { now: () => now };
      const options = (db: string) => ({ store: new SqliteHistoryStore(join(dir, db), 'presence-history', 'presence'), clock, tailMs: 120_000, retentionOf: () => undefined, flushIntervalMs: 60_000 });
      const store = snapshotStore(dir);
      const running = new PresenceProjection(options('restored.db'));
      await running.start(store);
      for (const [i, r] of records.entries()) {
        running.apply([r]);
        // Snapshots after records 10 and 25, as the schedule would take them.
        if (i === 9 || i === 24) {
          const taken = running.snapshot();
          await store.save(PresenceProjection.snapshotName, PresenceProjection.snapshotVersion, taken.positions, taken.state);
        }
      }
      await running.close();
      // The restart: the history window (2 minutes) begins at record 20.
      now = T0 + 20 * 1000 + 120_000;
      const whole = new PresenceProjection(options('whole.db'));
      await whole.start();
      for (const r of records) whole.apply([r]);
      const restored = new PresenceProjection(options('restored.db'));
      const from = await restored.start(store);
      // Presence history resumes at record 20: the snapshot at 25 is too new, the one at 10 serves.
      expect(from).toEqual(new Map([[0, 10]]));
      for (const r of records) if (r.offset >= 10) restored.apply([r]);
      const query = { appId: 'app', channel: 'c0', start: 0, end: now, limit: 100, direction: 'forwards' as const };
      const window = await restored.historyQuery(query);
      expect(window.map((e) => e.message.id)).toEqual(records.slice(20).map((_, i) => `p${20 + i}`));
      expect(window.filter((e) => e.message.action === 3).every((e) => typeof e.message.data === 'string')).toBe(true);
      expect(window).toEqual(await whole.historyQuery(query));
      expect(normalPresence(restored.snapshot().state)).toEqual(normalPresence(whole.snapshot().state));
      await whole.close();
      await restored.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const channelOp = fc.oneof(
  fc.record({ kind: fc.constant('presence' as const), channel: fc.constantFrom(...channelNames), clientId: fc.constantFrom('a', 'b'), connectionId: fc.constantFrom('k0', 'k1', 'k2'), action: fc.constantFrom('enter', 'leave', 'drop'), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('attach' as const), channel: fc.constantFrom(...channelNames), connectionId: fc.constantFrom('k0', 'k1', 'k2'), instanceId: fc.constantFrom('i0', 'i1'), modes: fc.constantFrom(Flag.PUBLISH, Flag.SUBSCRIBE | Flag.PRESENCE, Flag.PRESENCE_SUBSCRIBE), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('detach' as const), channel: fc.constantFrom(...channelNames), connectionId: fc.constantFrom('k0', 'k1', 'k2'), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('closed' as const), connectionId: fc.constantFrom('k0', 'k1', 'k2'), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('gone' as const), instanceId: fc.constantFrom('i0', 'i1'), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('publish' as const), channel: fc.constantFrom(...channelNames), dt: fc.integer({ min: 0, max: 3000 }) }),
  fc.record({ kind: fc.constant('announce' as const), dt: fc.integer({ min: 0, max: 8000 }) }),
);

type Step = { record: LogRecord } | { announce: number; expected: Announcement[] };

/**
 * Announcements in order per channel: announce() promises the order within a channel, not across
 * channels (a restored projection visits its channels in another order).
 */
const perChannel = (list: Announcement[]): Announcement[] =>
  list
    .map((a, i) => ({ a, i, key: `${a.appId}\u0000${(JSON.parse(String(a.message.data)) as { name: string }).name}` }))
    .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.i - y.i))
    .map((x) => x.a);

const normalChannels = (s: ChannelsSnapshot): unknown => ({
  channels: s.channels.map((c) => ({ ...c, attachments: [...c.attachments].sort(), members: [...c.members].sort() })).sort((a, b) => (a.channel < b.channel ? -1 : 1)),
  announced: [...s.announced].sort(),
});

describe('channels: restored from a snapshot equals rebuilt from the log', () => {
  it('for any activity and any snapshot point, the state is equal and every later announce() says the same', async () => {
    const settings = { idleMs: 5_000, windowMs: 20_000, occupancyThrottleMs: 1_000, region: 'local' };
    await fc.assert(
      fc.asyncProperty(fc.array(channelOp, { minLength: 1, maxLength: 80 }), fc.nat(), async (ops, cutSeed) => {
        const dir = tempDir();
        try {
          // The log as the projection that never restarts makes it: its announcements are
          // appended to the metachannel and read back, as the announcer's are.
          const recs = new Records();
          const whole = new ChannelsProjection(settings);
          const steps: Step[] = [];
          let ts = T0;
          let now = T0;
          const add = (topic: Topic, partition: number, event: LogEvent): void => {
            const record = recs.make(topic, partition, ts, event);
            steps.push({ record });
            whole.apply([record]);
          };
          ops.forEach((op, i) => {
            ts = Math.max(ts, now) + op.dt;
            switch (op.kind) {
              case 'presence':
                return add(Topics.presence, 0, { type: 'presence.changed', appId: 'app', channel: op.channel, event: { action: op.action, id: `p${i}`, timestamp: ts, clientId: op.clientId, connectionId: op.connectionId } });
              case 'attach':
                return add(Topics.connections, 0, { type: 'channel.attached', appId: 'app', channel: op.channel, connectionId: op.connectionId, instanceId: op.instanceId, modes: op.modes });
              case 'detach':
                return add(Topics.connections, 0, { type: 'channel.detached', appId: 'app', channel: op.channel, connectionId: op.connectionId });
              case 'closed':
                return add(Topics.connections, 0, { type: 'connection.closed', appId: 'app', connectionId: op.connectionId, instanceId: 'i0' });
              case 'gone':
                return add(Topics.connections, 0, { type: 'instance.gone', instanceId: op.instanceId });
              case 'publish':
                return add(Topics.messages, 1, { type: 'messages.published', appId: 'app', channel: op.channel, transport: 'rest', messages: [{ id: `m${i}`, timestamp: ts, data: 'x' }] });
              case 'announce': {
                now = ts;
                const expected = whole.announce(now);
                steps.push({ announce: now, expected });
                if (expected.length > 0) {
                  add(Topics.messages, 0, { type: 'messages.published', appId: 'app', channel: LIFECYCLE_CHANNEL, transport: 'rest', messages: expected.map((a) => ({ ...a.message, timestamp: now })) });
                }
                return;
              }
            }
          });

          const cut = cutSeed % (steps.length + 1);
          const before = new ChannelsProjection(settings);
          await before.start(undefined, new Map());
          for (const step of steps.slice(0, cut)) {
            if ('record' in step) before.apply([step.record]);
            else before.announce(step.announce);
          }
          const taken = before.snapshot();
          await snapshotStore(dir).save(ChannelsProjection.snapshotName, ChannelsProjection.snapshotVersion, taken.positions, taken.state);

          const restored = new ChannelsProjection(settings);
          const from = await restored.start(snapshotStore(dir), new Map());
          expect(from).toEqual(taken.positions);
          for (const step of steps.slice(cut)) {
            if ('record' in step) {
              expect(delivered(step.record, from)).toBe(true);
              restored.apply([step.record]);
            } else {
              expect(perChannel(restored.announce(step.announce))).toEqual(perChannel(step.expected));
            }
          }
          expect(normalChannels(restored.snapshot().state)).toEqual(normalChannels(whole.snapshot().state));
          const end = Math.max(ts, now) + 1;
          for (const channel of channelNames) expect(restored.details('app', channel, end)).toEqual(whole.details('app', channel, end));
          expect(restored.list('app', { prefix: '', limit: 10 }, end)).toEqual(whole.list('app', { prefix: '', limit: 10 }, end));
          expect(perChannel(restored.announce(end + 60_000))).toEqual(perChannel(whole.announce(end + 60_000)));
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }),
      { numRuns: 150 },
    );
  });
});
