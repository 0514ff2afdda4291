// The official SDK (npm `ably` v2), unmodified: one clientId entering presence again from a new
// connection (issue 26 item 7): beside its member on the old connection, after the old one closed,
// and by the SDK itself when its connection could not be resumed; members are per connection, so
// only the old connection's member leaves and the new one stays, for realtime and REST readers.
// Entering again on the same connection while present is an update (the platform's broadcast).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Clients, NetworkCut, collectPresence, connectionState, realtimeClient } from '../helpers/realtime.js';
import { WIRE_FORMATS } from '../helpers/sdk.js';

let ts: TestService;
let port: number;
const clients = new Clients();
const cuts: NetworkCut[] = [];

beforeAll(async () => {
  // Short windows, so a connection that cannot resume takes seconds: connectionStateTtl 2 s (the
  // SDK then connects anew), the members of a dropped connection leave after 1 s.
  ts = await startTestService({ REALTIME_PRESENCE_DROP_MS: '1000', REALTIME_CONNECTION_STATE_TTL_MS: '2000' });
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

/** [action, clientId, connectionId, data] of presence events or members. */
const summary = (items: Ably.PresenceMessage[]): [string, string, string, unknown][] => items.map((m) => [m.action, m.clientId, m.connectionId, m.data]);

describe.each(WIRE_FORMATS)('ably-js v2, one clientId entering again from a new connection ($format)', ({ useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions, via = port): Ably.Realtime => clients.add(realtimeClient(via, useBinaryProtocol, options));
  const rest = (): Ably.Rest => new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });

  it('RTP2: a second connection of the clientId enters beside the first; when the first closes only its member leaves', async () => {
    const name = uniqueChannel('reenter');
    const watcher = realtime({ key: ts.key });
    const events = await collectPresence(watcher.channels.get(name));
    const first = realtime({ key: ts.key, clientId: 'same' });
    await first.channels.get(name).presence.enter('first');
    const second = realtime({ key: ts.key, clientId: 'same' });
    await second.channels.get(name).presence.enter('second');
    const [a, b] = [first.connection.id!, second.connection.id!];
    await events.count(2);
    expect(summary(await watcher.channels.get(name).presence.get()).sort()).toEqual([
      ['present', 'same', a, 'first'],
      ['present', 'same', b, 'second'],
    ].sort());

    first.close();
    await events.count(3);
    expect(summary(events.items)).toEqual([
      ['enter', 'same', a, 'first'],
      ['enter', 'same', b, 'second'],
      ['leave', 'same', a, 'first'],
    ]);
    expect(summary(await watcher.channels.get(name).presence.get())).toEqual([['present', 'same', b, 'second']]);
    expect(summary((await rest().channels.get(name).presence.get()).items)).toEqual([['present', 'same', b, 'second']]);
  });

  it('RTP2, RTP8: entering again on the same connection while present is broadcast as an update with the new data, and presence history records it as one', async () => {
    const name = uniqueChannel('reenter');
    const watcher = realtime({ key: ts.key });
    const events = await collectPresence(watcher.channels.get(name));
    const member = realtime({ key: ts.key, clientId: 'twice' });
    await member.channels.get(name).presence.enter('first');
    await member.channels.get(name).presence.enter('second');
    const id = member.connection.id!;
    await events.count(2);
    expect(summary(events.items)).toEqual([
      ['enter', 'twice', id, 'first'],
      ['update', 'twice', id, 'second'],
    ]);
    expect(summary(await watcher.channels.get(name).presence.get())).toEqual([['present', 'twice', id, 'second']]);
    const history = (await rest().channels.get(name).presence.history({ direction: 'forwards' })).items;
    expect(summary(history)).toEqual([
      ['enter', 'twice', id, 'first'],
      ['update', 'twice', id, 'second'],
    ]);
  });

  it('RTP8: after its connection closed, the clientId enters again from a new connection and is the one member', async () => {
    const name = uniqueChannel('reenter');
    const watcher = realtime({ key: ts.key });
    const events = await collectPresence(watcher.channels.get(name));
    const old = realtime({ key: ts.key, clientId: 'again' });
    await old.channels.get(name).presence.enter('old');
    const oldId = old.connection.id!;
    old.close();
    await connectionState(old, 'closed');
    const fresh = realtime({ key: ts.key, clientId: 'again' });
    const own = await collectPresence(fresh.channels.get(name));
    await fresh.channels.get(name).presence.enter('new');
    await events.count(3);
    // The new connection's SDK reads its own enter after its ACK: wait for it there too.
    await own.until((items) => items.some((m) => m.action === 'enter' && m.connectionId === fresh.connection.id), 'its own enter');
    expect(summary(events.items)).toEqual([
      ['enter', 'again', oldId, 'old'],
      ['leave', 'again', oldId, 'old'],
      ['enter', 'again', fresh.connection.id!, 'new'],
    ]);
    expect(summary(await fresh.channels.get(name).presence.get())).toEqual([['present', 'again', fresh.connection.id!, 'new']]);
  });

  it('RTP17, RTN15g: a connection that could not be resumed is made anew and the SDK enters its member again from it', async () => {
    const name = uniqueChannel('reenter');
    const watcher = realtime({ key: ts.key });
    const events = await collectPresence(watcher.channels.get(name));
    const cut = await NetworkCut.start(port);
    cuts.push(cut);
    const client = realtime({ key: ts.key, clientId: 'resumer', disconnectedRetryTimeout: 500, suspendedRetryTimeout: 500 }, cut.port);
    await client.channels.get(name).presence.enter('kept');
    const oldId = client.connection.id!;
    await events.count(1);
    cut.cut();
    // Past connectionStateTtl the SDK gives up resuming (suspended) and makes a new connection.
    await connectionState(client, 'suspended', 15_000);
    cut.release();
    await connectionState(client, 'connected', 15_000);
    const newId = client.connection.id!;
    expect(newId).not.toBe(oldId);
    await events.until((items) => items.some((m) => m.action === 'enter' && m.connectionId === newId) && items.some((m) => m.action === 'leave'), 'the old member to leave and the new one to enter');
    expect(summary(events.items.filter((m) => m.connectionId === oldId))).toEqual([
      ['enter', 'resumer', oldId, 'kept'],
      ['leave', 'resumer', oldId, 'kept'],
    ]);
    expect(summary(await watcher.channels.get(name).presence.get())).toEqual([['present', 'resumer', newId, 'kept']]);
  });
});
