// The official SDK's Realtime client (npm `ably` v2), unmodified, against the real listening
// service, and the usage statistics its traffic makes (spec: Stats record; issue 11, Stats):
// messages and presence received over realtime (inbound), every message and presence message sent
// to a connection (outbound: MESSAGE, PRESENCE and the `present` members of SYNC), connections
// made and open, channels active (published to or attached). Read back with the SDK's own `stats()`, in both wire formats, with exact numbers.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Clients, NetworkCut, collectMessages, collectPresence, connectionState, realtimeClient, within } from '../helpers/realtime.js';
import { WIRE_FORMATS } from '../helpers/sdk.js';

// A clock the test moves: every count lands in one known minute. Realtime timers (heartbeats,
// idle cuts) read it too, so it stands still while clients are connected.
let now = Date.UTC(2030, 6, 1, 0, 0, 0);
const clock = { now: () => now };

let ts: TestService;
let port: number;
const clients = new Clients();
const cuts: NetworkCut[] = [];

beforeAll(async () => {
  ts = await startTestService({}, { clock });
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

/** A new sandbox app (its stats start empty), and a minute of its own: 15 s into a fresh minute. */
async function freshApp(): Promise<{ key: string; minute: number }> {
  const minute = Math.floor(now / 60_000) * 60_000 + 5 * 60_000;
  now = minute + 15_000;
  const created = await fetch(`http://127.0.0.1:${port}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [{}] }) });
  expect(created.status).toBe(201);
  const body = (await created.json()) as { keys: { keyStr: string }[] };
  return { key: body.keys[0].keyStr, minute };
}

/**
 * The app's record of `minute`, once `expected` entries show in it: the gateway's connection
 * events reach the log on their own, so the reading is polled after each flush of usage and stats.
 */
async function statsOfMinute(rest: Ably.Rest, minute: number, expected: Record<string, number>): Promise<Record<string, number | undefined>> {
  let entries: Record<string, number | undefined> = {};
  const matches = (): boolean => Object.entries(expected).every(([k, v]) => entries[k] === v);
  await within(
    (async () => {
      for (;;) {
        await ts.service.usage.flush();
        await new Promise((r) => setImmediate(r));
        await ts.service.stats.flush();
        const page = await rest.stats({ start: minute, end: minute + 59_999, unit: 'minute' });
        entries = page.items[0]?.entries ?? {};
        if (matches()) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    })(),
    10_000,
    'the stats',
  ).catch(() => undefined);
  return entries;
}

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, usage statistics ($format)', ({ useBinaryProtocol }) => {
  const realtime = (key: string, options: Ably.ClientOptions = {}, via = port): Ably.Realtime =>
    clients.add(realtimeClient(via, useBinaryProtocol, { key, ...options }));
  const rest = (key: string): Ably.Rest => new Ably.Rest({ key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });

  it('counts realtime messages and presence in and out, per connection sent to, and the connections made and open', async () => {
    const { key, minute } = await freshApp();
    const name = uniqueChannel('rt-stats');
    // A does not get its own messages back (echoMessages: false): only what is sent counts.
    const [a, b, c] = [realtime(key, { clientId: 'alice', echoMessages: false }), realtime(key, { clientId: 'bob' }), realtime(key)];
    const messagesOf = [];
    const presenceOf = [];
    for (const client of [a, b, c]) {
      const channel = client.channels.get(name);
      messagesOf.push(await collectMessages(channel));
      presenceOf.push(await collectPresence(channel));
    }
    // One member enters: a PRESENCE to each of the three attachments.
    await b.channels.get(name).presence.enter('hi');
    for (const arrivals of presenceOf) await arrivals.count(1);
    // D attaches afterwards: a SYNC with the one member present.
    const d = realtime(key, { clientId: 'dave' });
    const members = await d.channels.get(name).presence.get();
    expect(members.map((m) => [m.clientId, m.action])).toEqual([['bob', 'present']]);
    messagesOf.push(await collectMessages(d.channels.get(name)));

    // Five realtime publishes of 4 bytes, to B, C and D; one REST publish of two messages of 2 bytes, to all four.
    for (let i = 0; i < 5; i++) await a.channels.get(name).publish('rt', 'abcd');
    await rest(key).channels.get(name).publish([{ name: 'rest', data: 'xy' }, { name: 'rest', data: 'xy' }]);
    const [ofA, ofB, ofC, ofD] = messagesOf;
    await ofA.count(2);
    for (const arrivals of [ofB, ofC, ofD]) await arrivals.count(7);
    // Nothing more is on its way: A's last arrival came after the others' in log order.
    expect(ofA.items.map((m) => m.name)).toEqual(['rest', 'rest']);

    // The meter's reading of this interval (it takes one by itself in the middle of each interval).
    ts.service.usage.readConnections();
    const expected = {
      'messages.inbound.realtime.messages.count': 5,
      'messages.inbound.realtime.messages.data': 20,
      'messages.inbound.realtime.presence.count': 1,
      'messages.inbound.realtime.presence.data': 2,
      'messages.inbound.rest.messages.count': 2,
      'messages.outbound.realtime.messages.count': 3 * 5 + 4 * 2,
      'messages.outbound.realtime.messages.data': 3 * 5 * 4 + 4 * 2 * 2,
      'messages.outbound.realtime.presence.count': 3 + 1,
      'messages.outbound.realtime.presence.data': (3 + 1) * 2,
      'messages.outbound.realtime.all.count': 23 + 4,
      'connections.all.opened': 4,
      'connections.all.peak': 4,
      // The minute is in progress, 3 samples along (15 s): one of them had 4 connections open.
      'connections.all.min': 0,
      'connections.all.mean': 1.333,
      'channels.peak': 1,
    };
    expect(await statsOfMinute(rest(key), minute, expected)).toMatchObject(expected);
  });

  it('a channel that only had subscribers counts as active and opened (issue 28); one attached and published to counts once', async () => {
    const { key, minute } = await freshApp();
    const [quiet, busy] = [uniqueChannel('rt-stats-quiet'), uniqueChannel('rt-stats-busy')];
    // Two connections subscribe to the quiet channel (one enters presence): nothing is published on it.
    const [a, b] = [realtime(key, { clientId: 'sub-a' }), realtime(key, { clientId: 'sub-b' })];
    await collectMessages(a.channels.get(quiet));
    await b.channels.get(quiet).presence.enter('here');
    // The busy channel: attached by both and published to.
    const arrivals = await collectMessages(a.channels.get(busy));
    await collectMessages(b.channels.get(busy));
    await b.channels.get(busy).publish('m', 'x');
    await arrivals.count(1);
    const expected = { 'channels.peak': 2, 'channels.opened': 2, 'messages.inbound.realtime.messages.count': 1 };
    expect(await statsOfMinute(rest(key), minute, expected)).toMatchObject(expected);
  });

  it('a channel that stays attached counts in every sample it is attached in, not only the one it was attached in (channels.mean)', async () => {
    const { key, minute } = await freshApp();
    const quiet = uniqueChannel('rt-stats-held');
    await collectMessages(realtime(key, { clientId: 'holder' }).channels.get(quiet));
    // Attached in the sample at +15 s; the clock then moves a sample at a time (6 s: no heartbeat
    // is missed) while it stays attached. mean = active samples / samples elapsed in the minute.
    for (const [at, active, elapsed] of [[15, 1, 3], [21, 2, 4], [27, 3, 5], [33, 4, 6]]) {
      now = minute + at * 1000;
      const expected = { 'channels.mean': Math.round((active / elapsed) * 1000) / 1000, 'channels.peak': 1, 'channels.opened': 1 };
      expect(await statsOfMinute(rest(key), minute, expected)).toMatchObject(expected);
    }
  });

  it('a connection resumed after its socket dropped is not opened again; the messages replayed to it count as sent', async () => {
    const { key, minute } = await freshApp();
    const network = await NetworkCut.start(port);
    cuts.push(network);
    const client = realtime(key, { clientId: 'resumer' }, network.port);
    const name = uniqueChannel('rt-stats-resume');
    const arrivals = await collectMessages(client.channels.get(name));
    const publisher = rest(key).channels.get(name);
    await publisher.publish('before', 'x');
    await arrivals.count(1);
    const id = client.connection.id;

    network.cut();
    await connectionState(client, 'disconnected');
    for (let i = 0; i < 3; i++) await publisher.publish('meanwhile', 'x');
    network.release();
    await connectionState(client, 'connected');
    await arrivals.count(4);
    expect(client.connection.id).toBe(id);

    ts.service.usage.readConnections();
    const expected = {
      'connections.all.opened': 1,
      'connections.all.peak': 1,
      'messages.outbound.realtime.messages.count': 4,
      'messages.outbound.realtime.messages.data': 4,
    };
    expect(await statsOfMinute(rest(key), minute, expected)).toMatchObject(expected);
  });
});

describe('usage statistics of realtime connections, by app', () => {
  it('the gateway gives the meter the open connections of each app apart', async () => {
    const [first, second] = [await freshApp(), await freshApp()];
    const opened = [first.key, first.key, second.key].map((key) => clients.add(realtimeClient(port, false, { key })));
    for (const client of opened) await connectionState(client, 'connected');
    const byApp = ts.service.gateway.connectionsByApp();
    const appOf = (key: string): string => key.split('.')[0];
    expect([byApp.get(appOf(first.key)), byApp.get(appOf(second.key))]).toEqual([2, 1]);
  });
});
