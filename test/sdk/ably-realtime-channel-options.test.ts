// Issue 26, items 2, 4 and 5, with the official SDK (npm `ably` v2) in both wire formats against
// the listening service: channel modes asked at attach (ChannelOptions.modes) and enforced, channel
// params granted or refused (ChannelOptions.params), derived channels with subscription filters
// (channels.getDerived), and in-band occupancy (the `occupancy` param).
import { beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection } from '../helpers/sdk.js';
import { uniqueChannel, type TestService } from '../helpers/service.js';
import { sdkService } from '../helpers/sdk-service.js';
import { Arrivals, collectMessages, connectionState, realtimeClient } from '../helpers/realtime.js';

const svc = sdkService({ REALTIME_OCCUPANCY_INTERVAL_MS: '100' });
const clients = svc.clients;
let ts: TestService;
let port: number;
// After the service's own beforeAll (sdkService), which starts it.
beforeAll(() => {
  ts = svc.ts;
  port = svc.port;
});

// The SDK's comet transport (the long-poll fallback) speaks JSON whatever useBinaryProtocol says.
const FORMATS: { format: string; useBinaryProtocol: boolean; transports?: Ably.Transport[] }[] = [
  { format: 'json', useBinaryProtocol: false },
  { format: 'msgpack', useBinaryProtocol: true },
  { format: 'json over comet', useBinaryProtocol: false, transports: ['comet'] },
];

type Metrics = { connections: number; publishers: number; subscribers: number; presenceConnections: number; presenceMembers: number; presenceSubscribers: number };

describe.each(FORMATS)('ably-js v2 channel options ($format)', ({ useBinaryProtocol, transports }) => {
  const realtime = (options: Ably.ClientOptions = { key: ts.key }): Ably.Realtime => clients.add(realtimeClient(port, useBinaryProtocol, transports ? { transports, ...options } : options));
  const rest = (): Ably.Rest => new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
  /**
   * Resolves once everything the gateway sent `client` before now has reached it: a ping's answer
   * follows on the same socket. With another subscriber on this instance having received a message,
   * the message would be before it too, had the gateway sent it to `client`.
   */
  const drained = async (client: Ably.Realtime): Promise<void> => {
    await client.connection.ping();
  };

  describe('modes (RTL4l, RTL4m)', () => {
    it('a subscribe-only attach: channel.modes reads it back, it receives messages, and publishing or entering presence is refused with 40160', async () => {
      const name = uniqueChannel('modes-sub');
      const client = realtime({ key: ts.key, clientId: 'sub-only' });
      const channel = client.channels.get(name, { modes: ['SUBSCRIBE'] });
      const arrivals = await collectMessages(channel);
      expect(channel.modes).toEqual(['subscribe']);
      await rest().channels.get(name).publish('hello', 'world');
      await arrivals.until((items) => items.some((m) => m.name === 'hello'), "'hello'");
      const published = await rejection(channel.publish('nope', 'x'));
      expect(published.code).toBe(40160);
      const entered = await rejection(channel.presence.enter('here'));
      expect(entered.code).toBe(40160);
      // The channel stays attached: the refusals are the operations', not the attachment's.
      expect(channel.state).toBe('attached');
      expect((await rest().channels.get(name).history()).items.map((m) => m.name)).toEqual(['hello']);
    });

    it('a publish-only attach publishes and receives neither messages nor others\' presence', async () => {
      const name = uniqueChannel('modes-pub');
      const publisher = realtime({ key: ts.key, clientId: 'pub-only' });
      const channel = publisher.channels.get(name, { modes: ['PUBLISH'] });
      const received = new Arrivals<Ably.InboundMessage>();
      channel.subscribe(received.push).catch(() => undefined);
      await channel.attach();
      expect(channel.modes).toEqual(['publish']);
      const presenceSeen = new Arrivals<Ably.PresenceMessage>();
      channel.presence.subscribe(presenceSeen.push).catch(() => undefined);

      const watcher = realtime({ key: ts.key, clientId: 'watcher' });
      const watched = watcher.channels.get(name);
      const seen = await collectMessages(watched);
      await channel.publish('from-publisher', '1');
      await watched.presence.enter('present');
      await seen.until((items) => items.some((m) => m.name === 'from-publisher'), "'from-publisher'");
      await drained(publisher);
      expect(received.items).toEqual([]);
      expect(presenceSeen.items).toEqual([]);
    });

    it('modes the capability does not allow are not granted: ATTACHED carries only those it allows', async () => {
      const token = await rest().auth.requestToken({ capability: { '*': ['subscribe'] } });
      const client = realtime({ token: token.token });
      const channel = client.channels.get(uniqueChannel('modes-cap'), { modes: ['PUBLISH', 'SUBSCRIBE', 'PRESENCE'] });
      await channel.attach();
      expect(channel.modes).toEqual(['subscribe']);
    });
  });

  describe('params (RTL4k)', () => {
    it('an unknown param fails the attach at once with 40002, naming it', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('params-unknown'), { params: { colour: 'blue' } });
      const err = (await rejection(channel.attach())) as { code?: number; message?: string };
      expect(err.code).toBe(40002);
      expect(err.message).toMatch(/colour/);
      expect(channel.state).toBe('failed');
    });

    it('params in the channel name ([?rewind=1]name) are granted and refer to the channel itself', async () => {
      const name = uniqueChannel('params-name');
      await rest().channels.get(name).publish([{ name: 'old-1' }, { name: 'old-2' }]);
      const client = realtime();
      const channel = client.channels.get(`[?rewind=1]${name}`);
      const arrivals = await collectMessages(channel);
      expect(channel.params).toEqual({ rewind: '1' });
      await client.channels.get(name).publish('live', 'x');
      await arrivals.until((items) => items.some((m) => m.name === 'live'), "'live'");
      expect(arrivals.items.map((m) => m.name)).toEqual(['old-2', 'live']);
      expect((await rest().channels.get(name).history()).items.map((m) => m.name)).toEqual(['live', 'old-2', 'old-1']);
    });
  });

  describe('params in the name over REST', () => {
    it("a [?rewind=1]name channel's history and presence, which the SDK reads over REST with that name, are the channel's own", async () => {
      const name = uniqueChannel('params-rest');
      await rest().channels.get(name).publish([{ name: 'one' }, { name: 'two' }]);
      const client = realtime();
      const channel = client.channels.get(`[?rewind=1]${name}`);
      await channel.attach();
      expect((await channel.history()).items.map((m) => m.name)).toEqual(['two', 'one']);
      expect((await channel.history({ untilAttach: true })).items.map((m) => m.name)).toEqual(['two', 'one']);
      expect((await rest().channels.get(`[?rewind=1]${name}`).history()).items.map((m) => m.name)).toEqual(['two', 'one']);
      await rest().channels.get(`[?rewind=1]${name}`).publish('three', 'x');
      expect((await rest().channels.get(name).history()).items.map((m) => m.name)).toEqual(['three', 'two', 'one']);
      expect((await channel.presence.history()).items).toEqual([]);
    });
  });

  describe('derived channels: subscription filters (channels.getDerived)', () => {
    it('a filtered channel receives only the messages its JMESPath expression matches, in order', async () => {
      const name = uniqueChannel('filter');
      const client = realtime();
      const derived = client.channels.getDerived(name, { filter: "name == 'keep' || starts_with(name, 'also.')" });
      const kept = await collectMessages(derived);
      const all = await collectMessages(realtime().channels.get(name));
      await rest().channels.get(name).publish([{ name: 'keep', data: '1' }, { name: 'drop', data: '2' }, { name: 'also.this', data: '3' }]);
      await rest().channels.get(name).publish('drop', '4');
      await rest().channels.get(name).publish('keep', '5');
      await all.count(5);
      await kept.until((items) => items.some((m) => m.data === '5'), 'the last kept message');
      expect(kept.items.map((m) => [m.name, m.data])).toEqual([['keep', '1'], ['also.this', '3'], ['keep', '5']]);
    });

    it('a filter on extras.headers: numbers, strings and booleans compare as the publisher sent them', async () => {
      const name = uniqueChannel('filter-headers');
      const derived = realtime().channels.getDerived(name, { filter: "headers.cost < `50` && headers.kind == 'ice-cream' && headers.vegan == `true`" });
      const kept = await collectMessages(derived);
      const all = await collectMessages(realtime().channels.get(name));
      const channel = rest().channels.get(name);
      await channel.publish([
        { name: 'cheap', data: '1', extras: { headers: { cost: 20, kind: 'ice-cream', vegan: true } } },
        { name: 'dear', data: '2', extras: { headers: { cost: 80, kind: 'ice-cream', vegan: true } } },
        { name: 'other', data: '3', extras: { headers: { cost: 20, kind: 'cake', vegan: true } } },
        { name: 'none', data: '4' },
        { name: 'dairy', data: '5', extras: { headers: { cost: 20, kind: 'ice-cream', vegan: false } } },
        { name: 'cheap-too', data: '6', extras: { headers: { cost: 49.5, kind: 'ice-cream', vegan: true } } },
      ]);
      await all.count(6);
      await kept.until((items) => items.some((m) => m.data === '6'), 'the last matching message');
      expect(kept.items.map((m) => m.data)).toEqual(['1', '6']);
      expect((kept.items[0].extras as { headers: unknown }).headers).toEqual({ cost: 20, kind: 'ice-cream', vegan: true });
    });

    it('a filter on clientId', async () => {
      const name = uniqueChannel('filter-client');
      const derived = realtime().channels.getDerived(name, { filter: "clientId == 'alice'" });
      const kept = await collectMessages(derived);
      const alice = realtime({ key: ts.key, clientId: 'alice' }).channels.get(name);
      const bob = realtime({ key: ts.key, clientId: 'bob' }).channels.get(name);
      await bob.publish('b', '1');
      await alice.publish('a', '2');
      await bob.publish('b', '3');
      await alice.publish('a', '4');
      await kept.until((items) => items.length >= 2, 'alice\'s two messages');
      expect(kept.items.map((m) => [m.clientId, m.data])).toEqual([['alice', '2'], ['alice', '4']]);
    });

    it('a derived channel is subscribe-only: publishing on it is refused with 40160', async () => {
      const client = realtime();
      const derived = client.channels.getDerived(uniqueChannel('filter-pub'), { filter: "name == 'a'" });
      await derived.attach();
      expect(derived.modes).toEqual(['subscribe']);
      const err = await rejection(derived.publish('a', 'x'));
      expect(err.code).toBe(40160);
    });

    it('a malformed filter fails the attach with 40010 saying why', async () => {
      const derived = realtime().channels.getDerived(uniqueChannel('filter-bad'), { filter: 'name ==' });
      const err = (await rejection(derived.attach())) as { code?: number; message?: string };
      expect(err.code).toBe(40010);
      expect(err.message).toMatch(/JMESPath/);
      expect(derived.state).toBe('failed');
    });

    it('a filter too long is refused with 40010', async () => {
      const derived = realtime().channels.getDerived(uniqueChannel('filter-long'), { filter: `name == '${'x'.repeat(1100)}'` });
      const err = await rejection(derived.attach());
      expect(err.code).toBe(40010);
    });
  });

  describe('in-band occupancy (the occupancy param)', () => {
    it('[meta]occupancy messages carry the metrics as the channel\'s occupancy changes', async () => {
      const name = uniqueChannel('occupancy');
      const client = realtime();
      const channel = client.channels.get(name, { params: { occupancy: 'metrics' } });
      const events = new Arrivals<Ably.InboundMessage>();
      await channel.subscribe('[meta]occupancy', events.push);
      expect(channel.params).toEqual({ occupancy: 'metrics' });
      const metricsOf = (m: Ably.InboundMessage): Metrics => (m.data as { metrics: Metrics }).metrics;
      await events.until((items) => items.some((m) => metricsOf(m).connections === 1), 'its own attachment counted');
      expect(Object.keys(metricsOf(events.items[events.items.length - 1])).sort()).toEqual(['connections', 'presenceConnections', 'presenceMembers', 'presenceSubscribers', 'publishers', 'subscribers']);

      const other = realtime({ key: ts.key, clientId: 'member' });
      const otherChannel = other.channels.get(name);
      await otherChannel.presence.enter('hi');
      await events.until((items) => items.some((m) => metricsOf(m).connections === 2 && metricsOf(m).presenceMembers === 1), 'a second connection and its member');
      await otherChannel.detach();
      await events.until((items) => {
        const last = metricsOf(items[items.length - 1]);
        return last.connections === 1 && last.presenceMembers === 0;
      }, 'the second connection gone');
    });

    it('metrics.<category> sends that category only', async () => {
      const name = uniqueChannel('occupancy-cat');
      const channel = realtime().channels.get(name, { params: { occupancy: 'metrics.subscribers' } });
      const events = new Arrivals<Ably.InboundMessage>();
      await channel.subscribe('[meta]occupancy', events.push);
      await events.until((items) => items.some((m) => (m.data as { metrics: { subscribers?: number } }).metrics.subscribers === 1), 'one subscriber');
      for (const m of events.items) expect(Object.keys((m.data as { metrics: object }).metrics)).toEqual(['subscribers']);
    });

    it('without the channel-metadata capability the occupancy param fails the attach with 40160', async () => {
      const token = await rest().auth.requestToken({ capability: { '*': ['subscribe'] } });
      const client = realtime({ token: token.token });
      await connectionState(client, 'connected');
      const channel = client.channels.get(uniqueChannel('occupancy-cap'), { params: { occupancy: 'metrics' } });
      const err = await rejection(channel.attach());
      expect(err.code).toBe(40160);
    });
  });
});
