// The official SDK (npm `ably` v2), unmodified, reading usage statistics from the real listening
// service (spec: Retrieve usage statistics; ARCHITECTURE: Compatibility with existing clients), in
// both of its wire formats: sandbox fixtures seeded as the SDK test harnesses seed them, and the
// SDK's own traffic counted exactly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as Ably from 'ably';
import { allPages, rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { basic, removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';

/** The SDK's Stats also carries the record's `unit`, which its typings leave out. */
type SdkStats = Ably.Stats & { unit?: string };

// A controllable clock, later than every fixture below; it only ever moves forwards (the log's
// append clock is monotonic).
let now = Date.UTC(2030, 5, 1, 0, 0, 0);
const clock = { now: () => now };

let ts: TestService;
let port: number;

beforeAll(async () => {
  ts = await startTestService({}, { clock });
  port = await listening(ts);
});

afterAll(async () => {
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

/** Lets usage reports and the projection catch up, then writes the stats. */
async function settle(): Promise<void> {
  await ts.service.usage.flush();
  await new Promise((r) => setImmediate(r));
  await ts.service.stats.flush();
}

/** Moves the clock to a minute boundary at least a few minutes ahead, so each step gets minutes of its own. */
function freshMinute(): number {
  const minute = Math.floor(now / 60_000) * 60_000 + 5 * 60_000;
  now = minute;
  return minute;
}

/** yyyy-mm-dd:hh:mm of a time (UTC). */
const minuteId = (ms: number): string => new Date(ms).toISOString().slice(0, 16).replace('T', ':');

/**
 * The fixtures of ably-js's test/rest/stats.test.js (three consecutive minutes, the last with
 * every section), plus a minute on the next day and one in the next month.
 */
const MINUTES = ['2030-03-13:10:20', '2030-03-13:10:21', '2030-03-13:10:22', '2030-03-14:09:00', '2030-04-02:08:30'];
const FIXTURES = [
  {
    intervalId: MINUTES[0],
    inbound: { realtime: { messages: { count: 50, data: 5000 } } },
    outbound: { realtime: { messages: { count: 20, data: 2000 } } },
    channels: { peak: 15, opened: 5 },
  },
  {
    intervalId: MINUTES[1],
    inbound: { realtime: { messages: { count: 60, data: 6000 } } },
    outbound: { realtime: { messages: { count: 10, data: 1000 } } },
  },
  {
    intervalId: MINUTES[2],
    inbound: { realtime: { messages: { count: 70, data: 7000 } } },
    outbound: { realtime: { messages: { count: 40, data: 4000 } } },
    persisted: { presence: { count: 20, data: 2000 } },
    connections: { tls: { peak: 20, opened: 10 } },
    channels: { peak: 50, opened: 30 },
    apiRequests: { succeeded: 50, failed: 10 },
    tokenRequests: { succeeded: 60, failed: 20 },
  },
  {
    intervalId: MINUTES[3],
    inbound: { rest: { messages: { count: 5, data: 500 } } },
    persisted: { messages: { count: 5, data: 500 } },
  },
  {
    intervalId: MINUTES[4],
    apiRequests: { succeeded: 7, refused: 3 },
    tokenRequests: { refused: 1 },
  },
];

/** Every fixture minute lies in this window. */
const ALL_FIXTURES = { start: Date.UTC(2030, 2, 1), end: Date.UTC(2030, 3, 30, 23, 59, 59) };

describe.each(WIRE_FORMATS)('ably-js v2 Rest client, stats ($format)', ({ useBinaryProtocol }) => {
  /** A fresh sandbox app per format, so every number is exact. */
  let app: { appId: string; key: string };

  const client = (): Ably.Rest =>
    new Ably.Rest({
      key: app.key,
      restHost: '127.0.0.1',
      port,
      tls: false,
      useBinaryProtocol,
      // Quiets the SDK's deprecation warning about restHost (it prefers `endpoint`).
      logLevel: 0,
    });

  const stats = async (params: Ably.StatsParams): Promise<SdkStats[]> => (await client().stats(params)).items;

  beforeAll(async () => {
    freshMinute();
    // As the SDK test harnesses do: POST /apps, then POST /stats with Basic auth and JSON.
    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [{}] }) });
    expect(created.status).toBe(201);
    const body = (await created.json()) as { appId: string; keys: { keyStr: string }[] };
    app = { appId: body.appId, key: body.keys[0].keyStr };
    const seeded = await fetch(`${base}/stats`, {
      method: 'POST',
      headers: { authorization: basic(app.key), 'content-type': 'application/json' },
      body: JSON.stringify(FIXTURES),
    });
    expect(seeded.status).toBe(201);
    await settle();
  });

  describe('sandbox fixtures', () => {
    it('RSC6a, TS: unit minute gives one record per minute, with the flat entries and exact numbers', async () => {
      const records = await stats({ start: Date.UTC(2030, 2, 13, 10, 20), end: Date.UTC(2030, 2, 13, 10, 22, 59), unit: 'minute', direction: 'forwards' });
      expect(records.map((r) => [r.intervalId, r.unit])).toEqual([
        ['2030-03-13:10:20', 'minute'],
        ['2030-03-13:10:21', 'minute'],
        ['2030-03-13:10:22', 'minute'],
      ]);
      for (const r of records) {
        expect(r.appId).toBe(app.appId);
        expect(r.schema).toMatch(/app-stats/);
        expect(r.inProgress).toBeUndefined();
      }
      const [first, second, third] = records.map((r) => r.entries);
      expect(first['messages.inbound.realtime.messages.count']).toBe(50);
      expect(first['messages.inbound.realtime.messages.data']).toBe(5000);
      expect(first['messages.inbound.realtime.all.count']).toBe(50);
      expect(first['messages.outbound.realtime.messages.count']).toBe(20);
      expect(first['messages.all.all.count']).toBe(70);
      expect(first['channels.peak']).toBe(15);
      expect(second['messages.inbound.all.messages.count']).toBe(60);
      expect(second['messages.all.messages.data']).toBe(7000);
      expect(second['channels.peak']).toBeUndefined(); // no channel in that minute

      // The minute with every section, entry by entry (zeros are left out; tls connections count in `all`).
      expect(third).toEqual({
        'messages.inbound.realtime.messages.count': 70,
        'messages.inbound.realtime.messages.data': 7000,
        'messages.inbound.realtime.all.count': 70,
        'messages.inbound.realtime.all.data': 7000,
        'messages.inbound.all.messages.count': 70,
        'messages.inbound.all.messages.data': 7000,
        'messages.inbound.all.all.count': 70,
        'messages.inbound.all.all.data': 7000,
        'messages.outbound.realtime.messages.count': 40,
        'messages.outbound.realtime.messages.data': 4000,
        'messages.outbound.realtime.all.count': 40,
        'messages.outbound.realtime.all.data': 4000,
        'messages.outbound.all.messages.count': 40,
        'messages.outbound.all.messages.data': 4000,
        'messages.outbound.all.all.count': 40,
        'messages.outbound.all.all.data': 4000,
        'messages.persisted.presence.count': 20,
        'messages.persisted.presence.data': 2000,
        'messages.persisted.all.count': 20,
        'messages.persisted.all.data': 2000,
        'messages.all.messages.count': 110,
        'messages.all.messages.data': 11_000,
        'messages.all.presence.count': 20,
        'messages.all.presence.data': 2000,
        'messages.all.all.count': 130,
        'messages.all.all.data': 13_000,
        'channels.peak': 50,
        'channels.min': 0, // 9 of the minute's 10 samples had no channel
        'channels.mean': 5,
        'channels.opened': 30,
        'connections.all.peak': 20,
        'connections.all.min': 0,
        'connections.all.mean': 2,
        'connections.all.opened': 10,
        'apiRequests.all.succeeded': 50,
        'apiRequests.all.failed': 10,
        'apiRequests.tokenRequests.succeeded': 60,
        'apiRequests.tokenRequests.failed': 20,
      });
    });

    it('a message published to a persisted channel counts twice in `all`', async () => {
      const [record] = await stats({ start: Date.UTC(2030, 2, 14, 9), end: Date.UTC(2030, 2, 14, 9, 0, 59), unit: 'minute' });
      expect(record.intervalId).toBe('2030-03-14:09:00');
      expect(record.entries['messages.inbound.rest.messages.count']).toBe(5);
      expect(record.entries['messages.persisted.messages.count']).toBe(5);
      expect(record.entries['messages.all.messages.count']).toBe(10);
      expect(record.entries['messages.all.all.data']).toBe(1000);
    });

    it('RSC6b4: unit hour sums the minutes; channels.peak is the largest sample, not a sum', async () => {
      const records = await stats({ start: Date.UTC(2030, 2, 13, 10), end: Date.UTC(2030, 2, 13, 10, 59, 59), unit: 'hour', direction: 'forwards' });
      expect(records.map((r) => [r.intervalId, r.unit])).toEqual([['2030-03-13:10', 'hour']]);
      const e = records[0].entries;
      expect(e['messages.inbound.realtime.messages.count']).toBe(180);
      expect(e['messages.inbound.realtime.messages.data']).toBe(18_000);
      expect(e['messages.inbound.realtime.all.count']).toBe(180);
      expect(e['messages.outbound.realtime.messages.count']).toBe(70);
      expect(e['messages.all.messages.count']).toBe(250);
      expect(e['messages.all.all.count']).toBe(270);
      expect(e['messages.all.all.data']).toBe(27_000);
      expect(e['channels.peak']).toBe(50);
      expect(e['channels.opened']).toBe(35);
      expect(e['channels.min']).toBe(0);
      expect(e['channels.mean']).toBeCloseTo(65 / 600, 3);
      expect(e['apiRequests.all.succeeded']).toBe(50);
      expect(e['apiRequests.tokenRequests.succeeded']).toBe(60);
    });

    it('RSC6b4: units day and month, with their interval ids', async () => {
      const days = await stats({ start: Date.UTC(2030, 2, 13), end: Date.UTC(2030, 2, 14, 23, 59, 59), unit: 'day', direction: 'forwards' });
      expect(days.map((r) => [r.intervalId, r.unit])).toEqual([
        ['2030-03-13', 'day'],
        ['2030-03-14', 'day'],
      ]);
      expect(days[0].entries['messages.all.all.count']).toBe(270);
      expect(days[0].entries['channels.peak']).toBe(50);
      expect(days[1].entries['messages.all.messages.count']).toBe(10);

      const months = await stats({ ...ALL_FIXTURES, unit: 'month', direction: 'forwards' });
      expect(months.map((r) => [r.intervalId, r.unit])).toEqual([
        ['2030-03', 'month'],
        ['2030-04', 'month'],
      ]);
      expect(months[0].entries['messages.all.all.count']).toBe(280);
      expect(months[0].entries['messages.persisted.all.count']).toBe(25);
      expect(months[0].entries['apiRequests.all.succeeded']).toBe(50);
      expect(months[1].entries).toEqual({
        'apiRequests.all.succeeded': 7,
        'apiRequests.all.refused': 3,
        'apiRequests.tokenRequests.refused': 1,
      });
    });

    it('RSC6b2: the default direction is backwards (newest first)', async () => {
      const records = await stats({ ...ALL_FIXTURES, unit: 'minute' });
      expect(records.map((r) => r.intervalId)).toEqual([...MINUTES].reverse());
    });

    it('RSC6b3: limit 1 pages through every minute exactly once, forwards and backwards', async () => {
      for (const direction of ['forwards', 'backwards'] as const) {
        const first = await client().stats({ ...ALL_FIXTURES, unit: 'minute', limit: 1, direction });
        expect(first.items).toHaveLength(1);
        expect(first.hasNext()).toBe(true);
        expect(first.isLast()).toBe(false);
        const { items, pages } = await allPages<SdkStats>(first);
        expect(pages).toBe(MINUTES.length);
        expect(items.map((r) => r.intervalId)).toEqual(direction === 'forwards' ? MINUTES : [...MINUTES].reverse());
        expect(items.every((r) => r.unit === 'minute' && r.appId === app.appId)).toBe(true);
        // The first page again, from the `first` link.
        const again = await (await first.next())!.first();
        expect(again.items.map((r) => r.intervalId)).toEqual([first.items[0].intervalId]);
      }
    });

    it('limit 2 by hour pages through every hour once', async () => {
      const { items, pages } = await allPages<SdkStats>(await client().stats({ ...ALL_FIXTURES, unit: 'hour', limit: 2, direction: 'forwards' }));
      expect(pages).toBe(2);
      expect(items.map((r) => r.intervalId)).toEqual(['2030-03-13:10', '2030-03-14:09', '2030-04-02:08']);
    });
  });

  describe("the SDK's own traffic", () => {
    it('publishes, history reads, a failed request and a token request count exactly in their minute', async () => {
      const rest = client();
      const minute = freshMinute();
      now = minute + 1000;
      const channel = rest.channels.get(uniqueChannel('sdk-stats'));
      await channel.publish('a', 'abc'); // 3 bytes
      await channel.publish('b', 'héllo'); // 6 bytes of UTF-8
      await channel.publish('c', { a: 1 }); // the SDK sends '{"a":1}' (encoding json): 7 bytes
      now = minute + 7000; // the next 6-second sample of the same minute
      expect((await channel.history()).items).toHaveLength(3); // 3 messages out over REST
      expect((await rejection(channel.history({ limit: 99_999 }))).statusCode).toBe(400); // failed
      // A token request signed by the SDK at the service's time.
      expect(typeof (await rest.auth.requestToken(undefined, { key: app.key, queryTime: true })).token).toBe('string');

      now = minute + 61_000; // the stats() calls below count in the next minute, not this one
      await settle();
      const page = await rest.stats({ start: minute, end: minute + 59_999, unit: 'minute' });
      expect(page.items).toHaveLength(1);
      const [record] = page.items as SdkStats[];
      expect(record.intervalId).toBe(minuteId(minute));
      expect(record.unit).toBe('minute');
      expect(record.inProgress).toBeUndefined();
      expect(record.entries).toEqual({
        'messages.inbound.rest.messages.count': 3,
        'messages.inbound.rest.messages.data': 16,
        'messages.inbound.rest.all.count': 3,
        'messages.inbound.rest.all.data': 16,
        'messages.inbound.all.messages.count': 3,
        'messages.inbound.all.messages.data': 16,
        'messages.inbound.all.all.count': 3,
        'messages.inbound.all.all.data': 16,
        'messages.outbound.rest.messages.count': 3,
        'messages.outbound.rest.messages.data': 16,
        'messages.outbound.rest.all.count': 3,
        'messages.outbound.rest.all.data': 16,
        'messages.outbound.all.messages.count': 3,
        'messages.outbound.all.messages.data': 16,
        'messages.outbound.all.all.count': 3,
        'messages.outbound.all.all.data': 16,
        'messages.all.messages.count': 6,
        'messages.all.messages.data': 32,
        'messages.all.all.count': 6,
        'messages.all.all.data': 32,
        // One channel, active in the first of the minute's ten 6-second samples.
        'channels.peak': 1,
        'channels.min': 0,
        'channels.mean': 0.1,
        'channels.opened': 1,
        // 3 publishes, 1 history read and 1 token request; the refused limit failed.
        'apiRequests.all.succeeded': 5,
        'apiRequests.all.failed': 1,
        'apiRequests.tokenRequests.succeeded': 1,
      });
    });

    it('binary data counts by its bytes in either format (JSON carries it as base64)', async () => {
      const rest = client();
      const minute = freshMinute();
      now = minute + 1000;
      const channel = rest.channels.get(uniqueChannel('sdk-stats-bytes'));
      await channel.publish('bytes', Buffer.alloc(10, 7)); // 10 bytes, not the 16 characters of its base64
      await channel.publish([
        { name: 'more', data: new Uint8Array(5) }, // 5 bytes
        { name: 'text', data: 'xyz' }, // 3 bytes
      ]);
      now = minute + 7000;
      const read = await channel.history();
      expect(Buffer.from(read.items[2].data as Uint8Array).equals(Buffer.alloc(10, 7))).toBe(true);
      now = minute + 61_000;
      await settle();
      const [record] = await stats({ start: minute, end: minute + 59_999, unit: 'minute' });
      expect(record.intervalId).toBe(minuteId(minute));
      expect(record.entries['messages.inbound.rest.messages.count']).toBe(3);
      expect(record.entries['messages.inbound.rest.messages.data']).toBe(18);
      expect(record.entries['messages.outbound.rest.messages.count']).toBe(3);
      expect(record.entries['messages.outbound.rest.messages.data']).toBe(18);
      expect(record.entries['messages.all.all.data']).toBe(36);
      expect(record.entries['apiRequests.all.succeeded']).toBe(3); // 2 publishes, 1 history read
    });

    it('each stats() call is an API request itself, counted in the minute it was made', async () => {
      const rest = client();
      const minute = freshMinute();
      now = minute + 1000;
      const window = { start: minute, end: minute + 59_999, unit: 'minute' as const };
      expect(await stats(window)).toEqual([]); // nothing yet: this very call counts only once settled
      for (const expected of [1, 2, 3]) {
        await settle();
        const [record] = (await rest.stats(window)).items as SdkStats[];
        expect(record.intervalId).toBe(minuteId(minute));
        expect(record.entries).toEqual({ 'apiRequests.all.succeeded': expected });
        // The minute is still going: the record says which 6-second sample it has got to.
        expect(record.inProgress).toBe(`${minuteId(minute)}:00`);
      }
    });
  });
});

describe('ably-js v2 Rest client, the right to read stats (RSC6)', () => {
  const withCapability = async (capability: string): Promise<Ably.Rest> => {
    const created = await fetch(`http://127.0.0.1:${port}/apps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ keys: [{ capability }] }),
    });
    const key = ((await created.json()) as { keys: { keyStr: string }[] }).keys[0].keyStr;
    return new Ably.Rest({ key, restHost: '127.0.0.1', port, tls: false, logLevel: 0 });
  };

  it('a key with "*" on one channel only is refused stats with 40160 (401)', async () => {
    const err = await rejection((await withCapability('{"mine":["*"]}')).stats({}));
    expect(err).toMatchObject({ code: 40160, statusCode: 401 });
  });

  it('a key with "stats" on "*" reads stats', async () => {
    const page = await (await withCapability('{"*":["stats"]}')).stats({});
    expect(page.items).toEqual(expect.any(Array));
  });
});
