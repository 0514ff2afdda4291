// The REST calls of the official SDK (npm `ably` v2, unmodified) that issue 12 found behaving
// differently from the platform: the default capability of a key, a capability listing "*" with
// other operations, a wrong method on a known path, batch results by protocol version, token
// revocation (REST and realtime) and sandbox stats fixtures read right after they are posted,
// in both wire formats.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import * as Ably from 'ably';
import { rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Arrivals, Clients, connectionState, realtimeClient } from '../helpers/realtime.js';

const postApps = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps as Record<string, unknown>;

let ts: TestService;
let port: number;
/** Keys of an app made from test-app-setup.json, in setup order: [0] has no capability, [4] revocableTokens. */
let fixtureKeys: { keyStr: string; keyName: string; capability: string; revocableTokens: boolean }[];
const clients = new Clients();

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
  const root = new Ably.Rest({ key: ts.key, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol: false, logLevel: 0 });
  const created = await root.request('post', '/apps', 6, null, postApps);
  expect(created.statusCode).toBe(201);
  fixtureKeys = (created.items[0] as unknown as { keys: typeof fixtureKeys }).keys;
});

afterEach(() => clients.closeAll());

afterAll(async () => {
  await clients.closeAll();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

describe.each(WIRE_FORMATS)('ably-js v2 Rest client, the calls issue 12 fixed ($format)', ({ format, useBinaryProtocol }) => {
  const rest = (options: Ably.ClientOptions = {}): Ably.Rest =>
    new Ably.Rest({ key: fixtureKeys[0].keyStr, endpoint: '127.0.0.1', port, tls: false, useBinaryProtocol, logLevel: 0, ...options });

  it('RSA8, TK: a key made without a capability gives tokens {"*":["*"]}, as the platform does', async () => {
    expect(JSON.parse(fixtureKeys[0].capability)).toEqual({ '*': ['*'] });
    const details = await rest().auth.requestToken();
    expect(JSON.parse(details.capability)).toEqual({ '*': ['*'] });
    // Authentication rule 6: "*" does not reach metachannels.
    const meta = await rejection(rest({ token: details.token, key: undefined }).channels.get('[meta]channel.lifecycle').history());
    expect(meta.code).toBe(40160);
  });

  it('a requested capability listing "*" with other operations is refused with 400 (40003), like an unknown operation', async () => {
    for (const capability of ['{"channel0":["*","publish"]}', '{"channel0":["shout"]}']) {
      const err = await rejection(rest().auth.requestToken({ capability }));
      expect(err).toMatchObject({ code: 40003, statusCode: 400 });
    }
  });

  it('RSC19: a known path with a method it does not serve answers 404 with 40400', async () => {
    const response = await rest().request('delete', '/time', 6);
    expect(response.success).toBe(false);
    expect(response.statusCode).toBe(404);
    expect(response.errorCode).toBe(40400);
    const put = await rest().request('put', `/channels/${uniqueChannel('sdk')}/messages`, 6, null, { data: 'x' });
    expect([put.statusCode, put.errorCode]).toEqual([404, 40400]);
  });

  it('BSP: batchPublish (protocol 6) gets BatchResult; protocol 2 gets the spec\'s flat array of per-channel results', async () => {
    const [a, b] = [uniqueChannel('batch'), uniqueChannel('batch')];
    const result = await rest().batchPublish({ channels: [a, b], messages: [{ data: 'x' }] });
    expect(result).toMatchObject({ successCount: 2, failureCount: 0, results: [{ channel: a }, { channel: b }] });
    const v2 = await rest().request('post', '/messages', 2, null, { channels: [a, b], messages: [{ data: 'y' }] });
    expect(v2.statusCode).toBe(201);
    expect(v2.items).toEqual([
      { channel: a, messageId: expect.any(String) },
      { channel: b, messageId: expect.any(String) },
    ]);
  });

  describe('RSA17: auth.revokeTokens', () => {
    const revocable = (): Ably.Rest => rest({ key: fixtureKeys[4].keyStr });

    it('RSA17b, RSA17c, TRS2: revokes by clientId; the revoked token gets a token error the SDK renews on; another clientId\'s is untouched', async () => {
      const keyRest = revocable();
      const clientId = `revoked-${format}`;
      const other = await keyRest.auth.requestToken({ clientId: `kept-${format}` });
      const channel = uniqueChannel('revoke');
      // A client whose authCallback asks the key holder for a token, twice at most.
      const issued: Ably.TokenDetails[] = [];
      const renewing = rest({
        key: undefined,
        authCallback: (_params, callback) => {
          if (issued.length >= 2) return callback('this test hands out no more tokens', null);
          keyRest.auth.requestToken({ clientId }).then(
            (d) => {
              issued.push(d);
              callback(null, d);
            },
            (err: Ably.ErrorInfo) => callback(err, null),
          );
        },
      });
      await renewing.channels.get(channel).history();
      expect(issued).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 2)); // a later millisecond than the token's issue time
      const result = await keyRest.auth.revokeTokens([{ type: 'clientId', value: clientId }]);
      expect(result.successCount).toBe(1);
      expect(result.failureCount).toBe(0);
      const success = result.results[0] as Ably.TokenRevocationSuccessResult;
      expect(success.target).toBe(`clientId:${clientId}`);
      expect(success.issuedBefore).toEqual(expect.any(Number));
      expect(success.appliesAt).toBe(success.issuedBefore);

      // RSA4b: the revoked token's 40141 is a token error, so the SDK gets a new token. ably-js 2.28
      // retries with the old Authorization header (ably/ably-js#2193, as in ably-rest-auth-presence)
      // until this callback refuses a third token (40170); the new token itself is good.
      const err = await rejection(renewing.channels.get(channel).history());
      expect(err.code).toBe(40170);
      expect(issued).toHaveLength(2);
      await rest({ key: undefined, tokenDetails: issued[1] }).channels.get(channel).history();
      // A token literal cannot be renewed: the SDK gives up with 40171 on the service's token error.
      expect((await rejection(rest({ key: undefined, token: issued[0].token }).channels.get(channel).history())).code).toBe(40171);
      // The service's own answer to the revoked token.
      const raw = await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, { headers: { authorization: `Bearer ${Buffer.from(issued[0].token).toString('base64')}` } });
      expect(raw.status).toBe(401);
      expect(((await raw.json()) as { error: { code: number } }).error.code).toBe(40141);
      await rest({ key: undefined, token: other.token }).channels.get(channel).history();
    });

    it('RSA17c, TRF2: an invalid target fails on its own; RSA17e, RSA17f: issuedBefore and allowReauthMargin', async () => {
      const keyRest = revocable();
      const issuedBefore = (await keyRest.time()) - 1000;
      const result = await keyRest.auth.revokeTokens(
        [
          { type: 'clientId', value: `margin-${format}` },
          { type: 'invalidType', value: 'abc' },
        ],
        { issuedBefore, allowReauthMargin: true },
      );
      expect(result.successCount).toBe(1);
      expect(result.failureCount).toBe(1);
      const [ok, failed] = result.results as [Ably.TokenRevocationSuccessResult, Ably.TokenRevocationFailureResult];
      expect(ok.issuedBefore).toBe(issuedBefore);
      expect(ok.appliesAt).toBeGreaterThanOrEqual(issuedBefore + 1000 + 30_000);
      expect(failed).toMatchObject({ target: 'invalidType:abc', error: { code: 40000, statusCode: 400 } });
    });

    it('RSA17d: a token-authenticated client cannot revoke (40162, before any request)', async () => {
      const details = await revocable().auth.requestToken();
      const err = await rejection(rest({ key: undefined, token: details.token }).auth.revokeTokens([{ type: 'clientId', value: 'x' }]));
      expect(err).toMatchObject({ code: 40162, statusCode: 401 });
    });

    it('a key made without revocableTokens: the service refuses with 40163 (401)', async () => {
      const err = await rejection(rest().auth.revokeTokens([{ type: 'clientId', value: 'x' }]));
      expect(err).toMatchObject({ code: 40163, statusCode: 401 });
    });

    it('RTN: a realtime connection on a revoked token is disconnected with 40141, renews through its authCallback and connects again', async () => {
      const keyRest = revocable();
      const clientId = `rt-revoked-${format}`;
      const client = clients.add(
        realtimeClient(port, useBinaryProtocol, {
          authCallback: (_params, callback) => {
            keyRest.auth.requestToken({ clientId }).then(
              (details) => callback(null, details),
              (err: Ably.ErrorInfo) => callback(err, null),
            );
          },
        }),
      );
      await connectionState(client, 'connected');
      const changes = new Arrivals<Ably.ConnectionStateChange>();
      client.connection.on(changes.push);
      await new Promise((r) => setTimeout(r, 2));
      await keyRest.auth.revokeTokens([{ type: 'clientId', value: clientId }]);
      const seen = await changes.until((items) => items.some((c) => c.current === 'connected'), 'the connection to come back on a new token');
      expect(seen.find((c) => c.reason?.code === 40141)).toBeDefined();
    });
  });

  it('sandbox POST /stats: the fixtures are readable when the call returns', async () => {
    const app = await rest({ key: ts.key }).request('post', '/apps', 6, null, { keys: [{}] });
    const key = (app.items[0] as unknown as { keys: { keyStr: string }[] }).keys[0].keyStr;
    const appRest = rest({ key });
    const posted = await appRest.request('post', '/stats', 6, null, [{ intervalId: '2032-02-02:10:00', inbound: { rest: { messages: { count: 42, data: 420 } } } }]);
    expect(posted.statusCode).toBe(201);
    const page = await appRest.stats({ start: Date.UTC(2032, 1, 2, 10), end: Date.UTC(2032, 1, 2, 10, 0, 59), unit: 'minute' });
    expect(page.items.map((s) => s.intervalId)).toEqual(['2032-02-02:10:00']);
    expect(page.items[0].entries?.['messages.inbound.rest.messages.count']).toBe(42);
  });
});
