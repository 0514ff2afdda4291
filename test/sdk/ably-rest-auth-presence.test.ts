// The official SDK (npm `ably` v2), unmodified, against the real listening service: token auth,
// batch publish, presence and batch presence (ARCHITECTURE: Compatibility with existing clients),
// in both of its wire formats.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as Ably from 'ably';
import { allPages, rejection, type ErrorLike, WIRE_FORMATS } from '../helpers/sdk.js';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';

const FIXTURES = 'persisted:presence_fixtures';
const postApps: unknown = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;

let ts: TestService;
let port: number;
/** An app made from test-app-setup.json: its keys (in setup order) and the presence fixtures. */
let fixtureApp: { appId: string; keys: string[] };

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
  const created = await rest({ key: ts.key }, false).request('post', '/apps', 6, null, postApps as Record<string, unknown>);
  expect(created.statusCode).toBe(201);
  const body = created.items[0] as unknown as { appId: string; keys: { keyStr: string }[] };
  fixtureApp = { appId: body.appId, keys: body.keys.map((k) => k.keyStr) };
});

afterAll(async () => {
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

function rest(auth: Ably.ClientOptions, useBinaryProtocol: boolean): Ably.Rest {
  return new Ably.Rest({
    ...auth,
    restHost: '127.0.0.1',
    port,
    tls: false,
    useBinaryProtocol,
    // Quiets the SDK's deprecation warning about restHost, and its warning about a token it cannot renew.
    logLevel: 0,
  });
}

/** One request the server answered: `auth` is the scheme, `token` the bearer token if any. */
type Exchange = { method: string; path: string; auth: string; token: string | undefined; status: number };

/** Records every request the server answers while `run` runs. */
async function exchanges(run: () => Promise<unknown>): Promise<Exchange[]> {
  const seen: Exchange[] = [];
  const record = (req: IncomingMessage, res: ServerResponse): void => {
    res.once('finish', () => {
      const [auth, credentials] = String(req.headers.authorization ?? '').split(' ');
      seen.push({
        method: req.method ?? '',
        path: (req.url ?? '').split('?')[0],
        auth,
        token: auth === 'Bearer' ? Buffer.from(credentials, 'base64').toString('utf8') : undefined,
        status: res.statusCode,
      });
    });
  };
  ts.service.app.server.on('request', record);
  try {
    await run();
  } finally {
    ts.service.app.server.off('request', record);
  }
  return seen;
}

type BatchPresence = Ably.BatchResult<Ably.BatchPresenceSuccessResult | Ably.BatchPresenceFailureResult>;

/**
 * The SDK's typings declare an array, but it returns the one object the service sends (RSC24, and
 * the SDK's own test/rest/batch.test.js reads `batchResult.successCount`).
 */
const batchPresence = async (rest: Ably.Rest, channels: string[]): Promise<BatchPresence> =>
  (await rest.batchPresence(channels)) as unknown as BatchPresence;

const sleepUntil = (time: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now())));

describe.each(WIRE_FORMATS)('ably-js v2 Rest client, auth and presence ($format)', ({ useBinaryProtocol }) => {
  const client = (auth: Ably.ClientOptions = { key: ts.key }): Ably.Rest => rest(auth, useBinaryProtocol);
  const keyName = (): string => ts.key.split(':')[0];

  describe('token auth', () => {
    it('RSA8, TD: requestToken with a key gives TokenDetails that a token-only client publishes and reads with', async () => {
      const clientId = `sdk-user-${useBinaryProtocol ? 'bin' : 'json'}`;
      const before = Date.now();
      const details = await client().auth.requestToken({ clientId, ttl: 60_000, capability: { 'sdk-token-*': ['publish', 'history'] } });
      expect(typeof details.token).toBe('string');
      expect(details.token.length).toBeGreaterThan(0);
      expect(details.issued).toBeGreaterThanOrEqual(before - 1_000);
      expect(details.issued).toBeLessThanOrEqual(Date.now() + 1_000);
      expect(details.expires).toBe(details.issued + 60_000);
      expect(typeof details.capability).toBe('string');
      expect(JSON.parse(details.capability)).toEqual({ 'sdk-token-*': ['history', 'publish'] });
      expect(details.clientId).toBe(clientId);

      for (const auth of [{ token: details.token }, { tokenDetails: details }]) {
        const name = uniqueChannel('sdk-token');
        const tokenClient = client(auth);
        const seen = await exchanges(async () => {
          await tokenClient.channels.get(name).publish('greeting', { hello: 'token' });
        });
        expect(seen).toEqual([{ method: 'POST', path: `/channels/${name}/messages`, auth: 'Bearer', token: details.token, status: 201 }]);
        const page = await tokenClient.channels.get(name).history();
        expect(page.items.map((m) => [m.name, m.data, m.clientId])).toEqual([['greeting', { hello: 'token' }, clientId]]);
      }
    });

    it('RSA9, RSA8c: a signed token request from createTokenRequest, handed over by an authCallback, is exchanged by the SDK itself', async () => {
      const keyClient = client();
      const tokenRequest = await keyClient.auth.createTokenRequest({ clientId: 'callback-user', ttl: 60_000 });
      expect(tokenRequest).toMatchObject({ keyName: keyName(), clientId: 'callback-user', ttl: 60_000 });
      expect(typeof tokenRequest.mac).toBe('string');
      expect(typeof tokenRequest.nonce).toBe('string');
      expect(typeof tokenRequest.timestamp).toBe('number');

      const requests: Ably.TokenParams[] = [];
      const callbackClient = client({
        authCallback: (params, callback) => {
          requests.push(params);
          callback(null, tokenRequest);
        },
      });
      const name = uniqueChannel('sdk-callback');
      const seen = await exchanges(() => callbackClient.channels.get(name).publish('n', 'via callback'));
      expect(requests).toHaveLength(1);
      expect(seen.map((e) => [e.method, e.path, e.auth, e.status])).toEqual([
        ['POST', `/keys/${keyName()}/requestToken`, '', 200],
        ['POST', `/channels/${name}/messages`, 'Bearer', 201],
      ]);
      const page = await client().channels.get(name).history();
      expect(page.items.map((m) => [m.data, m.clientId])).toEqual([['via callback', 'callback-user']]);
    });

    it('RSA4, RSA7: useTokenAuth with a key signs its own token request and then uses the token', async () => {
      const tokenClient = client({ key: ts.key, useTokenAuth: true });
      const name = uniqueChannel('sdk-usetoken');
      const seen = await exchanges(async () => {
        await tokenClient.channels.get(name).publish('a', 'one');
        await tokenClient.channels.get(name).publish('b', 'two');
      });
      expect(seen.map((e) => [e.path, e.auth, e.status])).toEqual([
        [`/keys/${keyName()}/requestToken`, '', 200],
        [`/channels/${name}/messages`, 'Bearer', 201],
        [`/channels/${name}/messages`, 'Bearer', 201],
      ]);
      // One token, signed by the client itself, serves both publishes.
      expect(seen[1].token).toEqual(expect.any(String));
      expect(seen[2].token).toBe(seen[1].token);
      const page = await tokenClient.channels.get(name).history({ direction: 'forwards' });
      expect(page.items.map((m) => m.data)).toEqual(['one', 'two']);
    });

    it('RSA4a2: an expired token is refused with 40140; a client with no way to renew gives up with 40171', async () => {
      const details = await client().auth.requestToken({ ttl: 1_000 });
      const name = uniqueChannel('sdk-expiry');
      const tokenClient = client({ token: details.token });
      await tokenClient.channels.get(name).publish('before', 'expiry');
      await sleepUntil(details.expires + 50);

      let err: ErrorLike = {};
      const seen = await exchanges(async () => {
        err = await rejection(tokenClient.channels.get(name).publish('after', 'expiry'));
      });
      // The SDK, refused with a token error, tries to renew and cannot (RSA4a2): it reports 40171.
      expect(seen).toEqual([{ method: 'POST', path: `/channels/${name}/messages`, auth: 'Bearer', token: details.token, status: 401 }]);
      expect(err.code).toBe(40171);
      expect(err.statusCode).toBe(403);
      // What the service answered that request with (the SDK does not pass it on).
      const answer = await ts.service.app.inject({
        method: 'POST',
        url: `/channels/${name}/messages`,
        headers: { authorization: `Bearer ${Buffer.from(details.token).toString('base64')}` },
        payload: { name: 'after', data: 'expiry' },
      });
      expect(answer.statusCode).toBe(401);
      expect(answer.json().error).toMatchObject({ code: 40140, statusCode: 401 });

      const page = await client().channels.get(name).history();
      expect(page.items.map((m) => m.name)).toEqual(['before']);
    });

    /** A client whose authCallback hands out at most `limit` tokens of `ttl` ms, each requested with the root key. */
    const renewingClient = (ttl: number, limit: number): { rest: Ably.Rest; issued: Ably.TokenDetails[] } => {
      const keyClient = client();
      const issued: Ably.TokenDetails[] = [];
      const rest = client({
        authCallback: (_params, callback) => {
          if (issued.length >= limit) return callback('this test hands out no more tokens', null);
          keyClient.auth.requestToken({ ttl }).then(
            (details) => {
              issued.push(details);
              callback(null, details);
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      return { rest, issued };
    };

    it('RSA4b1: an authCallback client that knows the service time renews an expired token before sending', async () => {
      const { rest: renewing, issued } = renewingClient(1_000, 2);
      await renewing.time();
      const name = uniqueChannel('sdk-renew');
      const channel = renewing.channels.get(name);
      await channel.publish('first', 'one');
      await sleepUntil(issued[0].expires + 50);

      const seen = await exchanges(() => channel.publish('second', 'two'));
      expect(seen.map((e) => [e.path, e.auth, e.status])).toEqual([
        // a signed token request (RSA9) carries no Authorization header
        [`/keys/${keyName()}/requestToken`, '', 200],
        [`/channels/${name}/messages`, 'Bearer', 201],
      ]);
      expect(issued).toHaveLength(2);
      expect(seen[1].token).toBe(issued[1].token);
      const page = await client().channels.get(name).history({ direction: 'forwards' });
      expect(page.items.map((m) => m.name)).toEqual(['first', 'second']);
    });

    it('RSA4b: refused with 40140, the SDK gets a new token, which the service accepts; ably-js 2.28 retries with the old one', async () => {
      const { rest: renewing, issued } = renewingClient(1_000, 2);
      const name = uniqueChannel('sdk-renew');
      const channel = renewing.channels.get(name);
      await channel.publish('first', 'one');
      await sleepUntil(issued[0].expires + 50);

      let err: ErrorLike = {};
      const seen = await exchanges(async () => {
        err = await rejection(channel.publish('second', 'two'));
      });
      // ably/ably-js#2193: the retry after renewal carries the old Authorization header and renews
      // without limit; this callback's refusal of a third token ends it (40170). With a fixed SDK the
      // retry carries issued[1] and succeeds: make this test assert that then.
      expect(seen.map((e) => [e.path, e.status, e.token])).toEqual([
        [`/channels/${name}/messages`, 401, issued[0].token],
        [`/keys/${keyName()}/requestToken`, 200, undefined],
        [`/channels/${name}/messages`, 401, issued[0].token],
      ]);
      expect(issued).toHaveLength(2);
      expect(err.code).toBe(40170);

      // The service's part of RSA4b: the renewed token is good.
      await client({ tokenDetails: issued[1] }).channels.get(name).publish('second', 'two');
      const page = await client().channels.get(name).history({ direction: 'forwards' });
      expect(page.items.map((m) => m.name)).toEqual(['first', 'second']);
    });

    it('RSA8, capabilities: a token limited to publish on only:* is refused publish elsewhere with 40160', async () => {
      const details = await client().auth.requestToken({ capability: { 'only:*': ['publish'] } });
      expect(JSON.parse(details.capability)).toEqual({ 'only:*': ['publish'] });
      const tokenClient = client({ tokenDetails: details });
      await tokenClient.channels.get(`only:${uniqueChannel('sdk')}`).publish('allowed', 'yes');

      const err = await rejection(tokenClient.channels.get(uniqueChannel('other')).publish('refused', 'no'));
      expect(err.code).toBe(40160);
      expect(err.statusCode).toBe(401);
      const historyErr = await rejection(tokenClient.channels.get(`only:${uniqueChannel('sdk')}`).history());
      expect(historyErr.code).toBe(40160);
    });
  });

  describe('batch publish', () => {
    it('RSC22, BPB: batchPublish of an array of specs gives one result per spec, and the messages land in history', async () => {
      const rest = client();
      const [a, b, c] = [uniqueChannel('sdk-batch-a'), uniqueChannel('sdk-batch-b'), uniqueChannel('sdk-batch-c')];
      const results = await rest.batchPublish([
        { channels: [a, b], messages: [{ name: 'one', data: 'first' }, { name: 'two', data: { n: 2 } }] },
        { channels: [c], messages: [{ name: 'three', data: 'third' }] },
      ]);
      expect(results).toHaveLength(2);
      expect(results[0]).toMatchObject({ successCount: 2, failureCount: 0 });
      expect(results[0].results.map((r) => r.channel)).toEqual([a, b]);
      expect(results[1]).toMatchObject({ successCount: 1, failureCount: 0, results: [{ channel: c }] });
      for (const r of [...results[0].results, ...results[1].results]) {
        expect(r).toEqual({ channel: expect.any(String), messageId: expect.any(String), serials: expect.any(Array) });
      }

      for (const name of [a, b]) {
        const page = await rest.channels.get(name).history({ direction: 'forwards' });
        expect(page.items.map((m) => [m.name, m.data])).toEqual([['one', 'first'], ['two', { n: 2 }]]);
        const result = results[0].results.find((r) => r.channel === name) as Ably.BatchPublishSuccessResult;
        expect(page.items[0].id.startsWith(`${result.messageId}:`)).toBe(true);
      }
      const third = await rest.channels.get(c).history();
      expect(third.items.map((m) => m.data)).toEqual(['third']);
    });

    it('RSC22c, BPF: a channel the key may not publish to fails alone with 40160; a single spec gives one result', async () => {
      // keys[1] of test-app-setup.json may publish on canpublish:* and only subscribe on cansubscribe:*.
      const restricted = client({ key: fixtureApp.keys[1] });
      const allowed = `canpublish:${uniqueChannel('sdk')}`;
      const refused = `cansubscribe:${uniqueChannel('sdk')}`;
      const result = await restricted.batchPublish({ channels: [allowed, refused], messages: [{ name: 'n', data: 'd' }] });
      expect(result.successCount).toBe(1);
      expect(result.failureCount).toBe(1);
      expect(result.results).toHaveLength(2);
      expect(result.results[0]).toMatchObject({ channel: allowed, messageId: expect.any(String) });
      const failure = result.results[1] as Ably.BatchPublishFailureResult;
      expect(failure.channel).toBe(refused);
      expect(failure.error).toMatchObject({ code: 40160, statusCode: 401 });

      const root = client({ key: fixtureApp.keys[0] });
      expect((await root.channels.get(allowed).history()).items.map((m) => m.data)).toEqual(['d']);
      expect((await root.channels.get(refused).history()).items).toEqual([]);
    });
  });

  describe('presence', () => {
    const fixtureClient = (): Ably.Rest => client({ key: fixtureApp.keys[0] });

    it('RSP3: presence.get lists the six fixture members as present, with their data decoded', async () => {
      const page = await fixtureClient().channels.get(FIXTURES).presence.get();
      expect(page.hasNext()).toBe(false);
      expect(page.items.map((m) => m.clientId).sort()).toEqual(
        ['client_bool', 'client_decoded', 'client_encoded', 'client_int', 'client_json', 'client_string'],
      );
      for (const m of page.items) {
        expect(m.action).toBe('present');
        expect(typeof m.id).toBe('string');
        expect(typeof m.connectionId).toBe('string');
        expect(typeof m.timestamp).toBe('number');
      }
      const byClient = new Map(page.items.map((m) => [m.clientId, m]));
      expect(byClient.get('client_bool')!.data).toBe('true');
      expect(byClient.get('client_int')!.data).toBe('24');
      expect(byClient.get('client_string')!.data).toBe('This is a string clientData payload');
      expect(byClient.get('client_json')!.data).toBe('{ "test": "This is a JSONObject clientData payload"}');
      expect(byClient.get('client_decoded')!.data).toEqual({ example: { json: 'Object' } });
      expect(byClient.get('client_decoded')!.encoding ?? null).toBeNull();
      // Without a cipher the SDK stops decoding at the cipher step and leaves the rest of the encoding in place.
      const encrypted = byClient.get('client_encoded')!;
      expect(encrypted.encoding).toBe('json/utf-8/cipher+aes-128-cbc');
      expect(Buffer.from(encrypted.data as Uint8Array).toString('base64')).toBe('HO4cYSP8LybPYBPZPHQOtuD53yrD3YV3NBoTEYBh4U0N1QXHbtkfsDfTspKeLQFt');
    });

    it('RSP3a: presence.get filters by clientId and connectionId, and pages with limit', async () => {
      const channel = fixtureClient().channels.get(FIXTURES);
      const bool = await channel.presence.get({ clientId: 'client_bool' });
      expect(bool.items.map((m) => [m.clientId, m.data])).toEqual([['client_bool', 'true']]);

      const connectionId = bool.items[0].connectionId;
      const sameConnection = await channel.presence.get({ connectionId });
      expect(sameConnection.items).toHaveLength(6);
      expect((await channel.presence.get({ connectionId: 'nobody' })).items).toEqual([]);

      const first = await channel.presence.get({ limit: 2 });
      expect(first.items).toHaveLength(2);
      expect(first.hasNext()).toBe(true);
      const second = await first.next();
      expect(second!.items).toHaveLength(2);
      const { items, pages } = await allPages(first);
      expect(pages).toBe(3);
      expect(new Set(items.map((m) => m.clientId)).size).toBe(6);
      expect(second!.items.map((m) => m.clientId)).toEqual(items.slice(2, 4).map((m) => m.clientId));
    });

    it('RSP4: presence.history gives the fixture enter events, then appended enter, update, leave and drop in order', async () => {
      const channel = fixtureClient().channels.get(FIXTURES);
      const fixtures = await channel.presence.history({ direction: 'forwards' });
      expect(fixtures.items).toHaveLength(6);
      expect(fixtures.items.every((m) => m.action === 'enter')).toBe(true);
      expect(fixtures.items.map((m) => m.clientId)).toEqual(
        ['client_bool', 'client_int', 'client_string', 'client_json', 'client_decoded', 'client_encoded'],
      );

      const name = uniqueChannel('sdk-presence');
      await ts.service.presenceProducer.append(fixtureApp.appId, name, [
        { action: 'enter', clientId: 'alice', connectionId: 'conn-a', data: 'hello' },
        { action: 'enter', clientId: 'bob', connectionId: 'conn-b', data: { mood: 'fine' } },
        { action: 'update', clientId: 'alice', connectionId: 'conn-a', data: 'busy' },
        { action: 'leave', clientId: 'alice', connectionId: 'conn-a' },
        { action: 'drop', connectionId: 'conn-b' },
      ]);
      const presence = fixtureClient().channels.get(name).presence;
      const forwards = await presence.history({ direction: 'forwards' });
      expect(forwards.items.map((m) => [m.action, m.clientId, m.data])).toEqual([
        ['enter', 'alice', 'hello'],
        ['enter', 'bob', { mood: 'fine' }],
        ['update', 'alice', 'busy'],
        ['leave', 'alice', 'busy'],
        ['leave', 'bob', { mood: 'fine' }],
      ]);
      const backwards = await allPages(await presence.history({ limit: 2 }));
      expect(backwards.pages).toBe(3);
      expect(backwards.items.map((m) => m.action)).toEqual(['leave', 'leave', 'update', 'enter', 'enter']);
      expect((await presence.get()).items).toEqual([]);
    });

    it('RSC24, BGR: batchPresence gives one result object with each channel, in request order, and its members', async () => {
      const name = uniqueChannel('sdk-batch-presence');
      await ts.service.presenceProducer.append(fixtureApp.appId, name, [
        { action: 'enter', clientId: 'carol', connectionId: 'conn-c', data: 'here' },
      ]);
      const result = await batchPresence(fixtureClient(), [name, FIXTURES]);
      expect(result).toMatchObject({ successCount: 2, failureCount: 0 });
      expect(result.results.map((r) => r.channel)).toEqual([name, FIXTURES]);
      const [mine, fixtures] = result.results as Ably.BatchPresenceSuccessResult[];
      expect(mine.presence).toEqual([expect.objectContaining({ clientId: 'carol', connectionId: 'conn-c', data: 'here' })]);
      expect(fixtures.presence).toHaveLength(6);
      // The SDK hands back batch presence as sent: wire action codes, data not decoded.
      for (const m of [...mine.presence, ...fixtures.presence]) expect(m.action).toBe(1);
      expect(fixtures.presence.find((m) => m.clientId === 'client_decoded')).toMatchObject({
        data: '{"example":{"json":"Object"}}',
        encoding: 'json',
      });
    });

    it('RSC24, BGF: batchPresence reports a channel the key may not subscribe to as a failure with 40160', async () => {
      // keys[2] of test-app-setup.json may subscribe on channel2 and not on channel0.
      const result = await batchPresence(client({ key: fixtureApp.keys[2] }), ['channel2', 'channel0']);
      expect(result).toMatchObject({ successCount: 1, failureCount: 1 });
      expect(result.results[0]).toEqual({ channel: 'channel2', presence: [] });
      expect(result.results[1]).toMatchObject({ channel: 'channel0', error: { code: 40160, statusCode: 401 } });
    });
  });
});
