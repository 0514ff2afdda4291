// Channels in use are bounded (README: Resource limits): each costs every instance its state, its
// history tail and its lifecycle messages, some 5 KB, so a client publishing one message to each of
// a stream of new names made the service hold memory without bound (100,000 new channels: RSS from
// 137 to 689 MB). A publish, attach or presence change that would begin a channel past
// MAX_ACTIVE_CHANNELS_PER_APP or MAX_ACTIVE_CHANNELS is refused with 40114 (403); channels in use
// go on, and new ones are admitted again once some close.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, listening, startTestService, type TestService } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';

let now = Date.UTC(2030, 0, 15, 10, 0, 0);
const clock = { now: () => now };
const IDLE_MS = 5_000;
const PER_APP = 4;
const TOTAL = 6;
let t: TestService;
let port: number;
let keyA: string;
let keyB: string;
let appA: string;
const opened: RawClient[] = [];
/** The channel the first test keeps attached. */
let attached = '';

beforeAll(async () => {
  t = await startTestService({ CHANNEL_IDLE_MS: String(IDLE_MS), MAX_ACTIVE_CHANNELS_PER_APP: String(PER_APP), MAX_ACTIVE_CHANNELS: String(TOTAL) }, { clock });
  port = await listening(t);
  const app = async (): Promise<{ appId: string; key: string }> => {
    const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability: JSON.stringify({ '[*]*': ['*'] }) }] } })).json();
    return { appId: created.appId, key: created.keys[0].keyStr };
  };
  ({ appId: appA, key: keyA } = await app());
  ({ key: keyB } = await app());
}, 60_000);
afterAll(async () => {
  for (const c of opened) c.close();
  await t.close();
});

const publish = (key: string, channel: string) =>
  t.service.app.inject({ method: 'POST', url: `/channels/${encodeURIComponent(channel)}/messages`, headers: { authorization: basic(key) }, payload: { name: 'n', data: 'd' } });
const held = async (appId: string, channels: string[]): Promise<void> => {
  for (let i = 0; i < 500 && !channels.every((c) => t.service.channels.holds(appId, c)); i++) await new Promise((r) => setTimeout(r, 10));
  expect(channels.filter((c) => !t.service.channels.holds(appId, c))).toEqual([]);
};
const connect = async (key: string): Promise<RawClient> => {
  const c = await RawClient.connect(port, { key });
  opened.push(c);
  return c;
};

describe('the channels an app and the service keep in use are bounded (40114)', () => {
  it('refuses a new channel past the app’s limit over REST, batch and realtime, and serves the channels in use', async () => {
    // Sent at once, before the projection has applied any: the ones admitted count as they go.
    const tried = ['a-0', 'a-1', 'a-2', 'a-3', 'a-4', 'a-5', 'a-6', 'a-7'];
    const answers = await Promise.all(tried.map((c) => publish(keyA, c)));
    expect(answers.map((a) => a.statusCode).sort()).toEqual([201, 201, 201, 201, 403, 403, 403, 403]);
    const inUse = tried.filter((_, i) => answers[i].statusCode === 201);
    await held(appA, inUse);
    const [first, second, third, fourth] = inUse;

    const refused = await publish(keyA, 'a-new');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ code: 40114, statusCode: 403 });
    expect(refused.json().error.message).toContain('MAX_ACTIVE_CHANNELS_PER_APP');
    expect(refused.headers['x-service-errorcode']).toBe('40114');

    // A channel in use is served as ever.
    expect((await publish(keyA, first)).statusCode).toBe(201);

    // Batch: the new channel fails alone.
    const batch = await t.service.app.inject({ method: 'POST', url: '/messages', headers: { authorization: basic(keyA) }, payload: { channels: [second, 'a-new'], messages: { name: 'n' } } });
    expect(batch.statusCode).toBe(400);
    const items = batch.json().batchResponse as { channel: string; error?: { code: number } }[];
    expect(items.find((i) => i.channel === second)?.error).toBeUndefined();
    expect(items.find((i) => i.channel === 'a-new')?.error?.code).toBe(40114);

    // Realtime: the attach of a new channel fails with 40114; one in use attaches; a publish and a
    // presence enter on a new channel are NACKed; the metachannel attaches (never an active channel).
    const client = await connect(keyA);
    const attachNew = await client.attach('a-new');
    expect(attachNew.action).toBe(Actions.ERROR);
    expect((attachNew.error as { code: number }).code).toBe(40114);
    expect((await client.attach(third)).action).toBe(Actions.ATTACHED);
    attached = third;
    expect((await client.attach('[meta]channel.lifecycle')).action).toBe(Actions.ATTACHED);
    const nack = await client.publish('a-new-2', [{ name: 'n' }]);
    expect(nack.action).toBe(Actions.NACK);
    expect((nack.error as { code: number }).code).toBe(40114);
    const presenceNack = await client.presence('a-new-3', [{ action: 2, clientId: 'someone' }]);
    expect(presenceNack.action).toBe(Actions.NACK);
    expect((presenceNack.error as { code: number }).code).toBe(40114);
    expect(client.isClosed).toBe(false);
    expect((await publish(keyA, fourth)).statusCode).toBe(201);
    expect(t.service.channels.heldCount(appA)).toBe(PER_APP);
  });

  it('refuses a new channel of another app past the service’s limit', async () => {
    expect((await publish(keyB, 'b-0')).statusCode).toBe(201);
    expect((await publish(keyB, 'b-1')).statusCode).toBe(201);
    const refused = await publish(keyB, 'b-2');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe(40114);
    expect(refused.json().error.message).toContain('MAX_ACTIVE_CHANNELS)');
  });

  it('admits new channels again once channels close', async () => {
    // The attach and then the detach are on the log before the clock steps: the detach is a use,
    // and its record, not the clock's step, begins the idle time.
    for (let i = 0; i < 1500 && t.service.channels.metrics(appA, attached).connections === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(t.service.channels.metrics(appA, attached).connections).toBe(1);
    for (const c of opened) c.close();
    for (let i = 0; i < 500 && t.service.channels.metrics(appA, attached).connections > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(t.service.channels.metrics(appA, attached).connections).toBe(0);
    now += IDLE_MS + 1;
    // Records appended at one instant of this clock get successive milliseconds (the append clock
    // is monotonic), so the last use may be a little later than `now`: the clock goes on a little.
    for (let i = 0; i < 500 && t.service.channels.heldCount(appA) > 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      now += 100;
    }
    expect(t.service.channels.heldCount(appA)).toBe(0);
    for (const c of ['a-10', 'a-11', 'a-12', 'a-13']) expect((await publish(keyA, c)).statusCode).toBe(201);
    expect((await publish(keyA, 'a-14')).statusCode).toBe(403);
    expect((await publish(keyB, 'b-2')).statusCode).toBe(201);
  });
});
