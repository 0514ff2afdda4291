// The official SDK's Realtime client (npm `ably` v2), unmodified, against the real listening
// service: presence enter, update, leave, get and events of other clients, enterClient for a
// wildcard identity, the SYNC of 1,000 members to a client that attaches, the leave of a member
// whose connection drops without a word, and what REST sees of realtime members, in both wire formats.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { allPages, rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Clients, NetworkCut, collectPresence, connectionState, realtimeClient } from '../helpers/realtime.js';

/**
 * How long the members of a connection that dropped without CLOSE stay present (spec: one minute;
 * REALTIME_PRESENCE_DROP_MS), short here so that the drop tests take seconds.
 */
const DROP_MS = 1_500;

let ts: TestService;
let port: number;
const clients = new Clients();
const cuts: NetworkCut[] = [];

beforeAll(async () => {
  ts = await startTestService({ REALTIME_PRESENCE_DROP_MS: String(DROP_MS) });
  port = await listening(ts);
});

afterEach(async () => {
  await clients.closeAll();
  for (const cut of cuts.splice(0)) await cut.close();
});

afterAll(async () => {
  await clients.closeAll();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** [action, clientId, data] of presence events or members, for comparing. */
const summary = (items: Ably.PresenceMessage[]): [string, string, unknown][] => items.map((m) => [m.action, m.clientId, m.data]);

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, presence ($format)', ({ format, useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions = { key: ts.key }, via = port): Ably.Realtime =>
    clients.add(realtimeClient(via, useBinaryProtocol, options));
  const identified = (clientId: string, via = port): Ably.Realtime => realtime({ key: ts.key, clientId }, via);
  const rest = (): Ably.Rest => new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
  const relay = async (): Promise<NetworkCut> => {
    const cut = await NetworkCut.start(port);
    cuts.push(cut);
    return cut;
  };

  it('RTP8, RTP9, RTP10, RTP6, RTP11: another client sees enter, update and leave, and get() follows them', async () => {
    const name = uniqueChannel('rt-presence');
    const alice = identified(`alice-${format}`);
    const bob = identified(`bob-${format}`);
    const seenByBob = await collectPresence(bob.channels.get(name));
    const seenByAlice = await collectPresence(alice.channels.get(name));
    const aliceChannel = alice.channels.get(name);

    const before = Date.now();
    await aliceChannel.presence.enter('hello');
    const [enter] = await seenByBob.count(1);
    expect(summary([enter])).toEqual([['enter', `alice-${format}`, 'hello']]);
    expect(enter.connectionId).toBe(alice.connection.id);
    // RTP2b: the SDK compares members by ids of the form connectionId:msgSerial:index.
    expect(enter.id.startsWith(`${alice.connection.id}:`)).toBe(true);
    expect(enter.timestamp).toBeGreaterThanOrEqual(before - 1_000);
    expect(enter.timestamp).toBeLessThanOrEqual(Date.now() + 1_000);

    expect(summary(await bob.channels.get(name).presence.get())).toEqual([['present', `alice-${format}`, 'hello']]);
    // RTP17a: a connection gets its own presence events, so its own get() lists it too.
    await seenByAlice.count(1);
    expect(summary(await aliceChannel.presence.get())).toEqual([['present', `alice-${format}`, 'hello']]);

    await aliceChannel.presence.update({ mood: 'busy' });
    await seenByBob.count(2);
    expect(summary(await bob.channels.get(name).presence.get())).toEqual([['present', `alice-${format}`, { mood: 'busy' }]]);

    await aliceChannel.presence.leave('bye');
    await seenByBob.count(3);
    expect(summary(seenByBob.items)).toEqual([
      ['enter', `alice-${format}`, 'hello'],
      ['update', `alice-${format}`, { mood: 'busy' }],
      ['leave', `alice-${format}`, 'bye'],
    ]);
    for (const m of seenByBob.items) expect(m.connectionId).toBe(alice.connection.id);
    expect(await bob.channels.get(name).presence.get()).toEqual([]);
    await seenByAlice.count(3);
    expect(summary(seenByAlice.items)).toEqual(summary(seenByBob.items));
  });

  it('RTP4, RTP19: a client that attaches later gets the members already present, with their data', async () => {
    const name = uniqueChannel('rt-presence-sync');
    const bytes = Buffer.from([0, 255, 7]);
    const alice = identified(`alice-${format}`);
    const carol = identified(`carol-${format}`);
    await alice.channels.get(name).presence.enter({ json: ['data'] });
    await carol.channels.get(name).presence.enter(bytes);
    // The same clientId on a second connection is a second member.
    const aliceAgain = identified(`alice-${format}`);
    await aliceAgain.channels.get(name).presence.enter('second connection');

    for (const late of [realtime(), clients.add(realtimeClient(port, !useBinaryProtocol, { key: ts.key }))]) {
      const members = await late.channels.get(name).presence.get();
      expect(members).toHaveLength(3);
      const byConnection = new Map(members.map((m) => [m.connectionId, m]));
      expect(byConnection.get(alice.connection.id!)).toMatchObject({ action: 'present', clientId: `alice-${format}`, data: { json: ['data'] } });
      expect(byConnection.get(aliceAgain.connection.id!)).toMatchObject({ action: 'present', clientId: `alice-${format}`, data: 'second connection' });
      const carolMember = byConnection.get(carol.connection.id!)!;
      expect(carolMember).toMatchObject({ action: 'present', clientId: `carol-${format}` });
      expect(Buffer.from(carolMember.data as Buffer).equals(bytes)).toBe(true);
      for (const m of members) expect(m.id.startsWith(`${m.connectionId}:`)).toBe(true);
      // RTP11c: filters over the synced members.
      expect((await late.channels.get(name).presence.get({ clientId: `alice-${format}` })).map((m) => m.connectionId).sort()).toEqual(
        [alice.connection.id, aliceAgain.connection.id].sort(),
      );
    }
  });

  it('RTP14, RTP15: a wildcard connection enters, updates and leaves members on behalf of any clientId', async () => {
    const name = uniqueChannel('rt-enterclient');
    const watcher = await collectPresence(realtime().channels.get(name));
    const agent = realtime();
    const channel = agent.channels.get(name);
    await channel.presence.enterClient('x', 'x here');
    await channel.presence.enterClient('y', 'y here');
    await channel.presence.updateClient('y', 'y busy');
    await channel.presence.leaveClient('x');
    await watcher.count(4);
    expect(summary(watcher.items)).toEqual([
      ['enter', 'x', 'x here'],
      ['enter', 'y', 'y here'],
      ['update', 'y', 'y busy'],
      ['leave', 'x', 'x here'],
    ]);
    for (const m of watcher.items) expect(m.connectionId).toBe(agent.connection.id);
    expect(summary(await realtime().channels.get(name).presence.get())).toEqual([['present', 'y', 'y busy']]);
  });

  it('RTP15f, RTP14: a token without a clientId is anonymous, not a wildcard: its enterClient is refused with 40012', async () => {
    const details = await rest().auth.requestToken({ ttl: 60_000 });
    expect(details.clientId ?? null).toBeNull();
    const anonymous = realtime({ tokenDetails: details });
    const name = uniqueChannel('rt-anon-enter');
    const channel = anonymous.channels.get(name);
    await channel.attach();
    expect(await rejection(channel.presence.enterClient('someone', 'x'))).toMatchObject({ code: 40012 });
    expect((await rest().channels.get(name).presence.get()).items).toEqual([]);
  });

  it('RTL5, RTP5: a member whose client detaches the channel leaves it', async () => {
    const name = uniqueChannel('rt-presence-detach');
    const watcher = await collectPresence(realtime().channels.get(name));
    const ivan = identified(`ivan-${format}`);
    const channel = ivan.channels.get(name);
    await channel.presence.enter('until detach');
    await watcher.count(1);
    await channel.detach();
    await watcher.count(2);
    expect(summary(watcher.items)).toEqual([
      ['enter', `ivan-${format}`, 'until detach'],
      ['leave', `ivan-${format}`, 'until detach'],
    ]);
    expect(ivan.connection.state).toBe('connected');
    expect((await rest().channels.get(name).presence.get()).items).toEqual([]);
  });

  it('RTP18, RTP19: SYNC of 1,000 members entered by one wildcard connection; a client that attaches then gets them all', async () => {
    const name = uniqueChannel('rt-sync-1000');
    const agent = realtime();
    await connectionState(agent, 'connected');
    const channel = agent.channels.get(name);
    const ids = Array.from({ length: 1_000 }, (_, i) => `member-${String(i).padStart(4, '0')}`);
    // Entered while the channel attaches (RTP16b), the SDK sends them in one PRESENCE message once it is attached.
    await Promise.all(ids.map((id, i) => channel.presence.enterClient(id, { i })));
    expect(channel.state).toBe('attached');

    const late = realtime();
    const members = await late.channels.get(name).presence.get();
    expect(members).toHaveLength(1_000);
    expect(members.map((m) => m.clientId).sort()).toEqual(ids);
    for (const m of members) {
      expect(m.action).toBe('present');
      expect(m.connectionId).toBe(agent.connection.id);
      expect(m.data).toEqual({ i: Number(m.clientId.slice('member-'.length)) });
    }
    // The same set over REST, and in the other wire format.
    const viaRest = await allPages(await rest().channels.get(name).presence.get({ limit: 1_000 }));
    expect(viaRest.items.map((m) => m.clientId).sort()).toEqual(ids);
    const other = clients.add(realtimeClient(port, !useBinaryProtocol, { key: ts.key }));
    expect(await other.channels.get(name).presence.get()).toHaveLength(1_000);

    // Live changes after the SYNC reach the late client.
    const seen = await collectPresence(late.channels.get(name));
    await channel.presence.leaveClient('member-0500');
    await seen.until((items) => items.some((m) => m.action === 'leave' && m.clientId === 'member-0500'), 'the leave of member-0500');
    expect(await late.channels.get(name).presence.get()).toHaveLength(999);
  });

  it('RTP16b: members entered while the channel attaches go in one PRESENCE message however many (2,500 here), and are all entered', async () => {
    const name = uniqueChannel('rt-presence-queued');
    const agent = realtime();
    await connectionState(agent, 'connected');
    const channel = agent.channels.get(name);
    const ids = Array.from({ length: 2_500 }, (_, i) => `queued-${i}`);
    // The SDK queues them until ATTACHED, then sends them all in one frame (ably-js onAttached):
    // a frame more than a publish may hold (MAX_MESSAGES_PER_PUBLISH, 1,000) must still be taken.
    await Promise.all(ids.map((id) => channel.presence.enterClient(id)));
    const members = await allPages(await rest().channels.get(name).presence.get({ limit: 1_000 }));
    expect(members.items.map((m) => m.clientId).sort()).toEqual([...ids].sort());
  });

  it('RTP18, RTP19: members that enter while a client attaches all reach it, through the SYNC or as events, none lost', async () => {
    const name = uniqueChannel('rt-sync-race');
    const agent = realtime();
    const channel = agent.channels.get(name);
    await channel.attach();
    const ids = Array.from({ length: 150 }, (_, i) => `racer-${i}`);
    // One PRESENCE message per member, sent while the other client attaches and gets its SYNC.
    const entering = Promise.all(ids.map((id) => channel.presence.enterClient(id, id)));
    const late = realtime();
    const seen = await collectPresence(late.channels.get(name));
    await entering;
    await seen.until((items) => new Set(items.map((m) => m.clientId)).size === ids.length, 'every member at the attaching client');
    const members = await late.channels.get(name).presence.get();
    expect(members.map((m) => m.clientId).sort()).toEqual([...ids].sort());
    for (const m of members) expect(m.data).toBe(m.clientId);
    expect(seen.items.every((m) => m.action === 'present' || m.action === 'enter')).toBe(true);
  });

  it('RSP3, RSP4: REST presence.get and presence.history see realtime members and their events', async () => {
    const name = uniqueChannel('rt-presence-rest');
    const dave = identified(`dave-${format}`);
    const channel = dave.channels.get(name);
    await channel.presence.enter({ via: 'realtime' });
    const restChannel = rest().channels.get(name);
    const present = await restChannel.presence.get();
    expect(present.items.map((m) => [m.action, m.clientId, m.connectionId, m.data])).toEqual([
      ['present', `dave-${format}`, dave.connection.id, { via: 'realtime' }],
    ]);
    await channel.presence.update('changed');
    await channel.presence.leave();
    expect((await restChannel.presence.get()).items).toEqual([]);
    const history = await restChannel.presence.history({ direction: 'forwards' });
    expect(history.items.map((m) => [m.action, m.clientId, m.connectionId, m.data])).toEqual([
      ['enter', `dave-${format}`, dave.connection.id, { via: 'realtime' }],
      ['update', `dave-${format}`, dave.connection.id, 'changed'],
      ['leave', `dave-${format}`, dave.connection.id, 'changed'],
    ]);
  });

  it('RTN12, RTP5: a connection that closes leaves its members at once', async () => {
    const name = uniqueChannel('rt-presence-close');
    const watcher = await collectPresence(realtime().channels.get(name));
    const erin = identified(`erin-${format}`);
    await erin.channels.get(name).presence.enter('here');
    await watcher.count(1);
    const closedAt = Date.now();
    erin.close();
    const events = await watcher.count(2);
    expect(summary(events)).toEqual([
      ['enter', `erin-${format}`, 'here'],
      ['leave', `erin-${format}`, 'here'],
    ]);
    // Not held back for the drop window: a closed connection will not resume.
    expect(Date.now() - closedAt).toBeLessThan(DROP_MS);
    expect((await rest().channels.get(name).presence.get()).items).toEqual([]);
  });

  it('RTP5, RTN15: a member whose connection drops without CLOSE leaves once it has not resumed within the drop window', async () => {
    const name = uniqueChannel('rt-presence-drop');
    const watcher = await collectPresence(realtime().channels.get(name));
    const network = await relay();
    const frank = identified(`frank-${format}`, network.port);
    await frank.channels.get(name).presence.enter('about to drop');
    await watcher.count(1);
    const frankConnection = frank.connection.id;

    const cutAt = Date.now();
    network.cut();
    // Frank's SDK tries to reconnect; the relay holds the attempt unanswered.
    await network.untilHolding();
    const [, leave] = await watcher.count(2, DROP_MS + 15_000);
    expect(summary([leave])).toEqual([['leave', `frank-${format}`, 'about to drop']]);
    expect(leave.connectionId).toBe(frankConnection);
    // The member stayed present for the window, so that a resume could keep it.
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(DROP_MS - 100);
    expect(await realtime().channels.get(name).presence.get()).toEqual([]);
    const restChannel = rest().channels.get(name);
    expect((await restChannel.presence.get()).items).toEqual([]);
    const history = await restChannel.presence.history({ direction: 'forwards' });
    expect(history.items.map((m) => [m.action, m.clientId, m.connectionId])).toEqual([
      ['enter', `frank-${format}`, frankConnection],
      ['leave', `frank-${format}`, frankConnection],
    ]);
  });

  it('RTP17i: a member that left while its connection was gone past the drop window is entered again by its SDK on resume', async () => {
    const name = uniqueChannel('rt-presence-reenter');
    const watcher = await collectPresence(realtime().channels.get(name));
    const network = await relay();
    const judy = identified(`judy-${format}`, network.port);
    await judy.channels.get(name).presence.enter('back again');
    await watcher.count(1);
    const connectionId = judy.connection.id;

    network.cut();
    await watcher.until((items) => items.some((m) => m.action === 'leave'), 'the leave of judy', DROP_MS + 15_000);
    network.release();
    await connectionState(judy, 'connected');
    expect(judy.connection.id).toBe(connectionId);
    await watcher.count(3);
    expect(watcher.items.map((m) => [m.action, m.clientId, m.connectionId, m.data])).toEqual([
      ['enter', `judy-${format}`, connectionId, 'back again'],
      ['leave', `judy-${format}`, connectionId, 'back again'],
      ['enter', `judy-${format}`, connectionId, 'back again'],
    ]);
    expect(summary(await realtime().channels.get(name).presence.get())).toEqual([['present', `judy-${format}`, 'back again']]);
  });

  it('RTN15c6, RTP17i: a member whose connection resumes within the drop window stays present', async () => {
    const name = uniqueChannel('rt-presence-resume');
    const watcher = await collectPresence(realtime().channels.get(name));
    const [resumingNet, droppedNet] = [await relay(), await relay()];
    const grace = identified(`grace-${format}`, resumingNet.port);
    const henry = identified(`henry-${format}`, droppedNet.port);
    await grace.channels.get(name).presence.enter('resumes');
    await henry.channels.get(name).presence.enter('does not');
    await watcher.count(2);
    const graceConnection = grace.connection.id;

    // Grace's connection drops first and resumes; Henry's drops after it and never comes back.
    resumingNet.cut();
    await connectionState(grace, 'disconnected');
    droppedNet.cut();
    resumingNet.release();
    await connectionState(grace, 'connected');
    expect(grace.connection.id).toBe(graceConnection);

    // Henry's window ends after Grace's would have: when Henry has left, Grace would have too.
    await watcher.until((items) => items.some((m) => m.action === 'leave'), 'the leave of henry', DROP_MS + 15_000);
    expect(watcher.items.filter((m) => m.action === 'leave').map((m) => m.clientId)).toEqual([`henry-${format}`]);
    expect(summary(await realtime().channels.get(name).presence.get())).toEqual([['present', `grace-${format}`, 'resumes']]);
    expect((await rest().channels.get(name).presence.get()).items.map((m) => [m.clientId, m.connectionId])).toEqual([
      [`grace-${format}`, graceConnection],
    ]);
  });
});
