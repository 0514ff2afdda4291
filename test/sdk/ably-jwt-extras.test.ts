// The official SDK (npm `ably` v2), unmodified, with the platform's JWTs (issue 26 item 6) and with
// message extras (item 3), in both wire formats: a JWT from an authCallback or given as the token,
// over REST (Bearer) and realtime (access_token, AUTH); its clientId and capability enforced; its
// expiry renewed through the authCallback; a JWT of the app's own embedding a native token; a JWT the service refuses ends in `failed` rather than
// retries; extras.headers and extras.ref published and read back by subscribers, history and
// presence, over REST and realtime.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { SignJWT } from 'jose';
import { rejection } from '../helpers/sdk.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Arrivals, Clients, collectMessages, collectPresence, connectionState, currentToken, realtimeClient, stateLog, within } from '../helpers/realtime.js';

let ts: TestService;
let port: number;
let keyName: string;
let secret: string;
const clients = new Clients();

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
  [keyName, secret] = [ts.key.slice(0, ts.key.indexOf(':')), ts.key.slice(ts.key.indexOf(':') + 1)];
});
afterEach(() => clients.closeAll());
afterAll(async () => {
  await clients.closeAll();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** A JWT as an app's auth server makes one for the SDK: HS256 with the key secret, kid the key name. */
function jwt(claims: Record<string, unknown> = {}, options: { ttlSeconds?: number; secret?: string } = {}): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT({ iat, exp: iat + (options.ttlSeconds ?? 3600), ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: keyName })
    .sign(new TextEncoder().encode(options.secret ?? secret));
}

// The SDK's comet transport (the long-poll fallback) speaks JSON whatever useBinaryProtocol says.
const FORMATS: { format: string; useBinaryProtocol: boolean; transports?: Ably.Transport[] }[] = [
  { format: 'json', useBinaryProtocol: false },
  { format: 'msgpack', useBinaryProtocol: true },
  { format: 'json over comet', useBinaryProtocol: false, transports: ['comet'] },
];

describe.each(FORMATS)('ably-js v2 with JWTs and message extras ($format)', ({ format, useBinaryProtocol, transports }) => {
  const realtime = (options: Ably.ClientOptions): Ably.Realtime => clients.add(realtimeClient(port, useBinaryProtocol, transports ? { transports, ...options } : options));
  const rest = (options: Ably.ClientOptions = { key: ts.key }): Ably.Rest => new Ably.Rest({ endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0, ...options });

  describe('JWT over REST', () => {
    it('RSA8g: a JWT from the authCallback publishes as its x-ably-clientId and reads history', async () => {
      const clientId = `jwt-rest-${format}`;
      const client = rest({ authCallback: (_params, callback) => void jwt({ 'x-ably-clientId': clientId }).then((t) => callback(null, t), (e: Error) => callback(e.message, null)) });
      const channel = client.channels.get(uniqueChannel('jwt-rest'));
      await channel.publish('greeting', 'hello');
      const page = await channel.history();
      expect(page.items.map((m) => [m.name, m.data, m.clientId])).toEqual([['greeting', 'hello', clientId]]);
    });

    it('RSC1: a JWT given as the token works; a forged one fails the request with 40171 (a token error nothing can renew)', async () => {
      await rest({ token: await jwt() }).channels.get(uniqueChannel('jwt-rest')).publish('n', 'd');
      const err = await rejection(rest({ token: await jwt({}, { secret: 'forged' }) }).channels.get(uniqueChannel('jwt-rest')).publish('n', 'd'));
      // The service answers 40144 (test/http/jwt.test.ts); the SDK turns a token error (4014x) it
      // cannot renew into 40171 and gives up, rather than retrying.
      expect(err).toMatchObject({ code: 40171 });
    });

    it('x-ably-capability limits the JWT: a publish outside it is 40160', async () => {
      const client = rest({ token: await jwt({ 'x-ably-capability': JSON.stringify({ 'allowed:*': ['publish', 'history'] }) }) });
      await client.channels.get('allowed:one').publish('n', 'd');
      expect(await rejection(client.channels.get(uniqueChannel('other')).publish('n', 'd'))).toMatchObject({ code: 40160, statusCode: 401 });
    });
  });

  describe('JWT over realtime', () => {
    it('connects with a JWT from the authCallback: the clientId comes from the claim; publish and subscribe work', async () => {
      const clientId = `jwt-rt-${format}`;
      const client = realtime({ authCallback: (_params, callback) => void jwt({ 'x-ably-clientId': clientId }).then((t) => callback(null, t), (e: Error) => callback(e.message, null)) });
      await connectionState(client, 'connected');
      expect(client.auth.clientId).toBe(clientId);
      const channel = client.channels.get(uniqueChannel('jwt-rt'));
      const arrivals = await collectMessages(channel);
      await channel.publish('n', 'over a JWT');
      expect((await arrivals.count(1)).map((m) => [m.data, m.clientId])).toEqual([['over a JWT', clientId]]);
    });

    it("connects and publishes over REST with a JWT of the app's own scheme embedding a native token (x-ably-token): the token's clientId", async () => {
      const clientId = `embedded-${format}`;
      const native = await rest().auth.requestToken({ clientId });
      // Signed with the app server's own secret, which the service does not know.
      const iat = Math.floor(Date.now() / 1000);
      const embedding = (where: 'header' | 'claims'): Promise<string> =>
        new SignJWT({ iat, exp: iat + 600, ...(where === 'claims' ? { 'x-ably-token': native.token } : {}) })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT', ...(where === 'header' ? { 'x-ably-token': native.token } : {}) })
          .sign(new TextEncoder().encode('the app server own secret'));
      const client = realtime({ authCallback: (_params, callback) => void embedding('header').then((t) => callback(null, t), (e: Error) => callback(e.message, null)) });
      await connectionState(client, 'connected');
      expect(client.auth.clientId).toBe(clientId);
      const name = uniqueChannel('jwt-embedded');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      await channel.publish('n', 'over an embedded token');
      await rest({ token: await embedding('claims') }).channels.get(name).publish('r', 'over REST');
      expect((await arrivals.count(2)).map((m) => [m.data, m.clientId])).toEqual([
        ['over an embedded token', clientId],
        ['over REST', clientId],
      ]);
    });

    it('connects over comet (the long-poll fallback) with a JWT seen for the first time: checked before the connection is made', async () => {
      const clientId = `jwt-comet-${format}`;
      const client = realtime({ transports: ['comet'], authCallback: (_params, callback) => void jwt({ 'x-ably-clientId': clientId }).then((t) => callback(null, t), (e: Error) => callback(e.message, null)) });
      await connectionState(client, 'connected');
      const manager = (client.connection as unknown as { connectionManager: { activeProtocol?: { transport?: { shortName?: string } } } }).connectionManager;
      expect(manager.activeProtocol?.transport?.shortName).toBe('comet');
      expect(client.auth.clientId).toBe(clientId);
      const channel = client.channels.get(uniqueChannel('jwt-comet'));
      const arrivals = await collectMessages(channel);
      await channel.publish('n', 'over comet and a JWT');
      expect((await arrivals.count(1)).map((m) => [m.data, m.clientId])).toEqual([['over comet and a JWT', clientId]]);
    });

    it('x-ably-capability: attaching outside it fails the channel with 40160; the connection stays', async () => {
      const client = realtime({ token: await jwt({ 'x-ably-capability': JSON.stringify({ 'rt-allowed:*': ['subscribe'] }) }) });
      await connectionState(client, 'connected');
      expect(await rejection(client.channels.get(uniqueChannel('rt-refused')).attach())).toMatchObject({ code: 40160 });
      await client.channels.get('rt-allowed:x').attach();
      expect(client.connection.state).toBe('connected');
    });

    it('a forged JWT given as the token ends the connection in failed (40171 over the service 40144), not in retries', async () => {
      const client = realtime({ token: await jwt({}, { secret: 'forged' }) });
      const states = stateLog(client.connection);
      await connectionState(client, 'failed', 15_000).catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason?.code).toBe(40171);
      expect(states.map((s) => s.current)).not.toContain('connected');
    });

    it('a JWT whose kid names no app of this service fails the connection with 40400', async () => {
      const iat = Math.floor(Date.now() / 1000);
      const token = await new SignJWT({ iat, exp: iat + 60 }).setProtectedHeader({ alg: 'HS256', kid: 'noSuchApp.key' }).sign(new TextEncoder().encode(secret));
      const client = realtime({ authCallback: (_params, callback) => callback(null, token) });
      await connectionState(client, 'failed', 15_000).catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40400 });
    });

    it('RTN22: a JWT about to expire is renewed through the authCallback when the service sends AUTH (an update on the new JWT, same connection, never disconnected)', async () => {
      const handed: string[] = [];
      const client = realtime({
        authCallback: (_params, callback) => {
          if (handed.length >= 3) return callback('no more tokens in this test', null);
          void jwt({ 'x-ably-clientId': `jwt-renew-${format}` }, { ttlSeconds: handed.length === 0 ? 2 : 60 }).then((t) => {
            handed.push(t);
            callback(null, t);
          });
        },
      });
      await connectionState(client, 'connected');
      const connectionId = client.connection.id;
      const events = new Arrivals<Ably.ConnectionStateChange>();
      client.connection.on(events.push);
      const changes = await events.until((c) => c.length > 0, 'the renewal', 20_000);
      // The update of an in-place renewal: connected to connected, without a reason.
      expect(changes.map((c) => [c.previous, c.current, c.reason?.code])).toEqual([['connected', 'connected', undefined]]);
      expect(client.connection.id).toBe(connectionId);
      expect(handed).toHaveLength(2);
      expect(currentToken(client)).toBe(handed[1]);
    });

    it('RTC8: auth.authorize() sends the new JWT in an AUTH; the connection stays and takes its capability', async () => {
      let capability: Record<string, string[]> = { 'first:*': ['subscribe'] };
      const client = realtime({ authCallback: (_params, callback) => void jwt({ 'x-ably-capability': JSON.stringify(capability) }).then((t) => callback(null, t)) });
      await connectionState(client, 'connected');
      const connectionId = client.connection.id;
      expect(await rejection(client.channels.get('second:x').attach())).toMatchObject({ code: 40160 });
      capability = { 'second:*': ['subscribe'] };
      await client.auth.authorize();
      expect(client.connection.state).toBe('connected');
      expect(client.connection.id).toBe(connectionId);
      await within(client.channels.get('second:y').attach(), 10_000, 'an attach the new JWT allows');
    });
  });

  describe('message extras (headers, ref, push)', () => {
    // (A null header value is kept too, test/unit/message-validation.test.ts, but the SDK's
    // MessagePack encoder leaves null map values out.)
    const extras = { headers: { kind: 'reply', n: 3, urgent: true }, ref: { type: 'com.ably.reply', timeserial: 'abc@1700000000000-0' } };

    it('REST and realtime publishes keep extras: subscribers and history get them back', async () => {
      const name = uniqueChannel('extras');
      const client = realtime({ key: ts.key });
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      await channel.publish({ name: 'rt', data: 'd', extras });
      await rest().channels.get(name).publish({ name: 'rest', data: 'd', extras: { ...extras, push: { notification: { title: 't' } } } });
      const got = await arrivals.count(2);
      expect(got.map((m) => [m.name, m.extras])).toEqual([
        ['rt', extras],
        ['rest', { ...extras, push: { notification: { title: 't' } } }],
      ]);
      const history = await rest().channels.get(name).history({ direction: 'forwards' });
      expect(history.items.map((m) => [m.name, m.extras])).toEqual(got.map((m) => [m.name, m.extras]));
    });

    it('presence members carry extras: the set, the events and presence history', async () => {
      const name = uniqueChannel('extras-presence');
      const watcher = realtime({ key: ts.key });
      const events = await collectPresence(watcher.channels.get(name));
      const member = realtime({ key: ts.key, clientId: `member-${format}` });
      // The SDK sends a presence message's extras when it is given a PresenceMessage (RTP8e).
      await member.channels.get(name).presence.enter(Ably.Realtime.PresenceMessage.fromValues({ data: 'here', extras }));
      const [entered] = await events.count(1);
      expect(entered.extras).toEqual(extras);
      const members = await watcher.channels.get(name).presence.get();
      expect(members.map((m) => m.extras)).toEqual([extras]);
      const history = await rest().channels.get(name).presence.history();
      expect(history.items.map((m) => m.extras)).toEqual([extras]);
    });

    it('bad extras are refused with 40032 naming the field, over REST and realtime', async () => {
      const name = uniqueChannel('extras-bad');
      const restErr = await rejection(rest().channels.get(name).publish({ data: 'd', extras: { headers: { h: { nested: true } } } }));
      expect(restErr).toMatchObject({ code: 40032, statusCode: 400 });
      const client = realtime({ key: ts.key });
      const rtErr = await rejection(client.channels.get(name).publish({ data: 'd', extras: { ref: { type: 'com.ably.reply' } } }));
      expect(rtErr).toMatchObject({ code: 40032 });
      expect((rtErr as { message?: string }).message).toMatch(/timeserial/);
    });
  });
});
