import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode, encode } from '@msgpack/msgpack';
import type { InjectOptions } from 'fastify';
import { basic, startTestService, testServiceMode, type TestService } from '../helpers/service.js';

// A fixed, 6-second-aligned clock: 2030-01-15 10:20:00 UTC.
const T0 = Date.UTC(2030, 0, 15, 10, 20, 0);
let now = T0;
const clock = { now: () => now };
let t: TestService;
let appKey: string;
let auth: string;

const inject = (opts: InjectOptions) => t.service.app.inject(opts);

/** Lets usage reports and the projection catch up, then writes the stats. */
async function settle(): Promise<void> {
  await t.service.usage.flush();
  await new Promise((r) => setImmediate(r));
  await t.service.stats.flush();
}

async function stats(query = '', headers: Record<string, string> = {}) {
  const res = await inject({ url: `/stats${query ? `?${query}` : ''}`, headers: { authorization: auth, ...headers } });
  return res;
}

beforeAll(async () => {
  t = await startTestService({}, { clock });
  // A fresh app per file, so counts are exact.
  const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{}, { capability: '{"*":["publish"]}' }], namespaces: [{ id: 'persisted', persisted: true }] } })).json();
  appKey = created.keys[0].keyStr;
  auth = basic(appKey);
});
afterAll(() => t.close());

describe('GET /stats (spec: Retrieve usage statistics)', () => {
  it('counts published messages exactly: JSON, MessagePack and batch, with data bytes; persisted ones twice', async () => {
    now = T0 + 1000;
    const publish = (channel: string, payload: unknown, contentType = 'application/json') =>
      inject({
        method: 'POST',
        url: `/channels/${encodeURIComponent(channel)}/messages`,
        headers: { authorization: auth, 'content-type': contentType },
        payload: contentType === 'application/json' ? JSON.stringify(payload) : Buffer.from(encode(payload)),
      });
    expect((await publish('plain', [{ data: 'abcde' }, { data: 'xyz' }])).statusCode).toBe(201); // 2 msgs, 8 bytes
    expect((await publish('plain', { data: new Uint8Array(10) }, 'application/x-msgpack')).statusCode).toBe(201); // 1 msg, 10 bytes
    expect((await publish('persisted:p', { data: 'hello' })).statusCode).toBe(201); // 1 msg, 5 bytes, persisted
    const batch = await inject({
      method: 'POST',
      url: '/messages',
      headers: { authorization: auth, 'content-type': 'application/json' },
      payload: { channels: ['b1', 'b2'], messages: { data: '1234' } }, // 2 msgs, 8 bytes
    });
    expect(batch.statusCode).toBe(201);
    now = T0 + 2000;
    await settle();
    const res = await stats(`start=${T0}&end=${T0 + 5999}`, { 'x-ably-version': '6' });
    expect(res.statusCode).toBe(200);
    const [record] = res.json();
    expect(record).toMatchObject({ intervalId: '2030-01-15:10:20', unit: 'minute', schema: expect.stringContaining('app-stats') });
    const e = record.entries;
    expect(e['messages.inbound.rest.messages.count']).toBe(6);
    expect(e['messages.inbound.rest.messages.data']).toBe(31);
    expect(e['messages.inbound.all.all.count']).toBe(6);
    expect(e['messages.persisted.messages.count']).toBe(1);
    expect(e['messages.persisted.messages.data']).toBe(5);
    expect(e['messages.all.messages.count']).toBe(7); // the persisted message counts twice
    expect(e['channels.peak']).toBe(4); // plain, persisted:p, b1, b2
    expect(e['channels.opened']).toBe(4);
    expect(e['apiRequests.all.succeeded']).toBe(4); // 3 publishes and 1 batch
  });

  it('counts messages read from history as outbound REST; persisted reads also in the persisted section', async () => {
    now = T0 + 60_000; // next minute
    const read = await inject({ url: '/channels/persisted%3Ap/messages', headers: { authorization: auth } });
    expect(read.json()).toHaveLength(1);
    await inject({ url: '/channels/plain/messages', headers: { authorization: auth } }); // 3 msgs
    now = T0 + 61_000;
    await settle();
    const [record] = (await stats(`start=${T0 + 60_000}&end=${T0 + 60_000}&unit=minute`, { 'x-ably-version': '6' })).json();
    expect(record.entries['messages.outbound.rest.messages.count']).toBe(4);
    expect(record.entries['messages.persisted.messages.count']).toBe(1);
    expect(record.entries['messages.all.messages.count']).toBe(4); // a persisted read counts once more, not twice
  });

  it('counts refused and failed API requests, and token requests', async () => {
    now = T0 + 120_000;
    const publishOnly = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    void publishOnly;
    await inject({ url: '/channels/x/messages?limit=99999', headers: { authorization: auth } }); // failed (400)
    await inject({ method: 'POST', url: `/keys/${appKey.split(':')[0]}/requestToken`, headers: { authorization: auth, 'content-type': 'application/json' }, payload: { keyName: appKey.split(':')[0], timestamp: now } });
    now = T0 + 121_000;
    await settle();
    const [record] = (await stats(`start=${T0 + 120_000}&end=${T0 + 120_000}`, { 'x-ably-version': '6' })).json();
    expect(record.entries['apiRequests.all.failed']).toBe(1);
    expect(record.entries['apiRequests.tokenRequests.succeeded']).toBe(1);
    expect(record.entries['apiRequests.all.succeeded']).toBe(1);
  });

  it('version 0.8 (no version stated) gets the nested record; empty sections are left out', async () => {
    const [record] = (await stats(`start=${T0}&end=${T0 + 5999}`)).json();
    expect(record.intervalId).toBe('2030-01-15:10:20');
    expect(record.inbound.rest.messages).toEqual({ count: 6, data: 31 });
    expect(record.all.messages.count).toBe(7);
    expect(record.persisted.messages.count).toBe(1);
    expect(record.channels).toMatchObject({ peak: 4, opened: 4 });
    expect(record.apiRequests.succeeded).toBe(5); // now also the first GET /stats, made in this sample
    expect(record).not.toHaveProperty('outbound');
    expect(record).not.toHaveProperty('entries');
  });

  it('start and end are rounded down to the 6-second boundary and may be interval ids', async () => {
    expect((await stats(`start=${T0 + 5999}&end=${T0 + 5999}`)).json()).toHaveLength(1); // rounds to T0
    expect((await stats(`start=${T0 + 6000}&end=${T0 + 11_999}`)).json()).toHaveLength(0);
    expect((await stats('start=2030-01-15:10:20&end=2030-01-15:10:20')).json()).toHaveLength(1);
    expect((await stats('start=2030-01-15:10&end=2030-01-15:10:21&direction=forwards')).json().map((r: { intervalId: string }) => r.intervalId)).toEqual([
      '2030-01-15:10:20',
      '2030-01-15:10:21',
    ]);
  });

  it.each([
    ['unit=week', 40003],
    ['start=tomorrow', 40003],
    ['start=2030-02-30', 40003],
    // Before the epoch: it was taken, and the Link headers carried start=-2208988800000, which the
    // same route refused when the client followed them (review finding).
    ['start=0000-01-01:00:00', 40003],
    ['end=1969-12-31', 40003],
    // Date.UTC reads a year under 100 as 19xx: it was taken as 1999-12 (review finding).
    ['start=0099-12', 40003],
    // Past the last interval id (9999-12-31:23:59:59.999): a day or month there has no date, and a
    // page of days from such an end spun the event loop for good (review finding).
    ['end=9999999999999999', 40003],
    ['end=253402300800000&unit=day', 40003],
    ['end=8640000000000000&unit=month', 40003],
    ['limit=1001', 40003],
    ['direction=up', 40003],
    [`start=${T0 + 6000}&end=${T0}`, 40003],
    ['flatten=maybe', 40003],
    ['select=a..b', 40003],
  ])('refuses %s', async (query, code) => {
    const res = await stats(query);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(code);
  });

  it('needs the stats capability (40160)', async () => {
    const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability: '{"*":["publish"]}' }] } })).json();
    const res = await inject({ url: '/stats', headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
  });

  it.each([
    ['"*" on one channel', '{"mine":["*"]}'],
    ['"stats" on one channel', '{"mine":["stats"]}'],
    ['"stats" on a namespace', '{"ns:*":["stats","publish"]}'],
    ['"*" on the metachannels', '{"[meta]*":["*"]}'],
  ])('a right over part of the app does not read the whole app\'s stats: %s gets 40160 (401) in the error format', async (_what, capability) => {
    const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability }] } })).json();
    const res = await inject({ url: '/stats', headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(res.statusCode).toBe(401);
    expect(res.headers['x-ably-errorcode']).toBe('40160');
    expect(res.json().error).toMatchObject({ code: 40160, statusCode: 401, message: expect.stringContaining('"*"') });
  });

  it.each([
    ['"stats" on "*"', '{"*":["stats"]}'],
    ['"*" on "*"', '{"*":["*"]}'],
    ['"*" on "[*]*"', '{"[*]*":["*"]}'],
  ])('a right over the whole app reads its stats: %s', async (_what, capability) => {
    const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability }] } })).json();
    const res = await inject({ url: '/stats', headers: { authorization: basic(created.keys[0].keyStr) } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(expect.any(Array));
  });

  it('a token narrowed to one channel cannot read stats, though its key can', async () => {
    const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const key = created.keys[0];
    const token = await inject({
      method: 'POST',
      url: `/keys/${key.keyName}/requestToken`,
      headers: { authorization: basic(key.keyStr) },
      payload: { keyName: key.keyName, timestamp: now, capability: '{"mine":["*"]}' },
    });
    expect(token.statusCode).toBe(200);
    const bearer = `Bearer ${Buffer.from(token.json().token).toString('base64')}`;
    const res = await inject({ url: '/stats', headers: { authorization: bearer } });
    expect(res.json().error).toMatchObject({ code: 40160, statusCode: 401 });
  });
});

describe('stats units, peaks and paging (sandbox fixtures)', () => {
  let fixtureAuth: string;
  beforeAll(async () => {
    fixtureAuth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    const fixtures = [
      { intervalId: '2030-03-01:10:00', inbound: { realtime: { messages: { count: 50, data: 5000 } } }, channels: { peak: 3, opened: 3 } },
      { intervalId: '2030-03-01:10:01', inbound: { realtime: { messages: { count: 60, data: 6000 } } }, channels: { peak: 7, opened: 1 } },
      { intervalId: '2030-03-01:11:00', outbound: { realtime: { messages: { count: 20, data: 2000 } } }, channels: { peak: 2 } },
      { intervalId: '2030-03-02:00:00', persisted: { messages: { count: 5, data: 50 } } },
      { intervalId: '2030-04-01:00:00', apiRequests: { succeeded: 9 }, tokenRequests: { refused: 2 } },
    ];
    const res = await inject({ method: 'POST', url: '/stats', headers: { authorization: fixtureAuth, 'content-type': 'application/json' }, payload: fixtures });
    expect(res.statusCode).toBe(201);
    now = Date.UTC(2030, 5, 1);
    await settle();
  });

  const fixtureStats = async (query: string) =>
    (await inject({ url: `/stats?${query}`, headers: { authorization: fixtureAuth } })).json() as Record<string, any>[];

  it('minute: one record per minute with data, intervalId yyyy-mm-dd:hh:mm', async () => {
    const records = await fixtureStats('unit=minute&direction=forwards&start=2030-03-01:10:00&end=2030-03-01:10:01');
    expect(records.map((r) => r.intervalId)).toEqual(['2030-03-01:10:00', '2030-03-01:10:01']);
    expect(records[0].inbound.realtime.messages.count).toBe(50);
  });

  it('hour: counters add up and the peak is the largest sample, not a sum', async () => {
    const records = await fixtureStats('unit=hour&direction=forwards&start=2030-03-01:10&end=2030-03-01:11:59');
    expect(records.map((r) => r.intervalId)).toEqual(['2030-03-01:10', '2030-03-01:11']);
    expect(records[0].inbound.realtime.messages).toEqual({ count: 110, data: 11_000 });
    expect(records[0].inbound.realtime.all.count).toBe(110);
    expect(records[0].channels.peak).toBe(7);
    expect(records[0].channels.opened).toBe(4);
    expect(records[0].channels.min).toBe(0); // most 6-second samples of the hour had no channel
    expect(records[0].channels.mean).toBeCloseTo(10 / 600, 3);
  });

  it('day and month: yyyy-mm-dd and yyyy-mm', async () => {
    const days = await fixtureStats('unit=day&direction=forwards&start=2030-03-01&end=2030-03-02:23:59');
    expect(days.map((r) => r.intervalId)).toEqual(['2030-03-01', '2030-03-02']);
    expect(days[0].all.messages.count).toBe(130);
    expect(days[1].persisted.messages.count).toBe(5);
    const months = await fixtureStats('unit=month&direction=forwards&start=2030-03&end=2030-04-30:23:59');
    expect(months.map((r) => r.intervalId)).toEqual(['2030-03', '2030-04']);
    expect(months[0].all.messages.count).toBe(135);
    expect(months[1].apiRequests.succeeded).toBe(9);
    expect(months[1].tokenRequests.refused).toBe(2);
  });

  it('accepts `by` as a synonym of unit', async () => {
    expect((await fixtureStats('by=month&start=2030-03&end=2030-03-31:23:59')).map((r) => r.intervalId)).toEqual(['2030-03']);
  });

  it('pages with Link headers in both directions, each record once', async () => {
    for (const direction of ['forwards', 'backwards']) {
      const seen: string[] = [];
      let url = `/stats?unit=minute&limit=2&direction=${direction}&start=2030-03-01&end=2030-04-30`;
      for (;;) {
        const res = await inject({ url, headers: { authorization: fixtureAuth } });
        seen.push(...res.json().map((r: { intervalId: string }) => r.intervalId));
        const next = /<\.\/stats\?([^>]+)>; rel="next"/.exec(String(res.headers.link))?.[1];
        if (!next) break;
        url = `/stats?${next}`;
      }
      const expected = ['2030-03-01:10:00', '2030-03-01:10:01', '2030-03-01:11:00', '2030-03-02:00:00', '2030-04-01:00:00'];
      expect(seen).toEqual(direction === 'forwards' ? expected : [...expected].reverse());
    }
  });

  it('a JSON page is the records every other form gives, read again too (records kept with the rows held); a record in progress follows the clock', async () => {
    const q = 'unit=hour&direction=forwards&start=2030-03-01:10&end=2030-03-02:23:59';
    const first = await fixtureStats(q);
    expect(first).toHaveLength(3);
    expect(await fixtureStats(q)).toEqual(first);
    const enveloped = await inject({ url: `/stats?${q}&envelope=json`, headers: { authorization: fixtureAuth } });
    expect(enveloped.json().response).toEqual(first);
    const packed = await inject({ url: `/stats?${q}`, headers: { authorization: fixtureAuth, accept: 'application/x-msgpack' } });
    expect(decode(packed.rawPayload)).toEqual(first);
    // March in progress: its mean counts the samples elapsed so far, so it changes as time goes by.
    const march = async (at: number) => {
      now = at;
      const [month] = await fixtureStats('unit=month&start=2030-03&end=2030-03-31:23:59');
      return month;
    };
    const early = await march(Date.UTC(2030, 2, 1, 10, 30));
    const later = await march(Date.UTC(2030, 2, 20));
    expect(early.inProgress).toBe('2030-03-02:00:00:00');
    expect(later.channels.mean).toBeLessThan(early.channels.mean);
    const closed = await march(Date.UTC(2030, 5, 1));
    expect(closed.inProgress).toBeUndefined();
    expect(await march(Date.UTC(2030, 5, 1))).toEqual(closed);
  });

  it('marks the current interval as in progress', async () => {
    now = Date.UTC(2030, 3, 1, 0, 0, 30);
    const [month] = await fixtureStats('unit=month&start=2030-04&end=2030-04-01:00:00');
    expect(month.inProgress).toBe('2030-04-01:00:00:00');
    now = Date.UTC(2030, 5, 1);
  });

  describe('response control (spec: fields, flatten, select)', () => {
    const q = 'unit=hour&direction=forwards&start=2030-03-01:10&end=2030-03-01:11:59';
    it('fields keeps only the listed paths', async () => {
      const records = await fixtureStats(`${q}&fields=intervalId,channels.peak`);
      expect(records).toEqual([
        { intervalId: '2030-03-01:10', channels: { peak: 7 } },
        { intervalId: '2030-03-01:11', channels: { peak: 2 } },
      ]);
    });

    it('flatten=true gives one object with dot-joined keys and array indexes', async () => {
      const flat = await fixtureStats(`${q}&flatten=true&fields=intervalId,inbound.realtime.messages.count`);
      expect(flat).toEqual({ '0.intervalId': '2030-03-01:10', '0.inbound.realtime.messages.count': 110, '1.intervalId': '2030-03-01:11' });
    });

    it('select matches wildcards and array indexes', async () => {
      expect(await fixtureStats(`${q}&select=channels.peak`)).toEqual({ '0.channels.peak': 7, '1.channels.peak': 2 });
      expect(await fixtureStats(`${q}&select=1.channels.*`)).toEqual({ '1.channels.peak': 2, '1.channels.min': 0, '1.channels.mean': expect.any(Number) });
      expect(await fixtureStats(`${q}&select=*.inbound.*.messages.count`)).toEqual({
        '0.inbound.realtime.messages.count': 110,
        '0.inbound.all.messages.count': 110,
      });
    });
  });
});

describe('sandbox POST /stats: read-your-writes', () => {
  it('fixtures are readable as soon as the call returns (answered once the stats projection applied and stored them)', async () => {
    const auth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    for (const [i, minute] of ['2031-01-01:10:00', '2031-01-01:10:01', '2031-01-01:10:02'].entries()) {
      const posted = await inject({
        method: 'POST',
        url: '/stats',
        headers: { authorization: auth, 'content-type': 'application/json' },
        payload: [{ intervalId: minute, inbound: { rest: { messages: { count: 10 + i, data: 100 } } } }],
      });
      expect(posted.statusCode).toBe(201);
      // No settling, no waiting: the next request sees it.
      const records = (await inject({ url: `/stats?unit=minute&direction=forwards&start=2031-01-01:10:00&end=2031-01-01:10:59`, headers: { authorization: auth } })).json();
      expect(records.map((r: { intervalId: string }) => r.intervalId)).toEqual(['2031-01-01:10:00', '2031-01-01:10:01', '2031-01-01:10:02'].slice(0, i + 1));
      expect(records[i].inbound.rest.messages.count).toBe(10 + i);
    }
  });
});

describe('sandbox POST /stats: who may write an app\'s stats', () => {
  it.each([
    ['a key for one channel\'s subscribers', '{"ch":["subscribe"]}'],
    ['a key that reads stats', '{"*":["stats"]}'],
  ])('%s cannot (40160), and nothing is written', async (_, capability) => {
    const created = (await inject({ method: 'POST', url: '/apps', payload: { keys: [{}, { capability }] } })).json();
    const [root, narrow] = created.keys.map((k: { keyStr: string }) => basic(k.keyStr));
    const res = await inject({
      method: 'POST',
      url: '/stats',
      headers: { authorization: narrow, 'content-type': 'application/json' },
      payload: { intervalId: '2031-03-01:10:00', inbound: { rest: { messages: { count: 1_000_000 } } } },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe(40160);
    expect(res.headers['x-service-errorcode']).toBe('40160');
    expect((await inject({ url: '/stats?start=2031-03-01:10:00&end=2031-03-01:10:00', headers: { authorization: root } })).json()).toEqual([]);
  });
});

describe('sandbox POST /stats: figures a stats record holds', () => {
  const post = (auth: string, payload: object) =>
    inject({ method: 'POST', url: '/stats', headers: { authorization: auth, 'content-type': 'application/json' }, payload });

  it('a fixture of 20,000,000 channels is counted, not held as as many keys (the stats projection threw on it and retried it for ever)', async () => {
    const auth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    const posted = await post(auth, [{ intervalId: '2031-02-01:10:00', channels: { peak: 20_000_000 }, connections: { all: { peak: 7 } } }]);
    expect(posted.statusCode).toBe(201);
    const [record] = (await inject({ url: '/stats?unit=minute&start=2031-02-01:10:00&end=2031-02-01:10:00', headers: { authorization: auth } })).json();
    expect(record.channels.peak).toBe(20_000_000);
    expect(record.connections.all.peak).toBe(7);
    // The projection goes on: another app's fixture after it is read as well.
    const other = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    expect((await post(other, { intervalId: '2031-02-01:10:01', inbound: { rest: { messages: { count: 3, data: 30 } } } })).statusCode).toBe(201);
    const [read] = (await inject({ url: '/stats?unit=minute&start=2031-02-01:10:01&end=2031-02-01:10:01', headers: { authorization: other } })).json();
    expect(read.inbound.rest.messages.count).toBe(3);
  });

  it.each([
    ['a channels peak above UInt32', { channels: { peak: 2 ** 32 } }],
    ['a connections peak above UInt32', { connections: { tls: { peak: 2 ** 32 } } }],
    // Two of 1e308 summed to Infinity, which JSON gave as null.
    ['a counter above 2^53', { inbound: { rest: { messages: { count: 1e308 } } } }],
    // ClickHouse's DateTime ends in 2106: the month of 2162-12 was rolled up into 2026-11.
    ['an interval from 2106 on', { intervalId: '2162-12-20:00:00' }],
    // ClickHouse refused a negative sample_start, and the stats projection retried it for ever.
    ['an interval before 1970', { intervalId: '1950-01-01:00:00' }],
  ])('refuses %s (40001), nothing appended', async (_, figures) => {
    const auth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    const res = await post(auth, [{ intervalId: '2031-02-01:11:00', inbound: { rest: { messages: { count: 1 } } } }, { intervalId: '2031-02-01:11:00', ...figures }]);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 40001, statusCode: 400, message: expect.stringContaining('stats record 1') });
    expect((await inject({ url: '/stats?unit=month&start=2031-02&end=9999-12', headers: { authorization: auth } })).json()).toEqual([]);
  });
});

describe('sandbox POST /stats: records a call takes', () => {
  it('at most 1000 records a call (40001, nothing appended): 25,000 in one 2 MiB body were stored in one write, 0.7 s without an answer to any other request', async () => {
    const auth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    const records = (n: number) => Array.from({ length: n }, () => ({ intervalId: '2031-04-01:10:00', inbound: { rest: { messages: { count: 1 } } } }));
    const post = (n: number) => inject({ method: 'POST', url: '/stats', headers: { authorization: auth, 'content-type': 'application/json' }, payload: records(n) });
    const refused = await post(1001);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 40001, message: expect.stringContaining('at most 1000') });
    expect((await post(1000)).statusCode).toBe(201);
    const [record] = (await inject({ url: '/stats?start=2031-04-01:10:00&end=2031-04-01:10:00', headers: { authorization: auth } })).json();
    expect(record.inbound.rest.messages.count).toBe(1000);
  });
});

describe('sandbox POST /stats: fixtures of the future', () => {
  it('are written and let go: 150,000 minutes of the 2040s, each held as an open sample until its time came, made every write of the stats projection throw', async () => {
    // 150 calls of 1000 (the most a call takes).
    const auth = basic((await inject({ method: 'POST', url: '/apps', payload: {} })).json().keys[0].keyStr);
    const minute = (i: number): string => new Date(Date.UTC(2040, 0, 1) + i * 60_000).toISOString().slice(0, 16).replace('T', ':');
    for (let part = 0; part < 150; part++) {
      const fixtures = Array.from({ length: 1000 }, (_, i) => ({ intervalId: minute(part * 1000 + i), inbound: { rest: { messages: { count: 1 } } } }));
      const posted = await inject({ method: 'POST', url: '/stats', headers: { authorization: auth, 'content-type': 'application/json' }, payload: fixtures });
      expect(posted.statusCode).toBe(201);
    }
    const [month] = (await inject({ url: '/stats?unit=month&start=2040-01&end=2040-01-31:23:59', headers: { authorization: auth } })).json();
    expect(month.inbound.rest.messages.count).toBe(31 * 24 * 60);
    // Every app's stats go on.
    expect((await stats()).statusCode).toBe(200);
    // In production mode each call waits until the roller has recomputed the rollups its 1000 minutes
    // fall in (minute, hour, day, month: four INSERT ... SELECT statements in ClickHouse, one after
    // the other, besides the samples' write): 0.3 to 1 s a call where the embedded mode takes 0.06 s.
  }, testServiceMode === 'production' ? 300_000 : 60_000);
});
