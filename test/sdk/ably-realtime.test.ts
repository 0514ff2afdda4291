// The official SDK's Realtime client (npm `ably` v2), unmodified, against the real listening
// service's WebSocket gateway: connecting with a key, a token and an authCallback, a bad key, and
// messages both ways (realtime and REST publishes, fields, payload types, echo, history), in both
// of its wire formats.
import { beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { uniqueChannel, type TestService } from '../helpers/service.js';
import { sdkService } from '../helpers/sdk-service.js';
import { collectMessages, connectionState, currentToken, realtimeClient, stateLog, within } from '../helpers/realtime.js';

const svc = sdkService();
const clients = svc.clients;
let ts: TestService;
let port: number;
// After the service's own beforeAll (sdkService), which starts it.
beforeAll(() => {
  ts = svc.ts;
  port = svc.port;
});

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, connection and messages ($format)', ({ format, useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions = { key: ts.key }): Ably.Realtime =>
    clients.add(realtimeClient(port, useBinaryProtocol, options));
  const rest = (options: Ably.ClientOptions = { key: ts.key }): Ably.Rest =>
    new Ably.Rest({ endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0, ...options });
  /** A client in the other wire format, to see what the gateway makes of a payload for it. */
  const otherFormat = (options: Ably.ClientOptions = { key: ts.key }): Ably.Realtime =>
    clients.add(realtimeClient(port, !useBinaryProtocol, options));

  describe('connecting', () => {
    it('RTN4b, RTN8, RTN12: with a key the connection reaches connected with an id and key, then closes', async () => {
      const client = realtime({ key: ts.key, autoConnect: false });
      const states = stateLog(client.connection);
      client.connect();
      await connectionState(client, 'connected');
      expect(states.map((s) => s.current)).toEqual(['connecting', 'connected']);
      expect(client.connection.errorReason ?? null).toBeNull();
      const id = client.connection.id!;
      expect(typeof id).toBe('string');
      expect(id.length).toBeGreaterThan(0);
      // The SDK splits message and presence ids on ':' to find the connection id in them.
      expect(id).not.toContain(':');
      expect(typeof client.connection.key).toBe('string');
      expect(client.connection.key!.length).toBeGreaterThan(0);
      // A key with no clientId is anonymous.
      expect(client.auth.clientId ?? null).toBeNull();

      const other = realtime();
      await connectionState(other, 'connected');
      expect(other.connection.id).not.toBe(id);

      client.close();
      // connection.state turns closed before the SDK emits the state changes.
      if (!states.some((s) => s.current === 'closed')) await within(client.connection.once('closed'), 10_000, 'the closed event');
      expect(states.map((s) => s.current)).toEqual(['connecting', 'connected', 'closing', 'closed']);
    });

    it('RSA15, RTN4b: with a key and a clientId option the connection is identified by that clientId', async () => {
      const client = realtime({ key: ts.key, clientId: `key-user-${format}` });
      await connectionState(client, 'connected');
      expect(client.auth.clientId).toBe(`key-user-${format}`);
    });

    it('RSA8, RTN2: with a token from REST requestToken the connection takes the token\'s clientId', async () => {
      const clientId = `token-user-${format}`;
      const details = await rest().auth.requestToken({ clientId, ttl: 60_000 });
      for (const options of [{ token: details.token }, { tokenDetails: details }]) {
        const client = realtime(options);
        await connectionState(client, 'connected');
        expect(client.auth.clientId).toBe(clientId);
        const name = uniqueChannel('rt-token');
        const channel = client.channels.get(name);
        const arrivals = await collectMessages(channel);
        await channel.publish('greeting', 'by token');
        const [received] = await arrivals.count(1);
        expect([received.name, received.data, received.clientId]).toEqual(['greeting', 'by token', clientId]);
      }
    });

    it('RSA8c, RTN2: an authCallback that hands over a signed token request; the SDK exchanges it and connects with the token', async () => {
      const tokenRequest = await rest().auth.createTokenRequest({ clientId: `callback-user-${format}`, ttl: 60_000 });
      const calls: Ably.TokenParams[] = [];
      const client = realtime({
        authCallback: (params, callback) => {
          calls.push(params);
          callback(null, tokenRequest);
        },
      });
      await connectionState(client, 'connected');
      expect(calls).toHaveLength(1);
      expect(client.auth.clientId).toBe(`callback-user-${format}`);
      expect(currentToken(client)).toEqual(expect.any(String));
    });

    it('RSA8c, RTN2: an authCallback that hands over TokenDetails', async () => {
      const keyRest = rest();
      const client = realtime({
        authCallback: (_params, callback) => {
          keyRest.auth.requestToken({ clientId: `details-user-${format}`, ttl: 60_000 }).then(
            (details) => callback(null, details),
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      await connectionState(client, 'connected');
      expect(client.auth.clientId).toBe(`details-user-${format}`);
    });

    it('RTN13: ping() is answered', async () => {
      const client = realtime();
      await connectionState(client, 'connected');
      const roundTrip = await client.connection.ping();
      expect(typeof roundTrip).toBe('number');
      expect(roundTrip).toBeGreaterThanOrEqual(0);
    });

    it('RTN14a: a key with a wrong secret ends in the failed state with 40101, and the SDK does not retry', async () => {
      const [keyName] = ts.key.split(':');
      const client = realtime({ key: `${keyName}:not-the-secret` });
      const states = stateLog(client.connection);
      await connectionState(client, 'failed').catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40101, statusCode: 401 });
      // Reported in-band (an ERROR), not by refusing the upgrade, which the SDK would retry for ever.
      expect(states.map((s) => s.current)).toEqual(['connecting', 'failed']);
      // A channel of a failed connection cannot attach.
      const err = await rejection(client.channels.get(uniqueChannel('rt-badkey')).attach());
      expect(err.code).toBe(40101);
    });

    it('RTN14a: a key name the app does not have ends in the failed state with 40101', async () => {
      const appId = ts.key.split('.')[0];
      const client = realtime({ key: `${appId}.no-such-key:secret` });
      await connectionState(client, 'failed').catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40101, statusCode: 401 });
    });

    it('RTN14a: a key of an app the service does not have (the SDK suite\'s "this.is:wrong") ends failed with 40400, not disconnected', async () => {
      const client = realtime({ key: 'this.is:wrong' });
      const states = stateLog(client.connection);
      await connectionState(client, 'failed').catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40400, statusCode: 404 });
      expect(states.map((s) => s.current)).toEqual(['connecting', 'failed']);
    });
  });

  describe('publish and subscribe', () => {
    it('RTL4, RTL7, RTL6, RTN7a: attach, subscribe, publish: the publish is acknowledged and the message comes back', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('rt-roundtrip'));
      await channel.attach();
      expect(channel.state).toBe('attached');
      // Default modes of a key with every capability.
      expect([...(channel.modes ?? [])].sort()).toEqual(['presence', 'presence_subscribe', 'publish', 'subscribe']);
      const arrivals = await collectMessages(channel);
      const result = await channel.publish('event', 'payload');
      // RSL1n: the ACK's serials, one per message.
      expect(result.serials).toHaveLength(1);
      expect(result.serials[0]).toEqual(expect.any(String));
      const [received] = await arrivals.count(1);
      expect([received.name, received.data]).toEqual(['event', 'payload']);
    });

    it('RTL6i: one publish of several messages is one ACK with a serial each; they arrive in order', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('rt-many'));
      const arrivals = await collectMessages(channel);
      const result = await channel.publish([
        { name: 'a', data: 'one' },
        { name: 'b', data: 'two' },
        { name: 'c', data: 'three' },
      ]);
      expect(result.serials).toHaveLength(3);
      expect(new Set(result.serials).size).toBe(3);
      const received = await arrivals.count(3);
      expect(received.map((m) => [m.name, m.data])).toEqual([['a', 'one'], ['b', 'two'], ['c', 'three']]);
      expect(new Set(received.map((m) => m.id)).size).toBe(3);
    });

    it('TM2: a delivered message carries id, clientId, connectionId, timestamp, name and data', async () => {
      const publisher = realtime({ key: ts.key, clientId: `publisher-${format}` });
      const subscriber = realtime();
      const name = uniqueChannel('rt-fields');
      const arrivals = await collectMessages(subscriber.channels.get(name));
      await connectionState(publisher, 'connected');
      const before = Date.now();
      await publisher.channels.get(name).publish('fields', 'checked');
      const after = Date.now();
      const [m] = await arrivals.count(1);
      expect(m.id).toEqual(expect.any(String));
      expect(m.id.length).toBeGreaterThan(0);
      expect(m.clientId).toBe(`publisher-${format}`);
      expect(m.connectionId).toBe(publisher.connection.id);
      expect(m.timestamp).toBeGreaterThanOrEqual(before - 1_000);
      expect(m.timestamp).toBeLessThanOrEqual(after + 1_000);
      expect(m.name).toBe('fields');
      expect(m.data).toBe('checked');
      expect(m.encoding ?? null).toBeNull();
      expect(m.action).toBe('message.create');

      // The same message, read back over REST, is the same message.
      const page = await rest().channels.get(name).history();
      expect(page.items.map((h) => [h.id, h.clientId, h.connectionId, h.timestamp, h.name, h.data])).toEqual([
        [m.id, m.clientId, m.connectionId, m.timestamp, m.name, m.data],
      ]);
    });

    it('RTL4l, RTL4m: a channel attached with modes gets those modes; without subscribe it receives nothing', async () => {
      const name = uniqueChannel('rt-modes');
      const client = realtime();
      const publishOnly = client.channels.get(name, { modes: ['publish', 'presence'] });
      await publishOnly.attach();
      expect([...(publishOnly.modes ?? [])].sort()).toEqual(['presence', 'publish']);
      const received: Ably.InboundMessage[] = [];
      // The SDK lets a listener be added; the service must not send anything to it.
      publishOnly.subscribe((m) => received.push(m));
      const watcher = await collectMessages(realtime().channels.get(name));
      await publishOnly.publish('from', 'a publish-only channel');
      await rest().channels.get(name).publish('to', 'everyone subscribed');
      await watcher.count(2);
      expect(received).toEqual([]);
    });

    it('spec Publish: a REST publish with a realtime connection\'s key carries that connection\'s id and clientId', async () => {
      const name = uniqueChannel('rt-connkey');
      const client = realtime({ key: ts.key, clientId: `keyed-${format}` });
      const arrivals = await collectMessages(client.channels.get(name));
      await rest().channels.get(name).publish({ name: 'keyed', data: 'via REST', connectionKey: client.connection.key });
      const [m] = await arrivals.count(1);
      expect([m.name, m.connectionId, m.clientId]).toEqual(['keyed', client.connection.id, `keyed-${format}`]);
      const page = await rest().channels.get(name).history();
      expect(page.items.map((h) => [h.connectionId, h.clientId])).toEqual([[client.connection.id, `keyed-${format}`]]);
    });

    it('TM2a: a message id the publisher sets is kept', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('rt-ownid'));
      const arrivals = await collectMessages(channel);
      await channel.publish({ id: `own-id-${format}:0`, name: 'mine', data: 'x' });
      const [m] = await arrivals.count(1);
      expect(m.id).toBe(`own-id-${format}:0`);
    });

    it('RSL4, RSL6: string, JSON object, JSON array and binary data arrive as sent, to subscribers in both formats', async () => {
      const publisher = realtime();
      const name = uniqueChannel('rt-payloads');
      const same = await collectMessages(realtime().channels.get(name));
      const other = await collectMessages(otherFormat().channels.get(name));
      const bytes = Buffer.from([0, 1, 2, 127, 128, 254, 255]);
      const object = { text: 'héllo', n: 42, nested: { list: [1, 'two', null, true] } };
      await publisher.channels.get(name).publish([
        { name: 'string', data: 'plain text ✓' },
        { name: 'object', data: object },
        { name: 'array', data: [1, 2, 3] },
        { name: 'binary', data: bytes },
        { name: 'empty-string', data: '' },
        { name: 'no-data' },
      ]);
      for (const arrivals of [same, other]) {
        const received = await arrivals.count(6);
        const byName = new Map(received.map((m) => [m.name, m]));
        expect(byName.get('string')!.data).toBe('plain text ✓');
        expect(byName.get('object')!.data).toEqual(object);
        expect(byName.get('array')!.data).toEqual([1, 2, 3]);
        const binary = byName.get('binary')!.data as Buffer;
        expect(Buffer.isBuffer(binary)).toBe(true);
        expect(Buffer.from(binary).equals(bytes)).toBe(true);
        expect(byName.get('empty-string')!.data).toBe('');
        expect(byName.get('no-data')!.data ?? null).toBeNull();
        // The SDK decoded every step: nothing is left in `encoding`.
        for (const m of received) expect(m.encoding ?? null).toBeNull();
      }
      // History over REST gives the same payloads.
      const page = await rest().channels.get(name).history({ direction: 'forwards' });
      expect(page.items.map((m) => m.name)).toEqual(['string', 'object', 'array', 'binary', 'empty-string', 'no-data']);
      expect(page.items[1].data).toEqual(object);
      expect(Buffer.from(page.items[3].data as Buffer).equals(bytes)).toBe(true);
    });

    it('RTL7: a subscription to one name gets only the messages of that name', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('rt-byname'));
      const wanted: Ably.InboundMessage[] = [];
      await channel.subscribe('wanted', (m) => wanted.push(m));
      const all = await collectMessages(channel);
      await channel.publish([{ name: 'other', data: '1' }, { name: 'wanted', data: '2' }, { name: 'other', data: '3' }]);
      await all.count(3);
      expect(wanted.map((m) => m.data)).toEqual(['2']);
    });

    it('RTL6c: a channel that was never attached can be published to', async () => {
      const publisher = realtime();
      const name = uniqueChannel('rt-unattached');
      const arrivals = await collectMessages(realtime().channels.get(name));
      await connectionState(publisher, 'connected');
      const channel = publisher.channels.get(name);
      await channel.publish('unattached', 'still delivered');
      expect(channel.state).toBe('initialized');
      const [m] = await arrivals.count(1);
      expect(m.data).toBe('still delivered');
    });

    it('RTL5: after detach no more messages arrive; a new attach gets the new ones', async () => {
      const name = uniqueChannel('rt-detach');
      const client = realtime();
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      const publisher = rest().channels.get(name);
      await publisher.publish('one', '1');
      await arrivals.count(1);
      await channel.detach();
      expect(channel.state).toBe('detached');
      await publisher.publish('two', '2');
      await channel.attach();
      await publisher.publish('three', '3');
      // Delivery follows the log: had 'two' been delivered, it would have come before 'three'.
      await arrivals.until((items) => items.some((m) => m.name === 'three'), 'three after re-attach');
      expect(arrivals.items.map((m) => m.name)).toEqual(['one', 'three']);
    });

    it('RTL7, RSL1: messages published over REST and batch publish reach realtime subscribers, in order, with the ids history gives', async () => {
      const name = uniqueChannel('rt-from-rest');
      const arrivals = await collectMessages(realtime().channels.get(name));
      const client = rest({ key: ts.key, clientId: `rest-user-${format}` });
      await client.channels.get(name).publish('single', { n: 1 });
      await client.channels.get(name).publish([
        { name: 'first-of-two', data: 'a' },
        { name: 'second-of-two', data: Buffer.from('bytes') },
      ]);
      await client.batchPublish({ channels: [name], messages: [{ name: 'batch', data: 'b' }] });
      const received = await arrivals.count(4);
      expect(received.map((m) => m.name)).toEqual(['single', 'first-of-two', 'second-of-two', 'batch']);
      expect(received[0].data).toEqual({ n: 1 });
      expect(Buffer.from(received[2].data as Buffer).toString()).toBe('bytes');
      for (const m of received) expect(m.clientId).toBe(`rest-user-${format}`);
      const page = await client.channels.get(name).history({ direction: 'forwards' });
      expect(received.map((m) => [m.id, m.timestamp])).toEqual(page.items.map((m) => [m.id, m.timestamp]));
    });

    it('RTC1a: with echoMessages false a connection does not get its own messages, but gets the others\'', async () => {
      const name = uniqueChannel('rt-echo');
      const quiet = realtime({ key: ts.key, echoMessages: false });
      const quietArrivals = await collectMessages(quiet.channels.get(name));
      const echoing = realtime();
      const echoingArrivals = await collectMessages(echoing.channels.get(name));

      await quiet.channels.get(name).publish('own', 'from the quiet one');
      await echoing.channels.get(name).publish('other', 'from the echoing one');
      await rest().channels.get(name).publish('rest', 'over REST');

      // Delivery follows the log: when 'rest' arrived, 'own' would have arrived before it.
      await quietArrivals.until((items) => items.some((m) => m.name === 'rest'), 'the REST message');
      expect(quietArrivals.items.map((m) => m.name)).toEqual(['other', 'rest']);
      await echoingArrivals.count(3);
      expect(echoingArrivals.items.map((m) => m.name)).toEqual(['own', 'other', 'rest']);
    });

    it('RSL2: a realtime publish is in REST history once acknowledged', async () => {
      const client = realtime({ key: ts.key, clientId: `history-user-${format}` });
      const name = uniqueChannel('rt-history');
      const channel = client.channels.get(name);
      await channel.publish('first', 'one');
      await channel.publish([{ name: 'second', data: { two: 2 } }, { name: 'third', data: Buffer.from([3]) }]);
      for (const reader of [rest(), rest({ key: ts.key, useBinaryProtocol: !useBinaryProtocol })]) {
        const page = await reader.channels.get(name).history({ direction: 'forwards' });
        expect(page.items.map((m) => [m.name, m.clientId, m.connectionId])).toEqual([
          ['first', `history-user-${format}`, client.connection.id],
          ['second', `history-user-${format}`, client.connection.id],
          ['third', `history-user-${format}`, client.connection.id],
        ]);
        expect(page.items[1].data).toEqual({ two: 2 });
        expect(Buffer.from(page.items[2].data as Buffer).equals(Buffer.from([3]))).toBe(true);
      }
      // The realtime channel's own history() is the same REST request.
      const own = await channel.history({ direction: 'forwards' });
      expect(own.items.map((m) => m.name)).toEqual(['first', 'second', 'third']);
    });

    it('RTL10b: history({ untilAttach: true }) gives the messages up to the attach and none published after it', async () => {
      const name = uniqueChannel('rt-until-attach');
      const publisher = rest().channels.get(name);
      await publisher.publish('before', 'the attach');
      const channel = realtime().channels.get(name);
      const arrivals = await collectMessages(channel);
      await publisher.publish('after', 'the attach');
      await arrivals.count(1);
      // The SDK asks REST history from the ATTACHED message's channelSerial (from_serial), backwards.
      const page = await channel.history({ untilAttach: true });
      expect(page.items.map((m) => m.name)).toEqual(['before']);
    });

    it('RTL6, RSL1k: publishing an id already published on the channel is acknowledged and not delivered again', async () => {
      const client = realtime();
      const name = uniqueChannel('rt-idempotent');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      await channel.publish({ id: `dup-${format}:0`, name: 'once', data: '1' });
      await channel.publish({ id: `dup-${format}:0`, name: 'once', data: '1' });
      await channel.publish('after', '2');
      await arrivals.until((items) => items.some((m) => m.name === 'after'), 'the message after the repeat');
      expect(arrivals.items.map((m) => m.name)).toEqual(['once', 'after']);
      const page = await rest().channels.get(name).history();
      expect(page.items.map((m) => m.name)).toEqual(['after', 'once']);
    });
  });

  describe('rewind (channel params)', () => {
    it('RTL4k: rewind=N sends the last N messages before the live ones, once, and ATTACHED echoes the param', async () => {
      const name = uniqueChannel('rt-rewind');
      await rest().channels.get(name).publish([1, 2, 3, 4].map((i) => ({ name: `old-${i}`, data: String(i) })));
      const client = realtime();
      const channel = client.channels.get(name, { params: { rewind: '3' } });
      const arrivals = await collectMessages(channel);
      expect(channel.params).toEqual({ rewind: '3' });
      await rest().channels.get(name).publish('live', '5');
      await arrivals.until((items) => items.some((m) => m.name === 'live'), "'live'");
      expect(arrivals.items.map((m) => m.name)).toEqual(['old-2', 'old-3', 'old-4', 'live']);
    });

    it('RTL4k: rewind by time sends the messages of that window; a resumed attach is not rewound again', async () => {
      const name = uniqueChannel('rt-rewind-time');
      await rest().channels.get(name).publish('recent', '1');
      const client = realtime();
      const channel = client.channels.get(name, { params: { rewind: '1m' } });
      const arrivals = await collectMessages(channel);
      await arrivals.until((items) => items.length === 1, "'recent'");
      // New params attach it again without a detach (ATTACH_RESUME with its channelSerial): no second rewind.
      await channel.setOptions({ params: { rewind: '2m' } }); // resolves on the new ATTACHED
      expect(channel.params).toEqual({ rewind: '2m' });
      await rest().channels.get(name).publish('live', '2');
      await arrivals.until((items) => items.some((m) => m.name === 'live'), "'live'");
      expect(arrivals.items.map((m) => m.name)).toEqual(['recent', 'live']);
    });

    it('a rewind past what a channel holds for it (100 messages, 2 minutes) is capped there, not refused', async () => {
      const name = uniqueChannel('rt-rewind-cap');
      await rest().channels.get(name).publish(Array.from({ length: 105 }, (_, i) => ({ name: `old-${i}`, data: String(i) })));
      const client = realtime();
      const byCount = client.channels.get(name, { params: { rewind: '5000' } });
      const counted = await collectMessages(byCount);
      expect(byCount.state).toBe('attached');
      await counted.count(100);
      const byTime = realtime().channels.get(name, { params: { rewind: '1h' } });
      const timed = await collectMessages(byTime);
      expect(byTime.state).toBe('attached');
      await timed.count(100);
      await rest().channels.get(name).publish('live', 'x');
      await counted.until((items) => items.some((m) => m.name === 'live'), "'live' after the capped rewind");
      await timed.until((items) => items.some((m) => m.name === 'live'), "'live' after the capped rewind");
      // By count, the last 100 of the 105; by time, those of the last 2 minutes, 100 at most (the
      // platform: "rewind returns at most 100 messages"): the same 100; in order, then the live one, none twice.
      expect(counted.items.map((m) => m.name)).toEqual([...Array.from({ length: 100 }, (_, i) => `old-${i + 5}`), 'live']);
      expect(timed.items.map((m) => m.name)).toEqual([...Array.from({ length: 100 }, (_, i) => `old-${i + 5}`), 'live']);
    });

    it('an unusable rewind fails the attach with 40003', async () => {
      const client = realtime();
      const channel = client.channels.get(uniqueChannel('rt-rewind-bad'), { params: { rewind: 'soon' } });
      const err = await rejection(channel.attach());
      expect(err.code).toBe(40003);
      expect(channel.state).toBe('failed');
    });
  });
});
