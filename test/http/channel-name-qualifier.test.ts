import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { basic, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

// A `[?params]` qualifier over REST: `[?rewind=1]room` is the channel `room`, as over realtime
// (src/channels/channel-qualifier.ts restChannelName). The SDK's realtime channel of that name reads
// its history and presence over REST with the name it was given.

const setup = JSON.parse(readFileSync(new URL('../fixtures/test-app-setup.json', import.meta.url), 'utf8')).post_apps;
const FIXTURES = 'persisted:presence_fixtures';
let t: TestService;
let auth: string;
let narrow: string;
let room: string;

beforeAll(async () => {
  t = await startTestService();
  room = uniqueChannel('qualified');
  const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { ...setup, keys: [setup.keys[0], { capability: JSON.stringify({ [room]: ['publish', 'history'] }) }] } })).json();
  auth = basic(created.keys[0].keyStr);
  narrow = basic(created.keys[1].keyStr);
});
afterAll(() => t.close());

const path = (channel: string, rest = '') => `/channels/${encodeURIComponent(channel)}${rest}`;
const get = (url: string, authorization = auth) => t.service.app.inject({ url, headers: { authorization } });
const publish = (channel: string, name: string, authorization = auth) =>
  t.service.app.inject({ method: 'POST', url: path(channel, '/messages'), headers: { authorization, 'x-ably-version': '6' }, payload: { name, data: 'd' } });
const names = async (channel: string, authorization = auth) => ((await get(path(channel, '/messages?direction=forwards'), authorization)).json() as { name: string }[]).map((m) => m.name);

describe('a [?params] qualifier over REST names the channel after it, as over realtime', () => {
  it('a publish to [?rewind=1]room goes to room, and the history of either name is room\'s', async () => {
    const channel = uniqueChannel('params');
    const res = await publish(`[?rewind=1]${channel}`, 'qualified');
    expect(res.statusCode).toBe(201);
    expect(res.json().channel).toBe(channel);
    expect((await publish(channel, 'plain')).statusCode).toBe(201);
    expect(await names(channel)).toEqual(['qualified', 'plain']);
    expect(await names(`[?rewind=1&occupancy=metrics]${channel}`)).toEqual(['qualified', 'plain']);
  });

  it('the status, presence and presence history of [?params]room are room\'s', async () => {
    const status = await get(path(`[?rewind=1]${FIXTURES}`));
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({ channelId: FIXTURES, status: { isActive: true } });
    const members = (await get(path(`[?rewind=1]${FIXTURES}`, '/presence'))).json();
    expect(members).toHaveLength((await get(path(FIXTURES, '/presence'))).json().length);
    expect(members.length).toBeGreaterThan(0);
    expect((await get(path(`[?x=1]${FIXTURES}`, '/presence/history'))).statusCode).toBe(200);
    const batch = (await get(`/presence?channels=${encodeURIComponent(`[?rewind=1]${FIXTURES}`)}`)).json();
    expect(batch[0]).toMatchObject({ channel: FIXTURES });
    expect(batch[0].presence).toHaveLength(members.length);
  });

  it('the capability is judged on room: a key for room alone publishes and reads through [?params]room, and nothing else', async () => {
    expect((await publish(`[?rewind=1]${room}`, 'by-narrow', narrow)).statusCode).toBe(201);
    expect(await names(`[?rewind=5]${room}`, narrow)).toEqual(['by-narrow']);
    const other = await publish(`[?rewind=1]${room}-other`, 'x', narrow);
    expect(other.statusCode).toBe(401);
    expect(other.json().error.code).toBe(40160);
  });

  it('a batch publish to [?params]room publishes to room', async () => {
    const channel = uniqueChannel('batch');
    const res = await t.service.app.inject({ method: 'POST', url: '/messages', headers: { authorization: auth }, payload: { channels: [`[?rewind=1]${channel}`], messages: { name: 'batched' } } });
    expect(res.statusCode).toBe(201);
    expect(res.json()[0].channel).toBe(channel);
    expect(await names(channel)).toEqual(['batched']);
  });

  it('a derived channel ([filter=...]room) is refused with 40010 naming the qualifier: it is served over realtime only', async () => {
    const filter = Buffer.from("name == 'a'").toString('base64');
    for (const res of [await publish(`[filter=${filter}]${room}`, 'x'), await get(path(`[filter=${filter}?rewind=1]${room}`, '/messages'))]) {
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 40010, statusCode: 400, message: expect.stringContaining(`"[filter=...]${room}" names a derived channel, served over realtime only`) });
    }
    expect(await names(room)).toEqual(['by-narrow']);
  });

  it('an unknown qualifier, a qualifier with no channel after it and one in front of another are 40010', async () => {
    for (const bad of ['[foo]room', '[?rewind=1]', '[?rewind=1room', '[?x][meta]channel.lifecycle']) {
      const res = await publish(bad, 'x');
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().error.code, bad).toBe(40010);
    }
  });
});
