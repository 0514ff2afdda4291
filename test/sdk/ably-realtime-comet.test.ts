// The official SDK's Realtime client (npm `ably` v2), unmodified, on its fallback transport: comet,
// HTTP long polling (`transports: ['comet']`), against the real listening service: connect,
// attach, publish and subscribe, presence, history, a resume after the network drops, and a
// connection that moves between comet and WebSocket (recover) and back. The SDK's comet transport
// always speaks JSON (it forces the JSON protocol whatever useBinaryProtocol says); both settings
// run, and MessagePack over comet is checked on the wire in test/realtime/comet-protocol.test.ts.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Clients, NetworkCut, collectMessages, collectPresence, connectionState, realtimeClient, stateLog, within } from '../helpers/realtime.js';

let ts: TestService;
let port: number;
const clients = new Clients();
const cuts: NetworkCut[] = [];

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
});

afterEach(async () => {
  await clients.closeAll();
  await Promise.all(cuts.splice(0).map((cut) => cut.close()));
});

afterAll(async () => {
  await clients.closeAll();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** The transport the SDK connected with (its short name: `comet`, `web_socket`). */
const transportOf = (client: Ably.Realtime): string | undefined =>
  (client.connection as unknown as { connectionManager: { activeProtocol?: { transport?: { shortName?: string } } } }).connectionManager.activeProtocol?.transport?.shortName;

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client over comet (useBinaryProtocol: $useBinaryProtocol)', ({ useBinaryProtocol }) => {
  const comet = (options: Ably.ClientOptions = { key: ts.key }, via = port): Ably.Realtime =>
    clients.add(realtimeClient(via, useBinaryProtocol, { transports: ['comet'], ...options }));
  const webSocket = (options: Ably.ClientOptions = { key: ts.key }, via = port): Ably.Realtime =>
    clients.add(realtimeClient(via, useBinaryProtocol, { transports: ['web_socket'], ...options }));
  const rest = (): Ably.Rest => new Ably.Rest({ endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0, key: ts.key });

  it('connects over comet with an id and key, and closes: the service forgets the connection', async () => {
    const client = comet({ key: ts.key, autoConnect: false });
    const states = stateLog(client.connection);
    client.connect();
    await connectionState(client, 'connected');
    expect(transportOf(client)).toBe('comet');
    expect(states.map((s) => s.current)).toEqual(['connecting', 'connected']);
    expect(client.connection.id).toEqual(expect.any(String));
    expect(client.connection.key).toEqual(expect.any(String));
    expect(ts.service.gateway.comet.size).toBeGreaterThan(0);
    const key = client.connection.key!;
    client.close();
    await connectionState(client, 'closed');
    // Ended for good (CLOSE, not a dropped transport): a resume of it is refused (80008), once the
    // close request has reached the service.
    const resumeError = async (): Promise<number | undefined> => {
      const res = await fetch(`http://127.0.0.1:${port}/comet/connect?key=${encodeURIComponent(ts.key)}&resume=${encodeURIComponent(key)}`);
      const [connected] = (await res.json()) as { action: number; error?: { code: number } }[];
      return connected.error?.code;
    };
    await within(
      (async () => {
        while ((await resumeError()) !== 80008) await new Promise((r) => setTimeout(r, 20));
      })(),
      5000,
      'a resume of the closed connection to be refused',
    );
  });

  it('a bad key is refused in-band: the connection fails with the credentials error, not a retry loop', async () => {
    const client = comet({ key: `${ts.key.split(':')[0]}:wrong-secret` });
    const failed = await within(client.connection.whenState('failed'), 15_000, 'the connection to fail');
    expect(failed?.reason?.code).toBe(40101);
  });

  it('attaches, publishes with ACKs and gets messages from comet, WebSocket and REST publishers, in order', async () => {
    const name = uniqueChannel('comet-msgs');
    const client = comet();
    const channel = client.channels.get(name);
    const arrivals = await collectMessages(channel);
    expect(channel.state).toBe('attached');
    const ws = webSocket();
    const wsArrivals = await collectMessages(ws.channels.get(name));

    await channel.publish('from-comet', { n: 1 });
    await ws.channels.get(name).publish('from-ws', 'two');
    await rest().channels.get(name).publish('from-rest', '3');
    await channel.publish([{ name: 'batch-1', data: 'a' }, { name: 'batch-2', data: Buffer.from([1, 2, 3]) }]);

    const names = ['from-comet', 'from-ws', 'from-rest', 'batch-1', 'batch-2'];
    await arrivals.count(5);
    await wsArrivals.count(5);
    expect(arrivals.items.map((m) => m.name)).toEqual(names);
    expect(wsArrivals.items.map((m) => m.name)).toEqual(names);
    expect(arrivals.items[0].data).toEqual({ n: 1 });
    expect(arrivals.items[0].connectionId).toBe(client.connection.id);
    expect(Buffer.from(arrivals.items[4].data as ArrayBuffer)).toEqual(Buffer.from([1, 2, 3]));
  });

  it('a publish the capability does not allow is NACKed (40160) and the connection goes on', async () => {
    const tokenDetails = await rest().auth.requestToken({ capability: { 'comet-ro-*': ['subscribe'] } });
    const client = comet({ token: tokenDetails.token });
    const channel = client.channels.get(uniqueChannel('comet-ro'));
    await channel.attach();
    const err = await rejection(channel.publish('no', 'not allowed'));
    expect(err.code).toBe(40160);
    expect(client.connection.state).toBe('connected');
  });

  it('enters presence, sees members enter, and gets the set', async () => {
    const name = uniqueChannel('comet-presence');
    const watcher = comet({ key: ts.key, clientId: 'watcher' });
    const events = await collectPresence(watcher.channels.get(name));
    const member = comet({ key: ts.key, clientId: 'member' });
    await member.channels.get(name).presence.enter({ mood: 'polling' });
    await events.until((items) => items.some((p) => p.clientId === 'member' && p.action === 'enter'), "member's enter");
    const members = await watcher.channels.get(name).presence.get();
    expect(members.map((m) => [m.clientId, m.data])).toEqual([['member', { mood: 'polling' }]]);
    await member.channels.get(name).presence.leave();
    await events.until((items) => items.some((p) => p.clientId === 'member' && p.action === 'leave'), "member's leave");
  });

  it('reads history of what it published', async () => {
    const name = uniqueChannel('comet-history');
    const client = comet();
    const channel = client.channels.get(name);
    for (let i = 0; i < 3; i++) await channel.publish(`m${i}`, String(i));
    const page = await channel.history({ direction: 'forwards' });
    expect(page.items.map((m) => [m.name, m.data, m.connectionId])).toEqual([0, 1, 2].map((i) => [`m${i}`, String(i), client.connection.id]));
  });

  it('after the network drops, resumes the same connection and gets every message published meanwhile, once', async () => {
    const network = await NetworkCut.start(port);
    cuts.push(network);
    const client = comet({ key: ts.key }, network.port);
    const name = uniqueChannel('comet-resume');
    const channel = client.channels.get(name);
    const arrivals = await collectMessages(channel);
    const publisher = rest();
    await publisher.channels.get(name).publish('before', '0');
    await arrivals.count(1);
    const connectionId = client.connection.id;
    const channelStates = stateLog(channel);

    network.cut();
    await connectionState(client, 'disconnected');
    for (let i = 1; i <= 3; i++) await publisher.channels.get(name).publish(`meanwhile-${i}`, String(i));
    const queued = channel.publish('queued', 'while disconnected');
    network.release();
    await connectionState(client, 'connected');
    await queued;
    await publisher.channels.get(name).publish('after', '4');
    await arrivals.until((items) => items.some((m) => m.name === 'after'), "'after'");
    expect(arrivals.items.map((m) => m.name)).toEqual(['before', 'meanwhile-1', 'meanwhile-2', 'meanwhile-3', 'queued', 'after']);
    expect(client.connection.id).toBe(connectionId);
    expect(transportOf(client)).toBe('comet');
    expect(channelStates.filter((s) => s.current === 'attached')).toEqual([{ current: 'attached', resumed: true }]);
    const history = await publisher.channels.get(name).history();
    expect(history.items.filter((m) => m.name === 'queued')).toHaveLength(1);
  });

  describe.each([
    { from: 'comet', to: 'web_socket' },
    { from: 'web_socket', to: 'comet' },
  ])('a connection made over $from, recovered over $to', ({ from, to }) => {
    it('keeps its id and gets what was published while neither held it', async () => {
      const network = await NetworkCut.start(port);
      cuts.push(network);
      const make = (transport: string, options: Ably.ClientOptions, via = port): Ably.Realtime => (transport === 'comet' ? comet(options, via) : webSocket(options, via));
      const clientId = `mover-${from}-${useBinaryProtocol}`;
      const first = make(from, { key: ts.key, clientId }, network.port);
      const name = uniqueChannel('comet-move');
      const firstArrivals = await collectMessages(first.channels.get(name));
      await first.channels.get(name).publish('before', 'first');
      await firstArrivals.count(1);
      expect(transportOf(first)).toBe(from);
      const connectionId = first.connection.id;
      const recoveryKey = first.connection.createRecoveryKey()!;

      network.cut();
      await connectionState(first, 'disconnected');
      const publisher = rest();
      for (let i = 1; i <= 2; i++) await publisher.channels.get(name).publish(`meanwhile-${i}`, String(i));

      const second = make(to, { key: ts.key, clientId, recover: recoveryKey });
      const change = await within(new Promise<Ably.ConnectionStateChange>((resolve) => second.connection.once('connected', resolve)), 15_000, 'the recovering client to connect');
      expect(change.reason ?? null).toBeNull();
      expect(transportOf(second)).toBe(to);
      expect(second.connection.id).toBe(connectionId);
      const channel = second.channels.get(name);
      const arrivals = await collectMessages(channel);
      await channel.publish('after', 'second');
      await arrivals.until((items) => items.some((m) => m.name === 'after'), "'after'");
      expect(arrivals.items.map((m) => m.name)).toEqual(['meanwhile-1', 'meanwhile-2', 'after']);
      const history = await publisher.channels.get(name).history({ direction: 'forwards' });
      expect(history.items.map((m) => [m.name, m.connectionId])).toEqual([
        ['before', connectionId],
        ['meanwhile-1', undefined],
        ['meanwhile-2', undefined],
        ['after', connectionId],
      ]);
      first.close();
    });
  });
});
