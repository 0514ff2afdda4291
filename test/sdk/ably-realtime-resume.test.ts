// The official SDK's Realtime client (npm `ably` v2), unmodified, against the real listening
// service: the resume of a connection whose socket dropped, with the messages published meanwhile,
// in both wire formats. (Capabilities, clientIds and token expiry: ably-realtime-auth.test.ts.)
import { describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { WIRE_FORMATS } from '../helpers/sdk.js';
import { sdkSuite } from '../helpers/sdk-suite.js';
import { uniqueChannel } from '../helpers/service.js';
import { collectMessages, connectionState, stateLog, within } from '../helpers/realtime.js';

const suite = sdkSuite();

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, resume ($format)', ({ format, useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions, via?: number): Ably.Realtime => suite.realtime(useBinaryProtocol, options, via);
  const rest = (options?: Ably.ClientOptions): Ably.Rest => suite.rest(useBinaryProtocol, options);

  describe('resume', () => {
    it('RTN15c6, RTL4j: after the socket drops, the resumed connection keeps its id and gets every message published meanwhile, once', async () => {
      const network = await suite.relay();
      const client = realtime({ key: suite.ts.key, clientId: `resumer-${format}` }, network.port);
      const [nameA, nameB] = [uniqueChannel('rt-resume-a'), uniqueChannel('rt-resume-b')];
      const [channelA, channelB] = [client.channels.get(nameA), client.channels.get(nameB)];
      const [arrivalsA, arrivalsB] = [await collectMessages(channelA), await collectMessages(channelB)];
      const publisher = rest();
      await publisher.channels.get(nameA).publish('before', '0');
      await arrivalsA.count(1);
      const connectionId = client.connection.id;
      const connectionStates = stateLog(client.connection);
      const channelStates = stateLog(channelA);

      network.cut();
      await connectionState(client, 'disconnected');
      // The SDK's reconnection attempt waits at the relay while these are published and acknowledged.
      for (let i = 1; i <= 5; i++) await publisher.channels.get(nameA).publish(`meanwhile-${i}`, String(i));
      await publisher.channels.get(nameB).publish([{ name: 'b-1' }, { name: 'b-2' }]);
      // A realtime publish while disconnected is queued by the SDK and sent on the resumed connection.
      const queued = channelA.publish('queued', 'while disconnected');
      network.release();
      await connectionState(client, 'connected');
      await queued;
      await publisher.channels.get(nameA).publish('after', '6');
      await publisher.channels.get(nameB).publish('b-after', '3');

      // Delivery follows the log: once 'after' is here, anything sent twice or late would have been too.
      await arrivalsA.until((items) => items.some((m) => m.name === 'after'), "'after' on channel A");
      await arrivalsB.until((items) => items.some((m) => m.name === 'b-after'), "'b-after' on channel B");
      expect(arrivalsA.items.map((m) => m.name)).toEqual([
        'before',
        'meanwhile-1',
        'meanwhile-2',
        'meanwhile-3',
        'meanwhile-4',
        'meanwhile-5',
        'queued',
        'after',
      ]);
      expect(arrivalsB.items.map((m) => m.name)).toEqual(['b-1', 'b-2', 'b-after']);
      expect(new Set(arrivalsA.items.map((m) => m.id)).size).toBe(arrivalsA.items.length);

      // The same connection (RTN15c6): no error on the way back, and the channel resumed.
      expect(client.connection.id).toBe(connectionId);
      expect(connectionStates.map((s) => s.current)).toEqual(['disconnected', 'connecting', 'connected']);
      expect(connectionStates[2].code).toBeUndefined();
      expect(channelStates.filter((s) => s.current === 'attached')).toEqual([{ current: 'attached', resumed: true }]);
      expect(channelA.state).toBe('attached');
      // The queued publish was published once.
      const history = await publisher.channels.get(nameA).history();
      expect(history.items.filter((m) => m.name === 'queued')).toHaveLength(1);
      expect(history.items.find((m) => m.name === 'queued')!.connectionId).toBe(connectionId);
    });

    it('RTN19a, RTN15c6: a publish whose ACK was lost with the socket is sent again on the resumed connection, acknowledged, and published once', async () => {
      const network = await suite.relay();
      const client = realtime({ key: suite.ts.key }, network.port);
      const name = uniqueChannel('rt-resend');
      const channel = client.channels.get(name);
      await channel.attach();
      const watcher = await collectMessages(realtime({ key: suite.ts.key }).channels.get(name));
      const connectionId = client.connection.id;

      // The service gets the publish and acknowledges it; the ACK never reaches the SDK.
      network.mute();
      let acknowledged = false;
      const publish = channel.publish('in-flight', 'once').then((result) => {
        acknowledged = true;
        return result;
      });
      await watcher.count(1);
      network.cut();
      await connectionState(client, 'disconnected');
      expect(acknowledged).toBe(false);
      network.release();
      const result = await within(publish, 15_000, 'the ACK of the publish sent again');
      expect(result.serials).toHaveLength(1);
      expect(client.connection.id).toBe(connectionId);

      await rest().channels.get(name).publish('after', 'the resume');
      await watcher.until((items) => items.some((m) => m.name === 'after'), "'after'");
      expect(watcher.items.map((m) => m.name)).toEqual(['in-flight', 'after']);
      const history = await rest().channels.get(name).history({ direction: 'forwards' });
      expect(history.items.map((m) => m.name)).toEqual(['in-flight', 'after']);
    });

    it('RTN16: a new client given the recovery key of one whose socket dropped takes over its connection and gets what was published meanwhile', async () => {
      const network = await suite.relay();
      const first = realtime({ key: suite.ts.key, clientId: `recovered-${format}` }, network.port);
      const name = uniqueChannel('rt-recover');
      const firstChannel = first.channels.get(name);
      const firstArrivals = await collectMessages(firstChannel);
      await firstChannel.publish('before', 'by the first client');
      await firstArrivals.count(1);
      const connectionId = first.connection.id;
      const recoveryKey = first.connection.createRecoveryKey();
      expect(recoveryKey).toEqual(expect.any(String));
      expect(JSON.parse(recoveryKey!)).toMatchObject({ msgSerial: 1, channelSerials: { [name]: expect.any(String) } });

      // The page reloads: the first client's socket is gone and it never comes back.
      network.cut();
      await connectionState(first, 'disconnected');
      const publisher = rest();
      for (let i = 1; i <= 3; i++) await publisher.channels.get(name).publish(`meanwhile-${i}`, String(i));

      const second = realtime({ key: suite.ts.key, clientId: `recovered-${format}`, recover: recoveryKey! });
      const connected = new Promise<Ably.ConnectionStateChange>((resolve) => second.connection.once('connected', resolve));
      const change = await within(connected, 15_000, 'the recovering client to connect');
      expect(change.reason ?? null).toBeNull();
      expect(second.connection.id).toBe(connectionId);
      // The recovered channel attaches from where the first client was.
      const secondChannel = second.channels.get(name);
      const arrivals = await collectMessages(secondChannel);
      // Its msgSerial goes on from the first client's, so this is not taken for a repeat of 'before'.
      await secondChannel.publish('after', 'by the second client');
      await arrivals.until((items) => items.some((m) => m.name === 'after'), "'after'");
      expect(arrivals.items.map((m) => m.name)).toEqual(['meanwhile-1', 'meanwhile-2', 'meanwhile-3', 'after']);
      const history = await publisher.channels.get(name).history({ direction: 'forwards' });
      expect(history.items.map((m) => [m.name, m.connectionId])).toEqual([
        ['before', connectionId],
        ['meanwhile-1', undefined],
        ['meanwhile-2', undefined],
        ['meanwhile-3', undefined],
        ['after', connectionId],
      ]);
      first.close();
    });

    it('RTN15c7: a resume the service cannot honour gives a new connection, with the reason, and the channels attached again', async () => {
      const network = await suite.relay();
      const client = realtime({ key: suite.ts.key }, network.port);
      await connectionState(client, 'connected');
      const connectionId = client.connection.id;
      // A connectionKey the service never issued: the SDK sends it as `resume` on its next connection.
      const manager = (client.connection as unknown as { connectionManager: { connectionKey?: string } }).connectionManager;
      expect(manager.connectionKey).toBe(client.connection.key);
      manager.connectionKey = `${connectionId}!not-a-key-it-issued`;
      const name = uniqueChannel('rt-resume-fail');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);

      const connected = new Promise<Ably.ConnectionStateChange>((resolve) => client.connection.once('connected', resolve));
      network.cut();
      network.release();
      const change = await within(connected, 15_000, 'the connection to reconnect');
      expect(client.connection.id).not.toBe(connectionId);
      expect(change.reason).toBeDefined();
      expect(change.reason!.code).toEqual(expect.any(Number));
      await within(channel.whenState('attached'), 15_000, 'the channel to re-attach');
      await rest().channels.get(name).publish('after', 'the new connection');
      await arrivals.until((items) => items.some((m) => m.name === 'after'), "'after'");
    });
  });
});
