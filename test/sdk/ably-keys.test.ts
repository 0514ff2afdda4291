// Key management seen from the official SDK (npm `ably` v2), unmodified (issue 24 item 2): a key
// made through /apps/<appId>/keys works for Rest and Realtime clients at once; revoked, the
// Realtime client on it goes `failed` with 40131 and a Rest client is refused with 40131.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { rejection } from '../helpers/sdk.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Clients, connectionState, realtimeClient, within } from '../helpers/realtime.js';

let ts: TestService;
let port: number;
let root: Ably.Rest;
const clients = new Clients();

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
  root = new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false, logLevel: 0 });
});
afterAll(async () => {
  await clients.closeAll();
  await ts.close();
  removeDir(ts.dataDir);
});

describe.each([false, true])('keys made and revoked through the route (useBinaryProtocol %s)', (useBinaryProtocol) => {
  it('a new key works for Rest and Realtime; revoked, Realtime goes failed with 40131 and Rest is refused with 40131', async () => {
    const appId = ts.key.split('.')[0];
    const created = await root.request('post', `/apps/${appId}/keys`, 6, null, { name: `sdk-${useBinaryProtocol}`, capability: { '*': ['publish', 'subscribe'] } });
    expect(created.statusCode).toBe(201);
    const made = created.items[0] as unknown as { id: string; key: string };

    const rest = new Ably.Rest({ key: made.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0 });
    const channel = uniqueChannel('sdk-keys');
    await rest.channels.get(channel).publish('greeting', 'hello');
    const realtime = clients.add(realtimeClient(port, useBinaryProtocol, { key: made.key }));
    await connectionState(realtime, 'connected');

    const failed = within(
      new Promise<Ably.ConnectionStateChange>((resolve) => realtime.connection.once('failed', resolve)),
      15_000,
      'the Realtime client on the revoked key to go failed',
    );
    const revoked = await root.request('post', `/apps/${appId}/keys/${made.id}/revoke`, 6, null, null);
    expect(revoked.statusCode).toBe(200);
    expect((await failed).reason).toMatchObject({ code: 40131, statusCode: 401 });
    expect(await rejection(rest.channels.get(channel).publish('again', 'x'))).toMatchObject({ code: 40131, statusCode: 401 });
  });
});
