import { describe, expect, it } from 'vitest';
import { ChannelsProjection } from '../../projections/channels/channels-projection.js';
import { ChannelIndex } from '../../projections/channels/channel-index.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { Mode } from '../../src/domain/modes.js';

const T0 = Date.UTC(2030, 0, 1);
const IDLE = 10_000;
let offset = 0;
const record = (event: LogEvent, timestamp: number, topic: string = Topics.connections): LogRecord => ({ topic, partition: 0, offset: offset++, key: 'k', timestamp, value: encodeEvent(event) });
const projection = () => new ChannelsProjection({ idleMs: IDLE, windowMs: 120_000, occupancyThrottleMs: 0, region: 'local' });
const attach = (channel: string, connectionId: string, modes: number, instanceId = 'i1'): LogEvent => ({ type: 'channel.attached', appId: 'a', channel, connectionId, instanceId, modes });

describe('channel activity (README: Channel activity)', () => {
  it('a use keeps a channel active for the idle time after it, judged by record times', () => {
    const p = projection();
    p.apply([record({ type: 'messages.published', appId: 'a', channel: 'c', transport: 'rest', messages: [{ id: 'x', timestamp: T0 }] }, T0, Topics.messages)]);
    expect(p.isActive('a', 'c', T0 + IDLE - 1)).toBe(true);
    expect(p.isActive('a', 'c', T0 + IDLE)).toBe(false);
    expect(p.isActive('b', 'c', T0)).toBe(false); // apps are apart
  });

  it('attached connections and present members keep it active however long; their end is a use', () => {
    const p = projection();
    p.apply([record(attach('c', 'conn1', Mode.SUBSCRIBE), T0)]);
    expect(p.isActive('a', 'c', T0 + 10 * IDLE)).toBe(true);
    p.apply([record({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'enter', id: 'p', timestamp: T0, clientId: 'u', connectionId: 'conn2' } }, T0 + 1, Topics.presence)]);
    p.apply([record({ type: 'channel.detached', appId: 'a', channel: 'c', connectionId: 'conn1' }, T0 + 5 * IDLE)]);
    expect(p.isActive('a', 'c', T0 + 10 * IDLE)).toBe(true); // the member is still there
    p.apply([record({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'drop', id: 'd', timestamp: T0, connectionId: 'conn2' } }, T0 + 20 * IDLE, Topics.presence)]);
    expect(p.isActive('a', 'c', T0 + 21 * IDLE - 1)).toBe(true);
    expect(p.isActive('a', 'c', T0 + 21 * IDLE)).toBe(false);
  });

  it('occupancy is counted as attachments come, change modes and go: a read walks none of them (20,000 on a channel made each read cost them all)', () => {
    const p = projection();
    const all = Mode.SUBSCRIBE | Mode.PUBLISH | Mode.PRESENCE | Mode.PRESENCE_SUBSCRIBE;
    p.apply([
      record(attach('c', 'c1', all), T0),
      record(attach('c', 'c2', Mode.SUBSCRIBE, 'i2'), T0),
      record(attach('c', 'c3', Mode.PUBLISH), T0),
      // Attached again with other modes: counted once, with the new ones.
      record(attach('c', 'c1', Mode.SUBSCRIBE | Mode.PRESENCE_SUBSCRIBE), T0 + 1),
      record({ type: 'channel.detached', appId: 'a', channel: 'c', connectionId: 'c3' }, T0 + 2),
      record({ type: 'channel.detached', appId: 'a', channel: 'c', connectionId: 'never-attached' }, T0 + 2),
    ]);
    const state = (p as unknown as { channels: Map<string, { attachments: Map<string, unknown> }> }).channels.get('a\u0000c')!;
    state.attachments.values = () => {
      throw new Error('occupancy read walked the attachments');
    };
    expect(p.metrics('a', 'c')).toEqual({ connections: 2, publishers: 0, subscribers: 2, presenceConnections: 0, presenceSubscribers: 1, presenceMembers: 0 });
    expect(p.details('a', 'c', T0 + 3).status.occupancy.metrics.connections).toBe(2);
    p.apply([record({ type: 'connection.closed', appId: 'a', connectionId: 'c1', instanceId: 'i1' }, T0 + 4)]);
    expect(p.metrics('a', 'c')).toMatchObject({ connections: 1, subscribers: 1, presenceSubscribers: 0 });
  });

  it('occupancy metrics come from the modes each attachment was granted and the members present (spec: Occupancy)', () => {
    const p = projection();
    p.apply([
      record(attach('c', 'c1', Mode.SUBSCRIBE | Mode.PUBLISH | Mode.PRESENCE | Mode.PRESENCE_SUBSCRIBE), T0),
      record(attach('c', 'c2', Mode.SUBSCRIBE), T0),
      record(attach('c', 'c3', Mode.PRESENCE_SUBSCRIBE), T0),
      record(attach('c', 'c3', Mode.PUBLISH), T0), // attached again with other modes: one attachment
      record({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'enter', id: 'p1', timestamp: T0, clientId: 'u1', connectionId: 'c1' } }, T0, Topics.presence),
      record({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'enter', id: 'p2', timestamp: T0, clientId: 'u2', connectionId: 'c1' } }, T0, Topics.presence),
      record({ type: 'presence.changed', appId: 'a', channel: 'c', event: { action: 'update', id: 'p3', timestamp: T0, clientId: 'u2', connectionId: 'c1' } }, T0, Topics.presence),
    ]);
    expect(p.metrics('a', 'c')).toEqual({ connections: 3, publishers: 2, subscribers: 2, presenceConnections: 1, presenceMembers: 2, presenceSubscribers: 1 });
  });

  it("a connection closed, its instance restarted or gone: its attachments end", () => {
    const p = projection();
    p.apply([record(attach('c', 'c1', Mode.SUBSCRIBE, 'i1'), T0), record(attach('c', 'c2', Mode.SUBSCRIBE, 'i2'), T0), record(attach('d', 'c3', Mode.SUBSCRIBE, 'i3'), T0)]);
    p.apply([record({ type: 'connection.closed', appId: 'a', connectionId: 'c1', instanceId: 'i1' }, T0 + 1)]);
    expect(p.metrics('a', 'c').connections).toBe(1);
    p.apply([record({ type: 'instance.gone', instanceId: 'i2' }, T0 + 2)]);
    expect(p.metrics('a', 'c').connections).toBe(0);
    p.apply([record({ type: 'instance.started', instanceId: 'i3' }, T0 + 3)]);
    expect(p.metrics('a', 'd').connections).toBe(0);
    expect(p.isActive('a', 'd', T0 + 3 + IDLE)).toBe(false);
  });

  it('an embedded start (endsAll) ends every earlier attachment, whatever instance id held it (issue 22: ghost attachments after kill -9)', () => {
    const p = projection();
    // The killed run's pid was 101; the new one's is 202: no record of 101 ends its attachments.
    p.apply([record(attach('c', 'c1', Mode.SUBSCRIBE, '101'), T0), record(attach('c', 'c2', Mode.SUBSCRIBE, '101'), T0), record(attach('d', 'c3', Mode.SUBSCRIBE, '99'), T0)]);
    p.apply([record({ type: 'instance.started', instanceId: '202' }, T0 + 1)]);
    expect(p.metrics('a', 'c').connections).toBe(2); // production mode: instance.gone's work
    p.apply([record({ type: 'instance.started', instanceId: '202', endsAll: true }, T0 + 2)]);
    expect(p.metrics('a', 'c').connections).toBe(0);
    expect(p.metrics('a', 'd').connections).toBe(0);
    expect(p.isActive('a', 'c', T0 + 2 + IDLE)).toBe(false);
    const names = p.announce(T0 + 2).map((a) => `${a.message.name} ${JSON.parse(a.message.data as string).channelId}`);
    expect(names).toContain('channel.occupancy c');
    expect(names).toContain('channel.occupancy d');
    // An attachment after the start is the new run's own.
    p.apply([record(attach('c', 'c4', Mode.SUBSCRIBE, '202'), T0 + 3)]);
    expect(p.metrics('a', 'c').connections).toBe(1);
  });

  it('attachments ended by a restart, a dead instance or a closed connection end the period they held open: no new one begins (a kill -9 and a restart slower than the idle time announced the channel closed and opened again)', () => {
    for (const end of [{ type: 'instance.started', instanceId: '202', endsAll: true }, { type: 'instance.gone', instanceId: 'i1' }, { type: 'connection.closed', appId: 'a', connectionId: 'c1', instanceId: 'i1' }] as LogEvent[]) {
      const p = projection();
      const names = (now: number) => p.announce(now).map((a) => `${a.message.name} ${a.message.id.split(':').slice(1, 4).join(':')}`);
      const first = record(attach('c', 'c1', Mode.SUBSCRIBE), T0);
      const cause = `${first.topic}:0:${first.offset}`;
      p.apply([first]);
      expect(names(T0)).toEqual([`channel.opened ${cause}`, `channel.region.active ${cause}`, `channel.occupancy ${cause}`]);
      // Held by the attachment until it ends, long after the idle time.
      const ended = record(end, T0 + 3 * IDLE);
      p.apply([ended]);
      expect(names(T0 + 3 * IDLE)).toEqual([`channel.occupancy ${ended.topic}:0:${ended.offset}`]);
      expect(p.isActive('a', 'c', T0 + 4 * IDLE - 1)).toBe(true);
      expect(names(T0 + 4 * IDLE)).toEqual([`channel.region.inactive ${cause}`, `channel.closed ${cause}`]);
    }
  });

  it('metachannels are never active channels (their messages are the lifecycle events themselves)', () => {
    const p = projection();
    p.apply([record({ type: 'messages.published', appId: 'a', channel: '[meta]log', transport: 'rest', messages: [{ id: 'x', timestamp: T0 }] }, T0, Topics.messages)]);
    p.apply([record({ type: 'channel.activated', appId: 'a', channel: '[meta]x' }, T0)]);
    p.apply([record(attach('[meta]channel.lifecycle', 'c1', Mode.SUBSCRIBE), T0)]);
    expect(p.size).toBe(0);
    expect(p.list('a', { prefix: '', limit: 10 }, T0).channels).toEqual([]);
  });
});

describe('lifecycle announcements', () => {
  it('channel.occupancy at most once per throttle interval, with the latest metrics (CHANNEL_OCCUPANCY_THROTTLE_MS)', () => {
    const p = new ChannelsProjection({ idleMs: IDLE, windowMs: 120_000, occupancyThrottleMs: 1000, region: 'r1' });
    const occupancy = (now: number): number[] =>
      p
        .announce(now)
        .filter((a) => a.message.name === 'channel.occupancy')
        .map((a) => JSON.parse(a.message.data as string).status.occupancy.metrics.connections);
    p.apply([record(attach('c', 'c1', Mode.SUBSCRIBE), T0)]);
    expect(occupancy(T0)).toEqual([1]);
    p.apply([record(attach('c', 'c2', Mode.SUBSCRIBE), T0 + 100), record(attach('c', 'c3', Mode.SUBSCRIBE), T0 + 200)]);
    expect(occupancy(T0 + 300)).toEqual([]); // held back
    p.apply([record(attach('c', 'c4', Mode.SUBSCRIBE), T0 + 400)]);
    expect(occupancy(T0 + 999)).toEqual([]);
    expect(occupancy(T0 + 1000)).toEqual([4]); // one event, the latest count
    expect(occupancy(T0 + 5000)).toEqual([]); // nothing changed since
  });

  it('opened and region.active when a period begins, region.inactive and closed at its end, ids named by the record that began it', () => {
    const p = projection();
    const names = (now: number) => p.announce(now).map((a) => `${a.message.name} ${a.message.id}`);
    const first = record({ type: 'channel.activated', appId: 'a', channel: 'c' }, T0);
    p.apply([first]);
    const cause = `lc:${first.topic}:0:${first.offset}:`;
    const opened = names(T0);
    expect(opened.map((n) => n.split(' ')[0])).toEqual(['channel.opened', 'channel.region.active']);
    expect(opened.every((n) => n.split(' ')[1].startsWith(cause))).toBe(true);
    p.apply([record({ type: 'channel.activated', appId: 'a', channel: 'c' }, T0 + 1000)]); // same period
    expect(names(T0 + 1000)).toEqual([]);
    expect(names(T0 + 1000 + IDLE - 1)).toEqual([]);
    const closed = names(T0 + 1000 + IDLE);
    expect(closed.map((n) => n.split(' ')[0])).toEqual(['channel.region.inactive', 'channel.closed']);
    expect(closed.every((n) => n.split(' ')[1].startsWith(cause))).toBe(true);
    expect(p.size).toBe(0); // swept
  });
});

describe('one instance announces, the others keep events due until they read them back', () => {
  it('a follower announces nothing the leader did, and what the leader left undone once it leads', () => {
    const leader = projection();
    const follower = projection();
    const log: LogRecord[] = [];
    const both = (r: LogRecord) => {
      log.push(r);
      leader.apply([r]);
      follower.apply([r]);
    };
    // As the announcer does for an instance that does not lead: announce, then put it back.
    const follow = (now: number) => {
      const due = follower.announce(now);
      follower.failed(due, now);
      return due.map((a) => a.message.name);
    };
    const append = (due: { appId: string; message: { id: string; timestamp: number } }[], now: number) => {
      if (due.length === 0) return;
      for (const a of due) a.message.timestamp = now;
      both(record({ type: 'messages.published', appId: 'a', channel: '[meta]channel.lifecycle', transport: 'rest', messages: due.map((a) => a.message) as never }, now, Topics.messages));
    };
    both(record({ type: 'channel.activated', appId: 'a', channel: 'c' }, T0));
    expect(follow(T0)).toEqual(['channel.opened', 'channel.region.active']); // due, not appended
    append(leader.announce(T0 + 10), T0 + 10); // the leader's, read back by both
    expect(follow(T0 + 20)).toEqual([]);
    // The leader stops; the channel goes idle; the follower now leads and closes it, once.
    const closed = follower.announce(T0 + IDLE);
    expect(closed.map((a) => a.message.name)).toEqual(['channel.region.inactive', 'channel.closed']);
    append(closed, T0 + IDLE);
    expect(follower.announce(T0 + IDLE + 1000)).toEqual([]);
  });
});

describe('channel index (GET /channels paging)', () => {
  const all = (index: ChannelIndex, prefix = '', after?: string): string[] => {
    const out: string[] = [];
    index.scan(prefix, after, (n) => (out.push(n), true));
    return out;
  };

  it('visits names in order after the cursor, with the prefix, across additions and removals', () => {
    const index = new ChannelIndex();
    for (const n of ['b', 'a', 'ab', 'c', 'abc']) index.add(n);
    expect(all(index)).toEqual(['a', 'ab', 'abc', 'b', 'c']);
    expect(all(index, 'ab')).toEqual(['ab', 'abc']);
    expect(all(index, '', 'ab')).toEqual(['abc', 'b', 'c']);
    expect(all(index, 'ab', 'a')).toEqual(['ab', 'abc']);
    index.remove('abc');
    index.remove('b');
    index.add('b');
    index.add('aa');
    expect(all(index)).toEqual(['a', 'aa', 'ab', 'b', 'c']);
    for (const n of ['a', 'aa', 'ab', 'b']) index.remove(n);
    expect(all(index)).toEqual(['c']);
    index.add('a');
    expect(all(index)).toEqual(['a', 'c']);
  });

  it('keeps no name that came and went while nobody listed (status requests of new names, channels gone idle)', () => {
    const index = new ChannelIndex();
    for (let i = 0; i < 100; i++) index.add(`live${i}`);
    for (let i = 0; i < 100_000; i++) {
      index.add(`gone${i}`);
      index.remove(`gone${i}`);
      // one name that comes and goes again and again
      index.add('again');
      index.remove('again');
    }
    index.add('again');
    expect(index.kept).toBeLessThanOrEqual(2 * 102 + 1025);
    expect(all(index)).toEqual(['again', ...Array.from({ length: 100 }, (_, i) => `live${i}`).sort()]);
  });
});
