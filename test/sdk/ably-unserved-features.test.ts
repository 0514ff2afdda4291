// Features of the SDK (npm `ably` 2.28) this service does not serve, refused with an error the SDK
// hands to the caller, never taken as something else: updateMessage, deleteMessage and appendMessage
// over realtime (a MESSAGE whose message carries action 1, 2 or 5: before, published as a new
// message, with a serial the SDK took for the version's) and over REST (no such route: 404), message
// annotations over realtime (an ANNOTATION frame: before, never answered, the call hung), and a REST
// publish body with such an action. The connection and the channel go on; the channel's history
// holds only what was published.
import { describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection } from '../helpers/sdk.js';
import { uniqueChannel } from '../helpers/service.js';
import { collectMessages, realtimeClient } from '../helpers/realtime.js';
import { sdkService } from '../helpers/sdk-service.js';

const svc = sdkService();

const FORMATS: { format: string; useBinaryProtocol: boolean; transports?: Ably.Transport[] }[] = [
  { format: 'json', useBinaryProtocol: false },
  { format: 'msgpack', useBinaryProtocol: true },
  { format: 'json over comet', useBinaryProtocol: false, transports: ['comet'] },
];

// A message as the SDK's callers hold one to update: with a serial (this service's messages carry
// none, so the SDK refuses locally without one; a caller can still pass one of its own).
const withSerial = { serial: 'serial-from-elsewhere', name: 'edited', data: 'v2' } as unknown as Ably.Message;

describe.each(FORMATS)('ably-js v2: features not served ($format)', ({ useBinaryProtocol, transports }) => {
  const realtime = (): Ably.Realtime => svc.clients.add(realtimeClient(svc.port, useBinaryProtocol, transports ? { key: svc.ts.key, transports } : { key: svc.ts.key }));
  const rest = (): Ably.Rest => new Ably.Rest({ key: svc.ts.key, endpoint: '127.0.0.1', port: svc.port, tls: false, useBinaryProtocol, logLevel: 0 });

  it('realtime updateMessage, deleteMessage, appendMessage and annotations.publish are rejected with 40030; the channel goes on and holds only what was published', async () => {
    const name = uniqueChannel('unserved-sdk');
    const client = realtime();
    const channel = client.channels.get(name);
    const arrivals = await collectMessages(channel);
    await channel.publish('first', 'v1');
    const refusals = [
      await rejection(channel.updateMessage(withSerial)),
      await rejection(channel.deleteMessage(withSerial)),
      await rejection(channel.appendMessage(withSerial)),
      await rejection(channel.annotations.publish('serial-from-elsewhere', { type: 'reaction:distinct.v1', name: 'like' })),
    ];
    expect(refusals.map((e) => [e.code, e.statusCode])).toEqual([
      [40030, 400],
      [40030, 400],
      [40030, 400],
      [40030, 400],
    ]);
    expect(refusals[0].message).toMatch(/no updates, deletes or appends/);
    expect(refusals[3].message).toMatch(/annotations/);
    // The next publish is acknowledged as its own (no ACK covered a refused frame's serial).
    await channel.publish('last', 'v3');
    await arrivals.until((items) => items.some((m) => m.name === 'last'), "'last'");
    expect(client.connection.state).toBe('connected');
    expect(channel.state).toBe('attached');
    expect(arrivals.items.map((m) => m.name)).toEqual(['first', 'last']);
    expect((await rest().channels.get(name).history({ direction: 'forwards' })).items.map((m) => m.name)).toEqual(['first', 'last']);
  });

  it('REST updateMessage is a 404 (no such route), and a REST publish of an update is refused with 40030, nothing appended', async () => {
    const name = uniqueChannel('unserved-rest');
    const channel = rest().channels.get(name);
    const updated = await rejection(channel.updateMessage(withSerial));
    expect([updated.code, updated.statusCode]).toEqual([40400, 404]);
    const res = await rest().request('post', `/channels/${name}/messages`, 3, {}, [{ name: 'edited', data: 'v2', action: 1, serial: 'serial-from-elsewhere' }]);
    expect([res.statusCode, res.errorCode]).toEqual([400, 40030]);
    // The SDK's own publishes say action 0 (message.create), or nothing: taken.
    await channel.publish('created', 'v1');
    expect((await rest().request('post', `/channels/${name}/messages`, 3, {}, [{ name: 'plain', action: 0 }])).statusCode).toBe(201);
    expect((await channel.history({ direction: 'forwards' })).items.map((m) => m.name)).toEqual(['created', 'plain']);
  });
});
