// The official SDK's Realtime client (npm `ably` v2), unmodified, over a connection's lifetime:
// heartbeats that keep an idle connection alive, the connectionStateTtl the SDK takes from the
// service, and a restart of the service (same data directory, same port): clients told to
// reconnect resume their connections and get every message, none twice; members whose clients came
// back are present again, and members of a connection that never comes back do not stay present
// for ever. Each test starts its own service (they change its settings or restart it). Both wire formats.
import { afterEach, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { removeDir, ready, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Arrivals, Clients, NetworkCut, collectMessages, collectPresence, connectionState, realtimeClient, stateLog } from '../helpers/realtime.js';

const clients = new Clients();
let ts: TestService | undefined;
let cut: NetworkCut | undefined;

afterEach(async () => {
  await clients.closeAll();
  await cut?.close();
  cut = undefined;
  if (ts) {
    await ts.close();
    removeDir(ts.dataDir);
    ts = undefined;
  }
});

/** The SDK's transport in use (not in its typings), which emits `heartbeat` for every HEARTBEAT it gets. */
type Transport = { maxIdleInterval: number | null; on(event: 'heartbeat', listener: () => void): void };
const activeTransport = (client: Ably.Realtime): Transport =>
  (client.connection as unknown as { connectionManager: { activeProtocol: { getTransport(): Transport } } }).connectionManager.activeProtocol.getTransport();

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, connection lifetime ($format)', ({ format, useBinaryProtocol }) => {
  /** A service of this test's own, listening; its port. */
  const serve = async (env: Record<string, string> = {}): Promise<number> => {
    ts = await startTestService(env);
    return listening(ts);
  };

  it('RTN23a, CD2d: an idle connection gets a HEARTBEAT whenever the service was silent for maxIdleInterval, and outlives the SDK\'s idle timeout', async () => {
    const port = await serve({ REALTIME_MAX_IDLE_INTERVAL_MS: '1000' });
    // The SDK drops a transport silent for maxIdleInterval + realtimeRequestTimeout + 100 ms: 2.6 s here.
    const client = clients.add(realtimeClient(port, useBinaryProtocol, { key: ts!.key, realtimeRequestTimeout: 1_500 }));
    await connectionState(client, 'connected');
    const transport = activeTransport(client);
    expect(transport.maxIdleInterval).toBe(1_000 + 1_500);
    const states = stateLog(client.connection);
    const beats = new Arrivals<number>();
    transport.on('heartbeat', () => beats.push(Date.now()));
    const start = Date.now();
    await beats.until((items) => items.length > 0 && items[items.length - 1] - start > 3_000, 'HEARTBEATs for 3 s', 10_000);
    expect(states).toEqual([]);
    expect(activeTransport(client)).toBe(transport);
    const gaps = beats.items.map((t, i) => t - (i === 0 ? start : beats.items[i - 1]));
    for (const gap of gaps) expect(gap).toBeLessThan(2_600);
  });

  it('CD2f, RTN14e, RTL3c: the SDK takes the service\'s connectionStateTtl: cut off longer, it goes suspended, then connects again and its channel attaches again', async () => {
    const port = await serve({ REALTIME_CONNECTION_STATE_TTL_MS: '1500' });
    // In rotation first: this client's 1 s request timeout is shorter than an attach's wait on an
    // instance whose delivery does not read the log yet (production mode, its first 3 s or so).
    await ready(ts!);
    cut = await NetworkCut.start(port);
    const client = clients.add(
      realtimeClient(cut.port, useBinaryProtocol, { key: ts!.key, realtimeRequestTimeout: 1_000, suspendedRetryTimeout: 250, disconnectedRetryTimeout: 250 }),
    );
    const name = uniqueChannel('rt-suspend');
    const channel = client.channels.get(name);
    const arrivals = await collectMessages(channel);
    const states = stateLog(client.connection);
    const channelStates = stateLog(channel);

    cut.cut();
    // 120 s without the service's value; 1.5 s with it.
    await connectionState(client, 'suspended', 10_000);
    expect(channel.state).toBe('suspended');
    cut.release();
    await connectionState(client, 'connected');
    expect(states.map((s) => s.current)).toContain('suspended');
    // Within connectionStateTtl + maxIdleInterval of its last activity the SDK still asks to resume
    // (RTN15g); the service may honour it (it keeps the state at least connectionStateTtl) or not.
    expect(typeof client.connection.id).toBe('string');
    await channel.whenState('attached');
    expect(channelStates.map((s) => s.current).slice(-2)).toEqual(['attaching', 'attached']);
    const rest = new Ably.Rest({ key: ts!.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
    await rest.channels.get(name).publish('after', 'the new connection');
    await arrivals.until((items) => items.some((m) => m.name === 'after'), "'after'");
  });

  it('CD2c, RTL6d: limits reach the SDK: maxMessageSize from CONNECTED (the SDK refuses a larger publish with 40009), larger presence data is refused with 40009, an attach past the channels a connection may hold fails that channel', async () => {
    const port = await serve({ MAX_MESSAGE_SIZE: '2048', REALTIME_MAX_CHANNELS_PER_CONNECTION: '2' });
    const client = clients.add(realtimeClient(port, useBinaryProtocol, { key: ts!.key, clientId: `limited-${format}` }));
    const [first, second, third] = [uniqueChannel('rt-limit'), uniqueChannel('rt-limit'), uniqueChannel('rt-limit')].map((n) => client.channels.get(n));
    const arrivals = await collectMessages(first);
    expect(await rejection(first.publish('big', 'x'.repeat(3_000)))).toMatchObject({ code: 40009 });
    await first.publish('small', 'x'.repeat(1_000));
    await arrivals.count(1);
    expect(await rejection(first.presence.enter('y'.repeat(3_000)))).toMatchObject({ code: 40009 });
    await first.presence.enter('fits');

    await second.attach();
    const err = await rejection(third.attach());
    expect(err.code).toBe(90010);
    expect(third.state).toBe('failed');
    expect(client.connection.state).toBe('connected');
    // Detaching one makes room.
    await second.detach();
    await third.attach();
    expect(third.state).toBe('attached');
  });

  it('RTN15c6, RTP17i, RTP5: after a restart clients resume with every message once; members back stay present without a leave, a member gone for good leaves after the resume window', async () => {
    // The previous run's members stay for REALTIME_PRESENCE_DROP_MS after the restarted service listens (2 s here).
    const port = await serve({ REALTIME_PRESENCE_DROP_MS: '2000' });
    // The SDK retries a refused connection after disconnectedRetryTimeout (15 s by default).
    const realtime = (options: Ably.ClientOptions, via = port): Ably.Realtime =>
      clients.add(realtimeClient(via, useBinaryProtocol, { key: ts!.key, disconnectedRetryTimeout: 250, ...options }));
    const rest = (): Ably.Rest => new Ably.Rest({ key: ts!.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });

    const name = uniqueChannel('rt-restart');
    const watcher = realtime({ clientId: `watcher-${format}` });
    const messages = await collectMessages(watcher.channels.get(name));
    const presence = await collectPresence(watcher.channels.get(name));
    const member = realtime({ clientId: `member-${format}` });
    await member.channels.get(name).presence.enter('stays');
    // A member whose client is cut off before the restart and never returns.
    cut = await NetworkCut.start(port);
    const lost = realtime({ clientId: `lost-${format}` }, cut.port);
    await lost.channels.get(name).presence.enter('goes');
    await presence.count(2);
    await rest().channels.get(name).publish('before', 'the restart');
    await messages.count(1);
    const [watcherId, memberId] = [watcher.connection.id, member.connection.id];
    const watcherStates = stateLog(watcher.connection);
    cut.cut();
    await connectionState(lost, 'disconnected');

    ts = await ts!.restart();
    await ts.service.app.listen({ port, host: '127.0.0.1' });
    await rest().channels.get(name).publish('after', 'the restart');

    await messages.until((items) => items.some((m) => m.name === 'after'), "'after'", 20_000);
    expect(messages.items.map((m) => m.name)).toEqual(['before', 'after']);
    await connectionState(watcher, 'connected');
    await connectionState(member, 'connected');
    // The service told them to reconnect (DISCONNECTED), and they resumed their connections.
    expect(watcherStates[0].current).toBe('disconnected');
    expect(watcher.connection.id).toBe(watcherId);
    expect(member.connection.id).toBe(memberId);

    // The member that came back stayed present (no leave: its SDK entered it again, a refresh);
    // the lost one left once the resume window passed.
    await presence.until(
      (items) => items.filter((m) => m.clientId === `member-${format}`).at(-1)?.action !== 'leave' && items.some((m) => m.clientId === `lost-${format}` && m.action === 'leave'),
      'member present and lost gone',
      20_000,
    );
    // In both modes: the resume window counts from when the restarted service listens.
    expect(presence.items.filter((m) => m.clientId === `member-${format}` && m.action === 'leave')).toEqual([]);
    const present = await watcher.channels.get(name).presence.get();
    expect(present.map((m) => [m.clientId, m.connectionId, m.data])).toEqual([[`member-${format}`, memberId, 'stays']]);
    const viaRest = await rest().channels.get(name).presence.get();
    expect(viaRest.items.map((m) => [m.clientId, m.connectionId])).toEqual([[`member-${format}`, memberId]]);
  });
});
