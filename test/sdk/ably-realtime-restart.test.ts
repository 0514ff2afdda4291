// The official SDK's Realtime client (npm `ably` v2), unmodified, across a restart of the service
// (same data directory, same port): clients told to reconnect resume their connections and get
// every message, none twice; members whose clients came back are present again, and members of a
// connection that never comes back do not stay present for ever. Both wire formats.
import { afterEach, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import * as Ably from 'ably';
import { removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Clients, NetworkCut, collectMessages, collectPresence, connectionState, realtimeClient, stateLog } from '../helpers/realtime.js';

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

const FORMATS = [
  { format: 'json', useBinaryProtocol: false },
  { format: 'msgpack', useBinaryProtocol: true },
];

describe.each(FORMATS)('ably-js v2 Realtime client across a service restart ($format)', ({ format, useBinaryProtocol }) => {
  it('RTN15c6, RTP17i, RTP5: after a restart clients resume with every message once; members back are present, a member gone for good is not', async () => {
    ts = await startTestService();
    await ts.service.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (ts.service.app.server.address() as AddressInfo).port;
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

    ts = await ts.restart();
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

    // The member that came back is present (its SDK entered it again); the lost one is not.
    await presence.until(
      (items) => items.filter((m) => m.clientId === `member-${format}`).at(-1)?.action !== 'leave' && items.some((m) => m.clientId === `lost-${format}` && m.action === 'leave'),
      'member present and lost gone',
      20_000,
    );
    const present = await watcher.channels.get(name).presence.get();
    expect(present.map((m) => [m.clientId, m.connectionId, m.data])).toEqual([[`member-${format}`, memberId, 'stays']]);
    const viaRest = await rest().channels.get(name).presence.get();
    expect(viaRest.items.map((m) => [m.clientId, m.connectionId])).toEqual([[`member-${format}`, memberId]]);
  });
});
