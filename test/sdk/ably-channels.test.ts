// The official SDK (npm `ably` v2, unmodified) against the channel routes and the lifecycle
// metachannel: Rest channel.status() (spec: Channel status; in MessagePack it asks for
// envelope=msgpack), request('get', '/channels') (spec: Channel enumeration) with its paging, and a
// Realtime subscription to [meta]channel.lifecycle that sees a channel opened, its occupancy from
// realtime attachments and presence, and the channel closed (spec: Events, Occupancy).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { basic, removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Clients, NetworkCut, connectionState, realtimeClient, within } from '../helpers/realtime.js';

const IDLE_MS = 1_500;
let ts: TestService;
let port: number;
let keys: { keyStr: string }[];
const clients = new Clients();

beforeAll(async () => {
  ts = await startTestService({ CHANNEL_IDLE_MS: String(IDLE_MS), CHANNEL_OCCUPANCY_THROTTLE_MS: '100' });
  port = await listening(ts);
  const created = await ts.service.app.inject({
    method: 'POST',
    url: '/apps',
    headers: { authorization: basic(ts.key) },
    // The first key reaches metachannels too; `*` alone does not (spec: Authentication, rule 6).
    payload: { keys: [{ capability: JSON.stringify({ '[*]*': ['*'] }) }, { capability: JSON.stringify({ '*': ['*'] }) }] },
  });
  keys = created.json().keys;
});
afterEach(() => clients.closeAll());
afterAll(async () => {
  await clients.closeAll();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const ZERO = { connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceMembers: 0, presenceSubscribers: 0 };

describe.each(WIRE_FORMATS)('ably-js v2 ($format)', ({ useBinaryProtocol }) => {
  const rest = (key = keys[0].keyStr): Ably.Rest => new Ably.Rest({ key, restHost: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
  const realtime = (key = keys[0].keyStr, clientId?: string): Ably.Realtime => clients.add(realtimeClient(port, useBinaryProtocol, clientId === undefined ? { key } : { key, clientId }));

  it('RSL8: channel.status() gives ChannelDetails and activates the channel', async () => {
    const name = uniqueChannel('status');
    const details = await rest().channels.get(name).status();
    expect(details).toEqual({ channelId: name, status: { isActive: true, occupancy: { metrics: ZERO } } });
    const listed = await rest().request('get', '/channels', 3, { prefix: name, by: 'id' }, null);
    expect(listed.statusCode).toBe(200);
    expect(listed.items).toEqual([name]);
  });

  it('request("get", "/channels") pages through the active channels with next()', async () => {
    const prefix = `${uniqueChannel('sdk-enum')}-`;
    const names = Array.from({ length: 7 }, (_, i) => `${prefix}${i}`);
    for (const n of names) await rest().channels.get(n).publish('n', 'd');
    const seen: string[] = [];
    let page: Ably.PaginatedResult<string> | null = await rest().request('get', '/channels', 3, { prefix, by: 'id', limit: 3 }, null);
    let pages = 0;
    while (page) {
      pages++;
      seen.push(...page.items);
      page = page.hasNext() ? await page.next() : null;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(names);
    const values = await rest().request('get', '/channels', 3, { prefix }, null);
    expect(values.items[0]).toMatchObject({ channelId: names[0], status: { isActive: true } });
  });

  it('a realtime subscriber of [meta]channel.lifecycle sees opened, occupancy from attachments and presence, and closed', async () => {
    const name = uniqueChannel('rt-lifecycle');
    const watcher = realtime();
    const meta = watcher.channels.get('[meta]channel.lifecycle');
    const events: Ably.Message[] = [];
    await meta.subscribe((m) => {
      if ((m.data as { channelId?: string }).channelId === name) events.push(m);
    });
    const waitFor = (check: () => boolean, what: string) =>
      within(
        (async () => {
          while (!check()) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        what,
      );

    const member = realtime(keys[0].keyStr, 'member-1');
    await connectionState(member, 'connected');
    const channel = member.channels.get(name);
    await channel.attach();
    await channel.presence.enter('here');
    const full = { connections: 1, publishers: 1, subscribers: 1, presenceConnections: 1, presenceMembers: 1, presenceSubscribers: 1 };
    await waitFor(() => events.some((e) => e.name === 'channel.occupancy' && JSON.stringify(e.data.status.occupancy.metrics) === JSON.stringify(full)), 'the occupancy of one member');
    expect(events[0]).toMatchObject({ name: 'channel.opened', data: { channelId: name, name, region: 'local', status: { isActive: true } } });
    expect(events[1].name).toBe('channel.region.active');
    // REST status sees the same occupancy.
    expect(await rest().channels.get(name).status()).toEqual({ channelId: name, status: { isActive: true, occupancy: { metrics: full } } });

    member.close();
    await waitFor(() => events.some((e) => e.name === 'channel.closed'), 'the channel to close');
    const names = events.map((e) => e.name);
    expect(names.slice(-2)).toEqual(['channel.region.inactive', 'channel.closed']);
    expect(events[events.length - 1].data.status).toMatchObject({ isActive: false, occupancy: { metrics: ZERO } });
  });

  it('a connection whose socket drops is no longer attached (it may resume, and then attaches again)', async () => {
    const name = uniqueChannel('rt-drop');
    const cut = await NetworkCut.start(port);
    try {
      const client = clients.add(new Ably.Realtime({ key: keys[0].keyStr, endpoint: '127.0.0.1', port: cut.port, tls: false, useBinaryProtocol, logLevel: 0 }));
      await client.channels.get(name).attach();
      const connections = async (): Promise<number> => (await rest().channels.get(name).status()).status!.occupancy!.metrics!.connections!;
      // Occupancy is read from the log: a status request no longer waits for an append of its own
      // (it writes nothing), so it may come before the projection has read the attach.
      await within(
        (async () => {
          while ((await connections()) !== 1) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        'the attachment to show',
      );
      cut.cut();
      await within(
        (async () => {
          while ((await connections()) !== 0) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        'the attachment to end',
      );
      cut.release();
      await connectionState(client, 'connected');
      await within(
        (async () => {
          while ((await connections()) !== 1) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        'the resumed connection to attach again',
      );
    } finally {
      await cut.close();
    }
  });

  it('"*" does not reach [meta]channel.lifecycle, and nobody publishes or enters presence on it', async () => {
    const wildcard = realtime(keys[1].keyStr);
    const err = await rejection(wildcard.channels.get('[meta]channel.lifecycle').attach());
    expect(err.code).toBe(40160);
    const root = realtime();
    const meta = root.channels.get('[meta]channel.lifecycle');
    await meta.attach();
    const refused = await rejection(meta.publish('x', 'y'));
    expect(refused.code).toBe(40160);
    const member = realtime(keys[0].keyStr, 'meta-member');
    const noPresence = await rejection(member.channels.get('[meta]channel.lifecycle').presence.enter('here'));
    expect(noPresence.code).toBe(40160);
  });
});
