// The official SDK's Realtime client (npm `ably` v2), unmodified, against the real listening
// service: capabilities and clientIds enforced on attach, publish and presence; tokens that expire
// while connected (renewed through the authCallback without losing the channels, or ending the
// connection when nothing can renew them), in both wire formats. (The resume of a dropped
// connection: ably-realtime-resume.test.ts.)
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { sdkSuite } from '../helpers/sdk-suite.js';
import { uniqueChannel } from '../helpers/service.js';
import { Arrivals, collectMessages, connectionState, currentToken, stateLog, within } from '../helpers/realtime.js';

const postApps: unknown = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;

/** Keys of an app made from test-app-setup.json, in setup order. */
let fixtureKeys: string[];
const suite = sdkSuite({}, async ({ ts, port }) => {
  const root = new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false, logLevel: 0 });
  const created = await root.request('post', '/apps', 6, null, postApps as Record<string, unknown>);
  expect(created.statusCode).toBe(201);
  fixtureKeys = (created.items[0] as unknown as { keys: { keyStr: string }[] }).keys.map((k) => k.keyStr);
});

describe.each(WIRE_FORMATS)('ably-js v2 Realtime client, auth ($format)', ({ format, useBinaryProtocol }) => {
  const realtime = (options: Ably.ClientOptions, via?: number): Ably.Realtime => suite.realtime(useBinaryProtocol, options, via);
  const rest = (options?: Ably.ClientOptions): Ably.Rest => suite.rest(useBinaryProtocol, options);
  const token = (params: Ably.TokenParams): Promise<Ably.TokenDetails> => rest().auth.requestToken(params);

  describe('capabilities and clientId', () => {
    it('RTL4e, RTL14: attaching to a channel outside the capability fails the channel with 40160; the connection and other channels go on', async () => {
      const details = await token({ capability: { 'allowed-*': ['publish', 'subscribe', 'presence'] } });
      const client = realtime({ tokenDetails: details });
      const refused = client.channels.get(uniqueChannel('refused'));
      const err = await rejection(refused.attach());
      expect(err).toMatchObject({ code: 40160, statusCode: 401 });
      expect(refused.state).toBe('failed');
      expect(refused.errorReason).toMatchObject({ code: 40160 });

      expect(client.connection.state).toBe('connected');
      const allowed = client.channels.get(uniqueChannel('allowed'));
      const arrivals = await collectMessages(allowed);
      await allowed.publish('still', 'works');
      expect((await arrivals.count(1)).map((m) => m.data)).toEqual(['works']);
    });

    it('RTL4e: a capability of "*" does not reach metachannels: attaching [meta]channel.lifecycle fails with 40160', async () => {
      const details = await token({ capability: { '*': ['*'] } });
      const client = realtime({ tokenDetails: details });
      const meta = client.channels.get('[meta]channel.lifecycle');
      expect(await rejection(meta.attach())).toMatchObject({ code: 40160, statusCode: 401 });
      expect(meta.state).toBe('failed');
    });

    it('RTL6: nobody publishes or enters presence on a metachannel, whatever the capability', async () => {
      // The root key's capability is {"[*]*":["*"]}: everything, metachannels included.
      const client = realtime({ key: suite.ts.key, clientId: `meta-${format}` });
      const meta = client.channels.get('[meta]channel.lifecycle');
      await meta.attach();
      expect(await rejection(meta.publish('forged', 'event'))).toMatchObject({ code: 40160 });
      expect(await rejection(meta.presence.enter('here'))).toMatchObject({ code: 40160 });
      expect(meta.state).toBe('attached');
    });

    it('RTL6, RTN7: publishing without the publish capability is refused with 40160 and stored nowhere', async () => {
      const details = await token({ capability: { 'subonly-*': ['subscribe'] } });
      const client = realtime({ tokenDetails: details });
      const name = `subonly-${uniqueChannel()}`;
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      // RTL4m: the modes granted are those the capability permits.
      expect(channel.modes).toContain('subscribe');
      expect(channel.modes).not.toContain('publish');
      expect(channel.modes).not.toContain('presence');

      const err = await rejection(channel.publish('refused', 'no'));
      expect(err).toMatchObject({ code: 40160, statusCode: 401 });
      // The channel stays attached, and gets what others publish.
      expect(channel.state).toBe('attached');
      await rest().channels.get(name).publish('allowed', 'from the root key');
      await arrivals.count(1);
      expect(arrivals.items.map((m) => m.name)).toEqual(['allowed']);
      expect((await rest().channels.get(name).history()).items.map((m) => m.name)).toEqual(['allowed']);
    });

    it('RTP8, RTN7: entering presence without the presence capability is refused with 40160', async () => {
      const details = await token({ clientId: `nopresence-${format}`, capability: { 'nopres-*': ['subscribe', 'publish'] } });
      const client = realtime({ tokenDetails: details });
      const name = `nopres-${uniqueChannel()}`;
      const channel = client.channels.get(name);
      await channel.attach();
      const err = await rejection(channel.presence.enter('no'));
      expect(err).toMatchObject({ code: 40160, statusCode: 401 });
      expect((await rest().channels.get(name).presence.get()).items).toEqual([]);
      // Publishing is allowed.
      await channel.publish('allowed', 'yes');
    });

    it('RTL6, RTN7: a key whose capability only subscribes attaches, and its publish and presence are refused with 40160', async () => {
      // keys[3] of test-app-setup.json: { "*": ["subscribe"] }.
      const client = realtime({ key: fixtureKeys[3], clientId: `subscriber-${format}` });
      const channel = client.channels.get(uniqueChannel('key-subonly'));
      await channel.attach();
      expect(channel.modes).not.toContain('publish');
      expect(await rejection(channel.publish('refused', 'no'))).toMatchObject({ code: 40160 });
      expect(await rejection(channel.presence.enter('no'))).toMatchObject({ code: 40160 });
    });

    it('RTP15f, RSA7: an identified token may not act for another clientId: enterClient and publish are refused with 40012', async () => {
      const details = await token({ clientId: `alice-${format}` });
      const client = realtime({ tokenDetails: details });
      const name = uniqueChannel('rt-impersonate');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);

      expect(await rejection(channel.presence.enterClient(`mallory-${format}`, 'pretending'))).toMatchObject({ code: 40012, statusCode: 400 });
      expect(await rejection(channel.publish({ name: 'forged', data: 'x', clientId: `mallory-${format}` }))).toMatchObject({ code: 40012 });

      // Its own identity is fine, implicit or explicit.
      await channel.presence.enter('as myself');
      await channel.publish({ name: 'explicit', data: 'y', clientId: `alice-${format}` });
      await channel.publish('implicit', 'z');
      await arrivals.count(2);
      expect(arrivals.items.map((m) => [m.name, m.clientId])).toEqual([
        ['explicit', `alice-${format}`],
        ['implicit', `alice-${format}`],
      ]);
      const members = await rest().channels.get(name).presence.get();
      expect(members.items.map((m) => m.clientId)).toEqual([`alice-${format}`]);
    });

    it('RSA7, identified clients: a token issued without a clientId may not publish as one (40012); a key may', async () => {
      const details = await token({});
      const client = realtime({ tokenDetails: details });
      const name = uniqueChannel('rt-anonymous');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      expect(await rejection(channel.publish({ name: 'forged', data: 'x', clientId: `mallory-${format}` }))).toMatchObject({ code: 40012, statusCode: 400 });
      await channel.publish('anonymous', 'y');
      const keyed = realtime({ key: suite.ts.key });
      await keyed.channels.get(name).publish({ name: 'claimed', data: 'z', clientId: `carol-${format}` });
      await arrivals.count(2);
      expect(arrivals.items.map((m) => [m.name, m.clientId])).toEqual([
        ['anonymous', undefined],
        ['claimed', `carol-${format}`],
      ]);
    });

    it('RSA15c, RTN4: a token for one clientId, with a clientId option that differs, fails the connection with 40102', async () => {
      const details = await token({ clientId: `alice-${format}` });
      // A bare token: the SDK cannot see the token's clientId and sends its own as the clientId parameter.
      const client = realtime({ token: details.token, clientId: `bob-${format}` });
      await connectionState(client, 'failed').catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40102 });
    });
  });

  describe('token expiry', () => {
    it('RTN15h2, RTN22, RSA4: a short-lived token from the authCallback is renewed; the connection and its channels stay', async () => {
      const keyRest = rest();
      const issued: Ably.TokenDetails[] = [];
      let renewed: () => void = () => undefined;
      const secondToken = new Promise<void>((resolve) => (renewed = resolve));
      const client = realtime({
        authCallback: (_params, callback) => {
          // The first token lives 2 s; the next ones a minute. A third is more than this test needs.
          if (issued.length >= 3) return callback('no more tokens in this test', null);
          keyRest.auth.requestToken({ clientId: `renewing-${format}`, ttl: issued.length === 0 ? 2_000 : 60_000 }).then(
            (details) => {
              issued.push(details);
              callback(null, details);
              if (issued.length === 2) renewed();
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      await connectionState(client, 'connected');
      const connectionId = client.connection.id;
      const connectionStates = stateLog(client.connection);
      const connectionEvents = new Arrivals<Ably.ConnectionStateChange>();
      client.connection.on(connectionEvents.push);
      const name = uniqueChannel('rt-renew');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      const channelStates = stateLog(channel);
      await channel.publish('before', 'expiry');

      await within(secondToken, 20_000, 'the SDK to ask for a second token (the service asks it to renew before the first expires)');
      // Renewed in place (AUTH, then CONNECTED: an update) or by a resume after DISCONNECTED 4014x.
      const renewal = await connectionEvents.until(
        (changes) => changes.some((c) => c.current === 'connected'),
        'the connection to be connected on the new token',
      );
      expect(renewal.find((c) => c.current === 'connected')!.reason ?? null).toBeNull();
      expect(client.connection.id).toBe(connectionId);
      expect(currentToken(client)).toBe(issued[1].token);
      for (const s of connectionStates.filter((s) => s.current === 'disconnected')) {
        expect(s.code).toBeGreaterThanOrEqual(40140);
        expect(s.code).toBeLessThan(40150);
      }
      expect(connectionStates.map((s) => s.current)).not.toContain('failed');

      // Past the first token's expiry, the channel works both ways.
      await new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, issued[0].expires - Date.now() + 200)));
      await channel.publish('after', 'renewal');
      await rest().channels.get(name).publish('rest', 'after renewal');
      await arrivals.count(3);
      expect(arrivals.items.map((m) => [m.name, m.clientId])).toEqual([
        ['before', `renewing-${format}`],
        ['after', `renewing-${format}`],
        ['rest', undefined],
      ]);
      // The channel was never detached, suspended or failed; re-attached on a resume it kept its continuity.
      expect(channel.state).toBe('attached');
      for (const s of channelStates) {
        expect(['attaching', 'attached']).toContain(s.current);
        if (s.current === 'attached') expect(s.resumed).toBe(true);
      }
      expect(issued).toHaveLength(2);
    });

    it('RTN22, RTC8: before a token expires the service sends AUTH, and the SDK renews in place through its authCallback, never disconnected', async () => {
      const keyRest = rest();
      const issued: Ably.TokenDetails[] = [];
      const client = realtime({
        authCallback: (_params, callback) => {
          // The first token lives 4 s (the AUTH comes at half its life, under the 30 s lead); the next ones a minute.
          if (issued.length >= 3) return callback('no more tokens in this test', null);
          keyRest.auth.requestToken({ clientId: `in-place-${format}`, ttl: issued.length === 0 ? 4_000 : 60_000 }).then(
            (details) => {
              issued.push(details);
              callback(null, details);
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      await connectionState(client, 'connected');
      const connectionId = client.connection.id;
      const connectionStates = stateLog(client.connection);
      const name = uniqueChannel('rt-auth-in-place');
      const channel = client.channels.get(name);
      const arrivals = await collectMessages(channel);
      const updated = new Promise<Ably.ConnectionStateChange>((resolve) => client.connection.once('update', resolve));
      const update = await within(updated, 20_000, "the connection's update on the renewed token");
      expect(update.reason ?? null).toBeNull();
      expect(issued).toHaveLength(2);
      expect(currentToken(client)).toBe(issued[1].token);
      // Renewed before the first token expired, on the same connection.
      expect(Date.now()).toBeLessThan(issued[0].expires);
      expect(client.connection.id).toBe(connectionId);

      // Past the first token's expiry, still connected and never disconnected; the channel works.
      await new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, issued[0].expires - Date.now() + 500)));
      await channel.publish('after', 'the first expiry');
      await arrivals.count(1);
      expect(client.connection.state).toBe('connected');
      // The one state change is the renewal's update (connected to connected).
      expect(connectionStates.map((s) => s.current)).toEqual(['connected']);
      expect(issued).toHaveLength(2);
    });

    it('RTC8, RTC8a1: authorize() while connected renews in place (AUTH); a channel the new capability excludes fails, the others stay', async () => {
      const keyRest = rest();
      const [keep, lose] = [`keep-${uniqueChannel()}`, `lose-${uniqueChannel()}`];
      let capability = JSON.stringify({ 'keep-*': ['*'], 'lose-*': ['*'] });
      const issued: Ably.TokenDetails[] = [];
      const client = realtime({
        authCallback: (_params, callback) => {
          keyRest.auth.requestToken({ clientId: `authorizing-${format}`, capability }).then(
            (details) => {
              issued.push(details);
              callback(null, details);
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      const [keepChannel, loseChannel] = [client.channels.get(keep), client.channels.get(lose)];
      const arrivals = await collectMessages(keepChannel);
      await loseChannel.attach();
      const connectionId = client.connection.id;
      const connectionStates = stateLog(client.connection);
      const connectionEvents = new Arrivals<Ably.ConnectionStateChange>();
      client.connection.on(connectionEvents.push);
      const keepStates = stateLog(keepChannel);
      const loseStates = stateLog(loseChannel);

      capability = JSON.stringify({ 'keep-*': ['*'] });
      const details = await client.auth.authorize();
      expect(details.token).toBe(issued[1].token);
      expect(currentToken(client)).toBe(issued[1].token);
      // RTN24: the CONNECTED that answers AUTH is an update of the connected state, not a new connection.
      await connectionEvents.count(1);
      expect(connectionEvents.items.map((c) => [c.previous, c.current])).toEqual([['connected', 'connected']]);
      expect(connectionStates.map((c) => c.current)).toEqual(['connected']);
      expect(client.connection.id).toBe(connectionId);

      await within(loseChannel.whenState('failed'), 10_000, `channel ${lose} to fail`);
      expect(loseChannel.errorReason).toMatchObject({ code: 40160 });
      expect(loseStates.map((c) => [c.current, c.code])).toEqual([['failed', 40160]]);
      expect(keepChannel.state).toBe('attached');
      expect(keepStates).toEqual([]);
      await keepChannel.publish('after', 'authorize');
      await arrivals.count(1);
      expect(arrivals.items.map((m) => [m.name, m.clientId])).toEqual([['after', `authorizing-${format}`]]);
    });

    it('RSA7, RTC8: with a clientId option and an authCallback issuing wildcard tokens (clientId *), authorize() renews in place and the connection keeps its clientId', async () => {
      const keyRest = rest();
      const clientId = `wild-${format}`;
      const client = realtime({
        clientId,
        authCallback: (_params, callback) => {
          keyRest.auth.requestToken({ clientId: '*' }).then(
            (details) => callback(null, details),
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      const channel = client.channels.get(uniqueChannel('wild'));
      const arrivals = await collectMessages(channel);
      const connectionId = client.connection.id;
      await client.auth.authorize();
      expect(client.connection.state).toBe('connected');
      expect(client.connection.id).toBe(connectionId);
      expect(client.auth.clientId).toBe(clientId);
      await channel.publish('after', 'authorize');
      expect((await arrivals.count(1)).map((m) => [m.name, m.clientId])).toEqual([['after', clientId]]);
    });

    it('RSA4a2, RTN15h1: a token that expires with nothing to renew it ends the connection with 40171', async () => {
      const details = await token({ ttl: 2_000 });
      const client = realtime({ token: details.token });
      await connectionState(client, 'connected');
      const connectionStates = stateLog(client.connection);
      await connectionState(client, 'failed', 20_000).catch(() => undefined);
      expect(client.connection.state).toBe('failed');
      expect(client.connection.errorReason).toMatchObject({ code: 40171 });
      // The SDK gives up when the service asks it to renew (AUTH, here at half the token's life:
      // under REALTIME_TOKEN_RENEW_LEAD_MS) or tells it the token expired (40142), never on its own.
      expect(Date.now()).toBeGreaterThanOrEqual(details.issued + (details.expires - details.issued) / 2 - 50);
      expect(connectionStates.map((s) => s.current)).toContain('failed');
    });

    it('RTN14b: connecting with an expired token from an authCallback gets a new token and connects', async () => {
      const keyRest = rest();
      const expired = await keyRest.auth.requestToken({ ttl: 1_000 });
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expired.expires - Date.now() + 50)));
      const handed: string[] = [];
      const client = realtime({
        authCallback: (_params, callback) => {
          if (handed.length === 0) {
            handed.push(expired.token);
            return callback(null, expired);
          }
          keyRest.auth.requestToken({ ttl: 60_000 }).then(
            (fresh) => {
              handed.push(fresh.token);
              callback(null, fresh);
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      await connectionState(client, 'connected');
      expect(handed).toHaveLength(2);
      expect(currentToken(client)).toBe(handed[1]);
    });
  });
});
