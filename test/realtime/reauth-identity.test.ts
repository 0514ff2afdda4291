// An AUTH (REALTIME-PROTOCOL.md §7.3) may renew a connection's credentials, not change whose
// connection it is: a token of another app or another key, or one that changes whom the connection
// acts for, fails the connection with ERROR 40102, as the platform refuses a clientId change on an
// established connection (and the SDK fails on 40102). Before, a connection for any clientId that
// took a token for one could no longer leave the members it had entered for others (enterClient),
// and a connection that took another key's token was accepted, then could not resume (80018: its
// connectionKey is signed with the first key's secret).
import { describe, expect, it } from 'vitest';
import { Actions, closedWithin, sleep, type Pm, type RawClient } from '../helpers/raw-realtime.js';
import { uniqueChannel } from '../helpers/service.js';
import { rawRealtimeService } from '../helpers/raw-realtime-service.js';

const svc = rawRealtimeService();
const ALL = { '*': ['*'] };

/** Sends AUTH with `token` and resolves with the answer: CONNECTED, or an ERROR without channel. */
async function reauthenticate(client: RawClient, token: string): Promise<Pm> {
  const answer = client.next((pm) => (pm.action === Actions.CONNECTED || pm.action === Actions.ERROR) && pm.channel === undefined, 10_000, false);
  client.send({ action: Actions.AUTH, auth: { accessToken: token } });
  return answer;
}

async function expectRefused(client: RawClient, token: string): Promise<void> {
  expect(await reauthenticate(client, token)).toMatchObject({ action: Actions.ERROR, error: { code: 40102, statusCode: 401 } });
  await closedWithin(client, 5000);
}

async function presentWithin(channel: string, expected: string[], ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  let present = await svc.presentOn(channel);
  while (present.sort().join() !== expected.join() && Date.now() < until) {
    await sleep(100);
    present = await svc.presentOn(channel);
  }
  expect(present.sort()).toEqual(expected);
}

describe('an AUTH that would change whom the connection acts for', () => {
  it('a wildcard connection that entered members for others (enterClient), given a token for one clientId: ERROR 40102, and its members leave', async () => {
    const channel = uniqueChannel('reauth');
    const client = await svc.connect({ access_token: await svc.token(ALL, '*') });
    expect((await client.presence(channel, [{ action: 2, clientId: 'alice' }, { action: 2, clientId: 'bob' }])).action).toBe(Actions.ACK);
    await presentWithin(channel, ['alice', 'bob']);
    await expectRefused(client, await svc.token(ALL, 'carol'));
    await presentWithin(channel, []);
  });

  it.each([
    ['a wildcard token', '*', 'carol'],
    ['a wildcard token', '*', undefined],
    ['a key without a clientId (any clientId)', 'key', 'carol'],
    ['a key without a clientId (any clientId)', 'key', undefined],
    ['an anonymous token', undefined, 'carol'],
    ['a token for alice', 'alice', 'bob'],
    ['a token for alice', 'alice', undefined],
  ])('connected with %s (%s), a token for %s is refused with 40102', async (_what, from, to) => {
    const client = await svc.connect(from === 'key' ? { key: svc.ts.key } : { access_token: await svc.token(ALL, from) });
    await expectRefused(client, await svc.token(ALL, to));
  });

  it.each([
    ['a wildcard token', '*', '*', '*'],
    ['a key without a clientId (any clientId)', 'key', '*', '*'],
    ['a token for alice', 'alice', 'alice', 'alice'],
    ['a token for alice', 'alice', '*', 'alice'],
    ['an anonymous token', undefined, undefined, undefined],
  ])('connected with %s (%s), a token for %s renews in place; the connection acts for %s', async (_what, from, to, after) => {
    const client = await svc.connect(from === 'key' ? { key: svc.ts.key } : { access_token: await svc.token(ALL, from) });
    const answer = await reauthenticate(client, await svc.token(ALL, to));
    expect(answer).toMatchObject({ action: Actions.CONNECTED, connectionId: client.connectionId });
    expect((answer.connectionDetails as { clientId?: string }).clientId).toBe(after);
  });
});

describe('a resume with credentials that would change whom the connection acts for', () => {
  it('a wildcard connection resumed with a token for one clientId: a new connection, with 40102 (as a failed resume, §6.2)', async () => {
    const client = await svc.connect({ access_token: await svc.token(ALL, '*') });
    const key = (client.frames.find((pm) => pm.action === Actions.CONNECTED)!.connectionDetails as { connectionKey: string }).connectionKey;
    client.close();
    await client.closed;
    const resumed = await svc.connect({ access_token: await svc.token(ALL, 'carol'), resume: key });
    const connected = resumed.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    expect(connected.connectionId).not.toBe(client.connectionId);
    expect(connected).toMatchObject({ error: { code: 40102 }, connectionDetails: { clientId: 'carol' } });
  });
});

describe('an AUTH with a token of another key', () => {
  it('of the same app, or of another app: ERROR 40102 at once; one of its own key renews, and the connection resumes with it', async () => {
    const [first, second] = await svc.newApp(2);
    const [elsewhere] = await svc.newApp();
    for (const other of [second, elsewhere]) {
      const client = await svc.connect({ access_token: await svc.token(ALL, 'alice', first) });
      await expectRefused(client, await svc.token(ALL, 'alice', other));
    }
    const client = await svc.connect({ access_token: await svc.token(ALL, 'alice', first) });
    const renewed = await svc.token(ALL, 'alice', first);
    expect(await reauthenticate(client, renewed)).toMatchObject({ action: Actions.CONNECTED, connectionId: client.connectionId });
    const key = (client.frames.find((pm) => pm.action === Actions.CONNECTED)!.connectionDetails as { connectionKey: string }).connectionKey;
    client.close();
    await client.closed;
    const resumed = await svc.connect({ access_token: renewed, resume: key });
    const connected = resumed.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    expect(connected.connectionId).toBe(client.connectionId);
    expect(connected.error).toBeUndefined();
  });
});
