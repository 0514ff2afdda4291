// A connection resumed with credentials narrower than those it entered presence with (the SDK's
// path after a token expires: DISCONNECTED 40142, a new token from its authCallback, a resume; or a
// raw client resuming with another token): as an AUTH does (test/sdk/ably-realtime-auth-narrowing.test.ts),
// its members on channels the new capability allows no presence on leave. It could not leave them
// itself: a LEAVE needs the presence capability.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let ts: TestService;
let port: number;
const clients: RawClient[] = [];

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
});
afterAll(async () => {
  for (const c of clients) c.close();
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const auth = (): Record<string, string> => ({ authorization: `Basic ${Buffer.from(ts.key).toString('base64')}` });

async function token(capability: Record<string, string[]>): Promise<string> {
  const keyName = ts.key.split(':')[0];
  const res = await fetch(`http://127.0.0.1:${port}/keys/${keyName}/requestToken`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({ keyName, clientId: 'resumer', capability: JSON.stringify(capability), timestamp: Date.now() }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

async function connect(query: Record<string, string>): Promise<RawClient> {
  const c = await RawClient.connect(port, query);
  clients.push(c);
  return c;
}

const presentOn = async (channel: string): Promise<string[]> =>
  ((await (await fetch(`http://127.0.0.1:${port}/channels/${channel}/presence`, { headers: auth() })).json()) as { clientId: string }[]).map((m) => m.clientId);

describe('a resume with a narrower capability', () => {
  it('the members on channels it allows no presence on leave; the others stay, and the connection is the same', async () => {
    const id = uniqueChannel();
    const [keep, lose] = [`keep-${id}`, `lose-${id}`];
    const first = await connect({ access_token: await token({ 'keep-*': ['*'], 'lose-*': ['*'] }) });
    for (const channel of [keep, lose]) expect((await first.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
    const connected = first.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    const key = (connected.connectionDetails as { connectionKey: string }).connectionKey;
    first.close();
    await first.closed;

    const observer = await connect({ key: ts.key });
    const leave = observer.next((pm) => pm.action === Actions.PRESENCE && pm.channel === lose && (pm.presence as { action: number }[]).some((p) => p.action === 3), 10_000, false);
    expect((await observer.attach(lose)).action).toBe(Actions.ATTACHED);

    const resumed = await connect({ access_token: await token({ 'keep-*': ['*'], 'lose-*': ['subscribe'] }), resume: key });
    const reconnected = resumed.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    expect(reconnected.connectionId).toBe(connected.connectionId);
    expect(reconnected.error).toBeUndefined();
    await leave;
    expect(await presentOn(lose)).toEqual([]);
    expect(await presentOn(keep)).toEqual(['resumer']);
  });

  it('after a restart (the connection taken over by the instance it resumes on), the same: members where the new capability allows no presence leave', async () => {
    const id = uniqueChannel();
    const [keep, lose] = [`keep-${id}`, `lose-${id}`];
    const first = await connect({ access_token: await token({ 'keep-*': ['*'], 'lose-*': ['*'] }) });
    for (const channel of [keep, lose]) expect((await first.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
    const connected = first.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    const key = (connected.connectionDetails as { connectionKey: string }).connectionKey;
    const narrowed = await token({ 'keep-*': ['*'], 'lose-*': ['subscribe'] });
    ts = await ts.restart();
    port = await listening(ts);
    expect(await presentOn(lose)).toEqual(['resumer']);

    const observer = await connect({ key: ts.key });
    const leave = observer.next((pm) => pm.action === Actions.PRESENCE && pm.channel === lose && (pm.presence as { action: number }[]).some((p) => p.action === 3), 10_000, false);
    expect((await observer.attach(lose)).action).toBe(Actions.ATTACHED);
    const resumed = await connect({ access_token: narrowed, resume: key });
    const reconnected = resumed.frames.find((pm) => pm.action === Actions.CONNECTED)!;
    expect(reconnected.connectionId).toBe(connected.connectionId);
    expect(reconnected.error).toBeUndefined();
    await leave;
    expect(await presentOn(lose)).toEqual([]);
    expect(await presentOn(keep)).toEqual(['resumer']);
  });
});
