import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { decode } from '@msgpack/msgpack';
import { basic, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

// A clock the test moves: idle channels close when it passes their last use + CHANNEL_IDLE_MS.
let now = Date.UTC(2030, 0, 15, 10, 0, 0);
const clock = { now: () => now };
const IDLE_MS = 5_000;
let t: TestService;
let appId: string;
let keys: { keyStr: string }[];

beforeAll(async () => {
  t = await startTestService({ CHANNEL_IDLE_MS: String(IDLE_MS) }, { clock });
  const created = (
    await t.service.app.inject({
      method: 'POST',
      url: '/apps',
      payload: {
        keys: [
          {},
          { capability: JSON.stringify({ '*': ['subscribe', 'publish'] }) },
          { capability: JSON.stringify({ 'ns:*': ['channel-metadata'] }) },
          { capability: JSON.stringify({ '*': ['channel-metadata'] }) },
          { capability: JSON.stringify({ '[meta]*': ['*'] }) },
        ],
      },
    })
  ).json();
  appId = created.appId;
  keys = created.keys;
});
afterAll(() => t.close());

const get = (url: string, key = keys[0].keyStr, headers: Record<string, string> = {}) =>
  t.service.app.inject({ url, headers: { authorization: basic(key), ...headers } });
const publish = (channel: string, key = keys[0].keyStr) =>
  t.service.app.inject({ method: 'POST', url: `/channels/${encodeURIComponent(channel)}/messages`, headers: { authorization: basic(key) }, payload: { name: 'n', data: 'd' } });
const links = (header: unknown): Record<string, string> =>
  Object.fromEntries([...String(header ?? '').matchAll(/<([^>]+)>; rel="(\w+)"/g)].map((m) => [m[2], m[1]]));
/** Waits until the channels projection has read what was appended (it consumes the log). */
const settled = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(check()).toBe(true);
};
const ZERO = { connections: 0, publishers: 0, subscribers: 0, presenceConnections: 0, presenceMembers: 0, presenceSubscribers: 0 };

describe('GET /channels/<channel_id> (spec: Channel status)', () => {
  it('answers ChannelDetails with status.isActive and status.occupancy.metrics', async () => {
    const channel = uniqueChannel();
    const res = await get(`/channels/${channel}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ channelId: channel, status: { isActive: true, occupancy: { metrics: ZERO } } });
  });

  it('activates the channel (spec: Channel activity): it is listed, then closes after the idle time', async () => {
    const channel = uniqueChannel('activated');
    await get(`/channels/${channel}`);
    await settled(() => t.service.channels.isActive(appId, channel, now));
    expect((await get(`/channels?by=id&prefix=${channel}`)).json()).toEqual([channel]);
    now += IDLE_MS;
    expect(t.service.channels.isActive(appId, channel, now)).toBe(false);
    expect((await get(`/channels?by=id&prefix=${channel}`)).json()).toEqual([]);
  });

  it('a publish makes a channel active for the idle time after it', async () => {
    const channel = uniqueChannel('published');
    expect((await publish(channel)).statusCode).toBe(201);
    await settled(() => t.service.channels.isActive(appId, channel, now));
    now += IDLE_MS - 1;
    expect(t.service.channels.isActive(appId, channel, now)).toBe(true);
    now += 1;
    expect(t.service.channels.isActive(appId, channel, now)).toBe(false);
  });

  it('needs the channel-metadata capability for that channel (40160 otherwise)', async () => {
    const denied = await get(`/channels/${uniqueChannel()}`, keys[1].keyStr);
    expect(denied.statusCode).toBe(401);
    expect(denied.json().error.code).toBe(40160);
    expect((await get(`/channels/ns:${uniqueChannel()}`, keys[2].keyStr)).statusCode).toBe(200);
    expect((await get(`/channels/other-${uniqueChannel()}`, keys[2].keyStr)).statusCode).toBe(401);
  });

  it('"*" does not reach a metachannel; "[meta]*" does (spec: Authentication, rule 6)', async () => {
    expect((await get('/channels/[meta]channel.lifecycle', keys[3].keyStr)).json().error.code).toBe(40160);
    const meta = await get('/channels/[meta]channel.lifecycle', keys[4].keyStr);
    expect(meta.statusCode).toBe(200);
    expect(meta.json().channelId).toBe('[meta]channel.lifecycle');
  });

  it('never publishes on a metachannel, even with every operation', async () => {
    const res = await publish('[meta]channel.lifecycle', keys[4].keyStr);
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
  });

  it('refuses a [?params] name in front of [meta] (40010): "*" reached it as a regular channel, listed and announced like the metachannel', async () => {
    const spoof = '[?x][meta]channel.lifecycle';
    const published = await publish(spoof);
    expect(published.statusCode).toBe(400);
    expect(published.json().error.code).toBe(40010);
    expect((await get(`/channels/${encodeURIComponent(spoof)}`, keys[3].keyStr)).json().error.code).toBe(40010);
    expect((await get('/channels?by=id&prefix=%5B', keys[3].keyStr)).json()).toEqual([]);
  });

  it('answers in a MessagePack envelope with envelope=msgpack, as the SDK asks for it', async () => {
    const channel = uniqueChannel();
    const res = await get(`/channels/${channel}?envelope=msgpack`, keys[0].keyStr, { accept: 'application/x-msgpack' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/x-msgpack');
    expect(decode(res.rawPayload)).toMatchObject({ statusCode: 200, response: { channelId: channel, status: { isActive: true } } });
    const error = await get(`/channels/${channel}?envelope=msgpack`, keys[1].keyStr, { accept: 'application/x-msgpack' });
    expect(error.statusCode).toBe(200);
    expect(decode(error.rawPayload)).toMatchObject({ statusCode: 401, response: { error: { code: 40160 } } });
  });

  it('refuses envelope=msgpack in JSON and envelope=json in MessagePack', async () => {
    expect((await get(`/channels/${uniqueChannel()}?envelope=msgpack`)).json().error.code).toBe(40003);
    expect((await get(`/channels/${uniqueChannel()}?envelope=json&format=msgpack`)).statusCode).toBe(400);
  });
});

describe('GET /channels (spec: Channel enumeration)', () => {
  it('lists active channels as ChannelDetails by default, names with by=id, only those with the prefix', async () => {
    const prefix = `${uniqueChannel('enum')}-`;
    const names = ['c', 'a', 'b'].map((s) => prefix + s);
    for (const n of names) await publish(n);
    await settled(() => names.every((n) => t.service.channels.isActive(appId, n, now)));
    const values = await get(`/channels?prefix=${prefix}`);
    expect(values.statusCode).toBe(200);
    expect(values.json()).toEqual(names.sort().map((channelId) => ({ channelId, status: { isActive: true, occupancy: { metrics: ZERO } } })));
    expect((await get(`/channels?prefix=${prefix}&by=id`)).json()).toEqual(names.sort());
  });

  it('pages with limit and Link next, visiting every channel active throughout exactly once', async () => {
    const prefix = `${uniqueChannel('paging')}-`;
    const names = Array.from({ length: 25 }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
    for (const n of names) await publish(n);
    await settled(() => names.every((n) => t.service.channels.isActive(appId, n, now)));
    const seen: string[] = [];
    let url: string | undefined = `/channels?prefix=${prefix}&by=id&limit=10`;
    let pages = 0;
    while (url) {
      const res = await get(url);
      expect(res.statusCode).toBe(200);
      seen.push(...res.json());
      pages++;
      // A channel that becomes active during the walk, ahead of the cursor, is visited once too.
      if (pages === 1) {
        await publish(`${prefix}zz`);
        await settled(() => t.service.channels.isActive(appId, `${prefix}zz`, now));
      }
      const next = links(res.headers.link).next;
      url = next ? `/channels${next.slice('./channels'.length)}` : undefined;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual([...names, `${prefix}zz`]);
  });

  it('pages past channels whose names are too long to go whole in a Link header', async () => {
    const prefix = `${uniqueChannel('long')}-`;
    const names = ['a', 'b', 'c', 'd'].map((s) => `${prefix}${s}${'é'.repeat(900)}`);
    for (const n of names) expect((await publish(n)).statusCode).toBe(201);
    await settled(() => names.every((n) => t.service.channels.isActive(appId, n, now)));
    const seen: string[] = [];
    let url: string | undefined = `/channels?prefix=${prefix}&by=id&limit=1`;
    while (url) {
      const res = await get(url);
      expect(res.statusCode).toBe(200);
      expect(String(res.headers.link).length).toBeLessThan(2048);
      seen.push(...res.json());
      const next = links(res.headers.link).next;
      url = next ? `/channels${next.slice('./channels'.length)}` : undefined;
    }
    expect(seen).toEqual(names);
  });

  it('limit defaults to 100 and above 1000 is refused', async () => {
    expect((await get('/channels?limit=1001')).json().error.code).toBe(40003);
    expect((await get('/channels?by=name')).json().error.code).toBe(40003);
  });

  it('needs channel-metadata on "*", or on a resource covering the prefix', async () => {
    expect((await get('/channels', keys[1].keyStr)).json().error.code).toBe(40160);
    expect((await get('/channels', keys[2].keyStr)).json().error.code).toBe(40160);
    expect((await get('/channels?prefix=ns:', keys[2].keyStr)).statusCode).toBe(200);
    expect((await get('/channels?prefix=ns:abc', keys[2].keyStr)).statusCode).toBe(200);
    expect((await get('/channels?prefix=other', keys[2].keyStr)).json().error.code).toBe(40160);
    expect((await get('/channels', keys[3].keyStr)).statusCode).toBe(200);
  });

  it('lists no metachannel', async () => {
    const all = (await get('/channels?by=id&limit=1000')).json() as string[];
    expect(all.some((c) => c.startsWith('[meta]'))).toBe(false);
  });
});

describe('[meta]channel.lifecycle (spec: Events, 3)', () => {
  const schema = JSON.parse(readFileSync(new URL('../fixtures/ably-common-channel-lifecycle.json', import.meta.url), 'utf8'));
  const validate = new Ajv({ strict: false }).compile(schema);
  const lifecycleOf = async (channel: string): Promise<{ id: string; name: string; details: Record<string, unknown> }[]> => {
    const res = await get(`/channels/${encodeURIComponent('[meta]channel.lifecycle')}/messages?direction=forwards&limit=1000`, keys[4].keyStr);
    expect(res.statusCode).toBe(200);
    return (res.json() as { id: string; name: string; data: string; encoding: string }[])
      .map((m) => ({ id: m.id, name: m.name, details: JSON.parse(m.data) }))
      .filter((m) => m.details.channelId === channel);
  };
  const until = async (channel: string, names: string[]) => {
    let events = await lifecycleOf(channel);
    for (let i = 0; i < 300 && events.map((e) => e.name).join() !== names.join(); i++) {
      await new Promise((r) => setTimeout(r, 20));
      events = await lifecycleOf(channel);
    }
    expect(events.map((e) => e.name)).toEqual(names);
    return events;
  };

  it('a channel put to use is opened and active in the region; left idle, it becomes inactive and closes; each event is ChannelDetails of the schema', async () => {
    const channel = uniqueChannel('lifecycle');
    await publish(channel);
    const opened = await until(channel, ['channel.opened', 'channel.region.active']);
    expect(opened[0].details).toMatchObject({ channelId: channel, name: channel, region: 'local', status: { isActive: true } });
    now += IDLE_MS;
    const all = await until(channel, ['channel.opened', 'channel.region.active', 'channel.region.inactive', 'channel.closed']);
    expect(all[3].details).toMatchObject({ channelId: channel, status: { isActive: false } });
    for (const e of all) expect(validate(e.details), JSON.stringify(validate.errors)).toBe(true);
    // Ids come from the records that caused them: the same period of activity, the same ids.
    expect(new Set(all.map((e) => e.id)).size).toBe(4);
  });

  it('"*" cannot read the metachannel; "[meta]*" can', async () => {
    const wildcard = await get(`/channels/${encodeURIComponent('[meta]channel.lifecycle')}/messages`, keys[1].keyStr);
    expect(wildcard.json().error.code).toBe(40160);
    const keyWithMeta = await get(`/channels/${encodeURIComponent('[meta]channel.lifecycle')}/messages`, keys[4].keyStr);
    expect(keyWithMeta.statusCode).toBe(200);
  });
});
