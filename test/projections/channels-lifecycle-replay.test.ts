import { describe, expect, it } from 'vitest';
import { ChannelsProjection } from '../../projections/channels/channels-projection.js';
import { LIFECYCLE_CHANNEL } from '../../src/domain/channel.js';
import { channelKey } from '../../src/log/partitioner.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { Mode } from '../../src/domain/modes.js';
import { rng } from '../helpers/stats-log.js';

// Lifecycle events are derived from the log and appended to it: a crash of the projection at any
// point, then a replay of the log, must announce what is missing and nothing twice (issue 12:
// "give each event an id derived from the log position that caused it ... Test it by crashing
// the projection mid-stream").

const T0 = Date.UTC(2030, 0, 15, 10, 0, 0);
const OPTIONS = { idleMs: 2_000, windowMs: 120_000, occupancyThrottleMs: 500, region: 'local' };
const APP = 'app0';
const CHANNELS = ['a', 'b', 'c', 'd', 'ns:e'];

type Step = { at: number; event: LogEvent; topic: string };

/** A random run of uses of a few channels: publishes, presence, attaches, activations and idle gaps. */
function schedule(seed: number, n: number): Step[] {
  const random = rng(seed);
  const steps: Step[] = [];
  let at = T0;
  const attached = new Map<string, Set<string>>();
  for (let i = 0; i < n; i++) {
    at += random() < 0.1 ? 3_000 + Math.floor(random() * 3_000) : Math.floor(random() * 400);
    const channel = CHANNELS[Math.floor(random() * CHANNELS.length)];
    const on = attached.get(channel) ?? new Set<string>();
    attached.set(channel, on);
    const pick = random();
    const connectionId = `conn${Math.floor(random() * 3)}`;
    if (pick < 0.35) {
      steps.push({ at, topic: Topics.messages, event: { type: 'messages.published', appId: APP, channel, transport: 'rest', messages: [{ id: `m${i}`, timestamp: at, data: 'x' }] } });
    } else if (pick < 0.5) {
      steps.push({ at, topic: Topics.connections, event: { type: 'channel.activated', appId: APP, channel } });
    } else if (pick < 0.7) {
      on.add(connectionId);
      steps.push({ at, topic: Topics.connections, event: { type: 'channel.attached', appId: APP, channel, connectionId, instanceId: 'i1', modes: Mode.SUBSCRIBE | (random() < 0.5 ? Mode.PUBLISH : 0) } });
    } else if (pick < 0.85) {
      on.delete(connectionId);
      steps.push({ at, topic: Topics.connections, event: { type: 'channel.detached', appId: APP, channel, connectionId } });
    } else {
      const action = random() < 0.6 ? 'enter' : 'leave';
      steps.push({ at, topic: Topics.presence, event: { type: 'presence.changed', appId: APP, channel, event: { action, id: `p${i}`, timestamp: at, clientId: 'c1', connectionId } } });
    }
  }
  // Everything ends: each attachment detaches, and time passes the idle time.
  for (const [channel, on] of attached) for (const connectionId of on) steps.push({ at: (at += 10), topic: Topics.connections, event: { type: 'channel.detached', appId: APP, channel, connectionId } });
  for (const channel of CHANNELS) steps.push({ at: (at += 10), topic: Topics.presence, event: { type: 'presence.changed', appId: APP, channel, event: { action: 'leave', id: `end-${channel}`, timestamp: at, clientId: 'c1', connectionId: 'conn0' } } });
  return steps;
}

/** The log: records of every topic in the order they were appended (one partition each). */
class SimulatedLog {
  readonly records: LogRecord[] = [];
  private readonly offsets = new Map<string, number>();
  readonly lifecycleIds = new Set<string>();
  /** Announcements the projection made whose id the log already held (the publisher would drop them). */
  repeats = 0;

  append(topic: string, event: LogEvent, timestamp: number): void {
    const offset = this.offsets.get(topic) ?? 0;
    this.offsets.set(topic, offset + 1);
    const key = 'channel' in event ? channelKey(event.appId, event.channel) : 'x';
    this.records.push({ topic, partition: 0, offset, key, timestamp, value: encodeEvent(event) });
  }

  announce(projection: ChannelsProjection, now: number): void {
    const due = projection.announce(now);
    const fresh = due.filter((a) => {
      if (this.lifecycleIds.has(a.message.id)) {
        this.repeats++;
        return false;
      }
      return true;
    });
    if (fresh.length === 0) return;
    for (const a of fresh) {
      this.lifecycleIds.add(a.message.id);
      a.message.timestamp = now;
    }
    this.append(Topics.messages, { type: 'messages.published', appId: APP, channel: LIFECYCLE_CHANNEL, transport: 'rest', messages: fresh.map((a) => a.message) }, now);
  }

  lifecycle(): { id: string; name: string; channel: string }[] {
    const out: { id: string; name: string; channel: string }[] = [];
    for (const r of this.records) {
      const e = decode(r);
      if (e.type === 'messages.published' && e.channel === LIFECYCLE_CHANNEL) {
        for (const m of e.messages) out.push({ id: m.id, name: m.name!, channel: JSON.parse(m.data as string).channelId });
      }
    }
    return out;
  }
}

import { decodeEvent } from '../../src/log/event-codec.js';
const decode = (r: LogRecord): LogEvent => decodeEvent(r.value);

/**
 * One life of the projection: reads the log from `read` in batches, announcing after each step of
 * the schedule, until the schedule ends or `crashAt` steps were taken. Returns the step reached.
 */
function live(log: SimulatedLog, projection: ChannelsProjection, steps: Step[], from: number, crashAt: number, batch: () => number): number {
  let read = 0;
  const catchUp = (): void => {
    while (read < log.records.length) {
      const n = Math.min(batch(), log.records.length - read);
      projection.apply(log.records.slice(read, read + n));
      read += n;
    }
  };
  catchUp(); // a restart replays the whole log before it announces anything
  let i = from;
  for (; i < steps.length && i < crashAt; i++) {
    log.append(steps[i].topic, steps[i].event, steps[i].at);
    catchUp();
    log.announce(projection, steps[i].at);
    catchUp(); // its own announcements come back through the log
  }
  if (i === steps.length) {
    const end = steps[steps.length - 1].at + OPTIONS.idleMs + 1;
    log.announce(projection, end);
    catchUp();
    log.announce(projection, end + OPTIONS.occupancyThrottleMs);
    catchUp();
  }
  return i;
}

describe('channel lifecycle replay safety (issue 12: never announced twice, never lost)', () => {
  it('a crash at any point, then a replay of the log, gives the same lifecycle events, each once', () => {
    const steps = schedule(11, 400);
    const reference = new SimulatedLog();
    live(reference, new ChannelsProjection(OPTIONS), steps, 0, Infinity, () => 1000);
    const expected = reference.lifecycle();
    const names = new Set(expected.map((e) => e.name));
    expect([...names].sort()).toEqual(['channel.closed', 'channel.occupancy', 'channel.opened', 'channel.region.active', 'channel.region.inactive']);
    expect(expected.filter((e) => e.name === 'channel.opened').length).toBeGreaterThan(5);
    expect(reference.repeats).toBe(0);

    const random = rng(5);
    for (let run = 0; run < 12; run++) {
      const log = new SimulatedLog();
      const batch = () => 1 + Math.floor(random() * 20);
      let at = 0;
      // Several crashes per run, each at a random step.
      for (let life = 0; at < steps.length; life++) {
        const crashAt = life < 3 ? at + 1 + Math.floor(random() * 150) : Infinity;
        at = live(log, new ChannelsProjection(OPTIONS), steps, at, crashAt, batch);
      }
      const got = log.lifecycle();
      expect(log.repeats, `run ${run}: announcements the log already held`).toBe(0);
      expect(got.map((e) => `${e.channel} ${e.name}`).filter((e) => !e.endsWith('occupancy')), `run ${run}`).toEqual(
        expected.map((e) => `${e.channel} ${e.name}`).filter((e) => !e.endsWith('occupancy')),
      );
      expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    }
  });

  it('rebuilding from offset 0 announces nothing the log already holds', () => {
    const steps = schedule(3, 200);
    const log = new SimulatedLog();
    live(log, new ChannelsProjection(OPTIONS), steps, 0, Infinity, () => 50);
    const before = log.lifecycle().length;
    const rebuilt = new ChannelsProjection(OPTIONS);
    rebuilt.apply(log.records);
    expect(rebuilt.announce(steps[steps.length - 1].at + OPTIONS.idleMs + 10)).toEqual([]);
    expect(log.lifecycle().length).toBe(before);
  });

  it('each event carries ChannelDetails for the channel, isActive true when opened and false when closed', () => {
    const steps = schedule(9, 100);
    const log = new SimulatedLog();
    live(log, new ChannelsProjection(OPTIONS), steps, 0, Infinity, () => 10);
    for (const r of log.records) {
      const e = decode(r);
      if (e.type !== 'messages.published' || e.channel !== LIFECYCLE_CHANNEL) continue;
      for (const m of e.messages) {
        const details = JSON.parse(m.data as string);
        expect(m.encoding).toBe('json');
        expect(details).toMatchObject({ channelId: expect.any(String), name: details.channelId, region: 'local', status: { isActive: !['channel.closed', 'channel.region.inactive'].includes(m.name!) } });
      }
    }
  });
});
