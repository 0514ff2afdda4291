// The realtime gateway's limits, each with the error the README's "Resource limits and isolation"
// table gives (issue 11, Connections: "Limits with clear errors"). Raw `ws` clients speak the
// protocol frame by frame (REALTIME-PROTOCOL.md) against a listening service whose limits are
// lowered through the environment.
// Frame and message sizes, inbound budgets, publishes in flight, presence members and SYNCs; the
// limits per connection and of connections: limits-connections.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, closedWithin, RawClient, sleep, type Pm } from '../helpers/raw-realtime.js';
import { clients, connect, errorOf, history, LIMITS, pausable, port, requestToken, ts, useLimitsService } from './limits-service.js';

useLimitsService();

describe('frame and message size', () => {
  it('a frame over REALTIME_MAX_FRAME_BYTES closes the socket with 1009 (message too big); other connections go on', async () => {
    const bystander = await connect();
    const c = await connect();
    c.sendRaw(JSON.stringify({ action: Actions.MESSAGE, channel: 'big', msgSerial: 0, messages: [{ data: 'x'.repeat(70_000) }] }));
    const closed = await closedWithin(c, 5000);
    expect(closed.code).toBe(1009);
    expect((await bystander.publish(uniqueChannel(), [{ data: 'still here' }])).action).toBe(Actions.ACK);
  });

  it.each(['json', 'msgpack'] as const)('a message over MAX_MESSAGE_SIZE gets NACK 40009 (%s); the connection goes on', async (format) => {
    const c = await connect({ key: ts.key }, format);
    const channel = uniqueChannel();
    const nack = await c.publish(channel, [{ name: 'big', data: 'x'.repeat(5000) }]);
    expect(nack).toMatchObject({ action: Actions.NACK, msgSerial: 0, count: 1 });
    expect(errorOf(nack)).toMatchObject({ code: 40009, statusCode: 400 });
    expect(typeof errorOf(nack).message).toBe('string');
    expect(await c.publish(channel, [{ name: 'small', data: 'ok' }])).toMatchObject({ action: Actions.ACK, msgSerial: 1 });
    expect((await history(channel)).map((m) => m.name)).toEqual(['small']);
  });
});

describe('inbound budget per connection (every frame kind, counted before decoding)', () => {
  /** The frames a client sends until the gateway disconnects it; what came back before the close. */
  async function flood(c: RawClient, frame: (i: number) => unknown, n: number): Promise<{ answered: Pm[]; disconnected: Pm }> {
    for (let i = 0; i < n && !c.isClosed; i++) c.send(frame(i));
    const disconnected = await c.next((pm) => pm.action === Actions.DISCONNECTED);
    await closedWithin(c, 5000);
    return { answered: c.frames.filter((f) => f.action !== Actions.CONNECTED && f.action !== Actions.DISCONNECTED), disconnected };
  }

  const kinds: [string, (i: number) => unknown][] = [
    ['HEARTBEAT', (i) => ({ action: Actions.HEARTBEAT, id: `h${i}` })],
    ['DETACH of a channel never attached', (i) => ({ action: Actions.DETACH, channel: `never-${i}` })],
    ['SYNC', (i) => ({ action: Actions.SYNC, channel: `never-${i}` })],
    ['an unknown action', () => ({ action: 99 })],
    ['ATTACH', (i) => ({ action: Actions.ATTACH, channel: `rate-${i % 3}` })],
  ];
  for (const [kind, frame] of kinds) {
    it(`${kind}: past the burst (twice REALTIME_MAX_INBOUND_RATE) the client is disconnected (DISCONNECTED 42911) and the rest is not acted on`, async () => {
      const c = await connect();
      const { answered, disconnected } = await flood(c, frame, 400);
      expect(errorOf(disconnected)).toMatchObject({ code: 42911, statusCode: 429 });
      // The burst is 40 frames; a few more may refill while they arrive, never the 400 sent.
      expect(answered.length).toBeLessThanOrEqual(45);
    });
  }

  it('MESSAGEs past the burst: those admitted are ACKed in order, the client is disconnected 42911, and a resume sends the rest once', async () => {
    const c = await connect();
    const channel = uniqueChannel();
    const n = 100;
    for (let i = 0; i < n; i++) c.send({ action: Actions.MESSAGE, channel, msgSerial: i, messages: [{ data: `m${i}` }] });
    const disconnected = await c.next((pm) => pm.action === Actions.DISCONNECTED);
    expect(errorOf(disconnected)).toMatchObject({ code: 42911, statusCode: 429 });
    await closedWithin(c, 5000);
    // The admitted frames' answers came after the socket went: none, or some, were received.
    const acked = c.frames.filter((f) => f.action === Actions.ACK).reduce((n, a) => n + Number(a.count), 0);
    expect(c.frames.some((f) => f.action === Actions.NACK)).toBe(false);
    const next = 0;
    // The SDK resumes and sends again what was not acknowledged, with the same msgSerials (so the
    // same message ids), at a pace the budget allows: what the gateway published before the
    // disconnect is not published again, what it dropped is published now; each message lands once.
    expect(acked).toBeLessThanOrEqual(45);
    await sleep(1100);
    const connected = c.frames.find((f) => f.action === Actions.CONNECTED)!;
    const resumed = await connect({ key: ts.key, resume: (connected.connectionDetails as { connectionKey: string }).connectionKey });
    expect(resumed.connectionId).toBe(c.connectionId);
    for (let i = next; i < n; i++) {
      const answer = resumed.ackOf(i);
      resumed.send({ action: Actions.MESSAGE, channel, msgSerial: i, messages: [{ data: `m${i}` }] });
      expect((await answer).action).toBe(Actions.ACK);
      if (i % 5 === 4) await sleep(300); // under the rate of 20 a second
    }
    const stored = await history(channel);
    expect(stored.map((m) => m.data).sort()).toEqual(Array.from({ length: n }, (_, i) => `m${i}`).sort());
  });

  it('bytes count too: past twice REALTIME_MAX_INBOUND_BYTES_RATE in a burst the client is disconnected 42911', async () => {
    const c = await connect();
    const { answered, disconnected } = await flood(c, (i) => ({ action: Actions.HEARTBEAT, id: `${i}-${'x'.repeat(30_000)}` }), 30);
    expect(errorOf(disconnected)).toMatchObject({ code: 42911, statusCode: 429 });
    // 20 frames of 30 KB are under the frame rate's burst of 40; the bytes' burst (2 x 256 KiB) holds 17.
    expect(answered.length).toBeLessThan(20);
  });

  it('GET /metrics counts the connections sent away over their budget and the frames refused', async () => {
    const metric = async (name: string): Promise<number> => {
      const text = (await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      return Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    };
    const [sentAway, refused] = [await metric('cm_realtime_inbound_budget_disconnects_total'), await metric('cm_realtime_frames_refused_total')];
    const c = await connect();
    for (let i = 0; i < 100; i++) c.send({ action: Actions.HEARTBEAT });
    await c.next((pm) => pm.action === Actions.DISCONNECTED);
    expect(await metric('cm_realtime_inbound_budget_disconnects_total')).toBe(sentAway + 1);
    expect(await metric('cm_realtime_frames_refused_total')).toBeGreaterThan(refused);
  });

  it('a flooder that reconnects is cooled: its next connection starts with a tenth of the burst and is sent away sooner; a neighbour on the same key and address is not refused, and one at the rate never notices', async () => {
    // A service of its own, with the cool-down (this file's is off).
    const own = await startTestService({ ...LIMITS, REALTIME_FLOOD_COOLDOWN_MS: '30000' });
    const ownPort = await listening(own);
    const connect = async (query: Record<string, string | undefined>): Promise<RawClient> => {
      const c = await RawClient.connect(ownPort, query);
      clients.push(c);
      return c;
    };
    try {
      const ts = own;
      const key = own.key;
      const metric = async (name: string): Promise<number> => Number(new RegExp(`^${name} (\\d+)`, 'm').exec((await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body)?.[1] ?? NaN);
      const heartbeat = (tag: string) => (i: number) => ({ action: Actions.HEARTBEAT, id: `${tag}${i}` });
      const cooled0 = await metric('cm_realtime_cooled_connections_total');

      const first = await flood(await connect({ key }), heartbeat('a'), 400);
      expect(errorOf(first.disconnected)).toMatchObject({ code: 42911 });
      // Its whole burst (40 frames) was admitted.
      expect(first.answered.length).toBeGreaterThanOrEqual(40);
      expect(await metric('cm_realtime_cooled_connections_total')).toBe(cooled0);

      // Reconnecting (a new connection, as a flooder does): connected, with 4 frames of burst.
      const second = await flood(await connect({ key }), heartbeat('b'), 400);
      expect(errorOf(second.disconnected)).toMatchObject({ code: 42911 });
      expect(second.answered.length).toBeLessThanOrEqual(8);
      // A clientId of its own choosing (a key may ask any) does not make it another origin.
      const asking = await flood(await connect({ key, clientId: 'someone-else' }), heartbeat('c'), 400);
      expect(errorOf(asking.disconnected)).toMatchObject({ code: 42911 });
      expect(asking.answered.length).toBeLessThanOrEqual(8);
      expect(await metric('cm_realtime_cooled_connections_total')).toBe(cooled0 + 2);

      // A neighbour on the same key and address: connected, and at the rate never sent away.
      const neighbour = await connect({ key });
      for (let i = 0; i < 15; i++) {
        neighbour.send({ action: Actions.HEARTBEAT, id: `n${i}` });
        await sleep(60);
      }
      await neighbour.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'n14');
      expect(neighbour.frames.some((f) => f.action === Actions.DISCONNECTED)).toBe(false);

      // A token that fixes its clientId is another origin: its whole burst, 30 frames at once.
      const keyName = key.split(':')[0];
      const tokenRes = await ts.service.app.inject({
        method: 'POST',
        url: `/keys/${keyName}/requestToken`,
        headers: { authorization: `Basic ${Buffer.from(key).toString('base64')}`, 'content-type': 'application/json' },
        payload: { keyName, timestamp: Date.now(), clientId: 'fixed-by-token' },
      });
      expect(tokenRes.statusCode).toBe(200);
      const other = await connect({ access_token: tokenRes.json().token as string });
      for (let i = 0; i < 30; i++) other.send({ action: Actions.HEARTBEAT, id: `o${i}` });
      await other.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'o29');
      expect(other.frames.some((f) => f.action === Actions.DISCONNECTED)).toBe(false);
    } finally {
      await own.close();
      removeDir(own.dataDir);
    }
  });

  it('the budget refills: a client at the rate is never disconnected', async () => {
    const c = await connect();
    for (let i = 0; i < 30; i++) {
      c.send({ action: Actions.HEARTBEAT, id: `p${i}` });
      await sleep(60);
    }
    await c.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'p29');
    expect(c.frames.some((f) => f.action === Actions.DISCONNECTED)).toBe(false);
    expect(c.isClosed).toBe(false);
  });
});

describe('publishes in flight per connection', () => {
  let small: TestService;
  let smallPort: number;
  beforeAll(async () => {
    // Frames of 400 KB written at once: far over the inbound bytes budget, which is not what this tests.
    small = await startTestService({ REALTIME_MAX_INFLIGHT_BYTES: '1024', REALTIME_MAX_INBOUND_BYTES_RATE: String(1 << 30) });
    smallPort = await listening(small);
  });
  afterAll(async () => {
    await small?.close();
    if (small) removeDir(small.dataDir);
  });

  it('over REALTIME_MAX_INFLIGHT_BYTES of unanswered publishes, the gateway reads no further frames until answers come back', async () => {
    const c = await RawClient.connect(smallPort, { key: small.key });
    clients.push(c);
    const channel = uniqueChannel();
    const n = 30;
    const answers = Array.from({ length: n }, (_, i) => c.ackOf(i, 20_000));
    // 30 publishes of 400 KB and a HEARTBEAT, written at once: the HEARTBEAT is read (and
    // answered) only once the publishes before it were answered, but for the last, whose frame's
    // end may come in the same read as the HEARTBEAT.
    for (let i = 0; i < n; i++) c.send({ action: Actions.MESSAGE, channel, msgSerial: i, messages: Array.from({ length: 8 }, (_, j) => ({ name: `m${i}-${j}`, data: 'p'.repeat(50_000) })) });
    c.send({ action: Actions.HEARTBEAT, id: 'after' });
    await Promise.all(answers);
    await c.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'after');
    const order = c.frames.filter((f) => f.action === Actions.ACK || (f.action === Actions.HEARTBEAT && f.id === 'after')).map((f) => (f.action === Actions.ACK ? `ack ${f.msgSerial}+${f.count}` : 'heartbeat'));
    expect(order.indexOf('heartbeat'), order.join(', ')).toBeGreaterThanOrEqual(n - 1);
  });
});

describe('publishes in flight, all connections together', () => {
  let small: TestService;
  let smallPort: number;
  beforeAll(async () => {
    // Each connection's own budget small too: a connection paused for its own is read again
    // whatever order the answers come in (it once stayed paused when its last answer came while
    // the total was over).
    small = await startTestService({ REALTIME_MAX_TOTAL_INFLIGHT_BYTES: '1024', REALTIME_MAX_INFLIGHT_BYTES: '1024', REALTIME_MAX_INBOUND_BYTES_RATE: String(1 << 30) });
    smallPort = await listening(small);
  });
  afterAll(async () => {
    await small?.close();
    if (small) removeDir(small.dataDir);
  });

  it('over REALTIME_MAX_TOTAL_INFLIGHT_BYTES, a connection under its own budget is not read until the total is back under; every publish of three connections is answered', async () => {
    const senders = await Promise.all([1, 2, 3].map(() => RawClient.connect(smallPort, { key: small.key })));
    clients.push(...senders);
    const channel = uniqueChannel();
    const n = 20;
    const answers = senders.flatMap((c) => Array.from({ length: n }, (_, i) => c.ackOf(i, 30_000)));
    // The total's 1 KiB holds each HEARTBEAT behind its connection's publishes, and every
    // connection is read again once they are answered.
    for (const c of senders) {
      for (let i = 0; i < n; i++) c.send({ action: Actions.MESSAGE, channel, msgSerial: i, messages: Array.from({ length: 8 }, (_, j) => ({ name: `m${i}-${j}`, data: 'p'.repeat(50_000) })) });
      c.send({ action: Actions.HEARTBEAT, id: 'after' });
    }
    const results = await Promise.all(answers);
    expect(results.every((r) => r.action === Actions.ACK)).toBe(true);
    for (const c of senders) {
      await c.next((pm) => pm.action === Actions.HEARTBEAT && pm.id === 'after');
      const order = c.frames.filter((f) => f.action === Actions.ACK || (f.action === Actions.HEARTBEAT && f.id === 'after')).map((f) => (f.action === Actions.ACK ? `ack ${f.msgSerial}+${f.count}` : 'heartbeat'));
      expect(order.indexOf('heartbeat'), order.join(', ')).toBeGreaterThanOrEqual(n - 1);
    }
  });
});

describe('presence members in the service and per app', () => {
  it('an enter beyond REALTIME_MAX_PRESENCE_MEMBERS_PER_APP or REALTIME_MAX_PRESENCE_MEMBERS gets NACK 91003; another app enters while one app is full; a leave makes room', async () => {
    const t = await startTestService({ REALTIME_MAX_PRESENCE_MEMBERS_PER_APP: '4', REALTIME_MAX_PRESENCE_MEMBERS: '6' });
    try {
      const port = await listening(t);
      expect(t.service.presence.memberCount()).toBe(0);
      const otherKey = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json().keys[0].keyStr as string;
      const a = await RawClient.connect(port, { key: t.key });
      const b = await RawClient.connect(port, { key: otherKey });
      clients.push(a, b);
      const enter = (clientId: string, action = 2): Record<string, unknown> => ({ action, clientId, data: clientId });
      const channel = uniqueChannel();
      // The limits read the presence projection, which applies an ACKed change a moment later.
      const applied = async (n: number): Promise<void> => {
        for (let i = 0; i < 200 && t.service.presence.memberCount() !== n; i++) await sleep(10);
        expect(t.service.presence.memberCount()).toBe(n);
      };
      expect((await a.presence(channel, ['a1', 'a2', 'a3', 'a4'].map((id) => enter(id)))).action).toBe(Actions.ACK);
      await applied(4);
      const appFull = await a.presence(channel, [enter('a5')]);
      expect(appFull.action).toBe(Actions.NACK);
      expect(errorOf(appFull)).toMatchObject({ code: 91003, statusCode: 400, message: expect.stringContaining('this app') });
      // The other app is not refused for the first one's members.
      expect((await b.presence(channel, ['b1', 'b2'].map((id) => enter(id)))).action).toBe(Actions.ACK);
      await applied(6);
      const serviceFull = await b.presence(channel, [enter('b3')]);
      expect(serviceFull.action).toBe(Actions.NACK);
      expect(errorOf(serviceFull)).toMatchObject({ code: 91003, message: expect.stringContaining('the service') });
      // A leave makes room.
      expect((await a.presence(channel, [enter('a1', 3)])).action).toBe(Actions.ACK);
      await applied(5);
      expect((await b.presence(channel, [enter('b3')])).action).toBe(Actions.ACK);
      await applied(6);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});

describe('presence limits under racing enters', () => {
  it('enters sent at once by many connections of one key never pass REALTIME_MAX_PRESENCE_MEMBERS_PER_APP: the ACKs are exactly the room there was', async () => {
    const t = await startTestService({ REALTIME_MAX_PRESENCE_MEMBERS_PER_APP: '50', REALTIME_MAX_PRESENCE_MEMBERS: '1000' });
    try {
      const port = await listening(t);
      const racers = await Promise.all(Array.from({ length: 10 }, () => RawClient.connect(port, { key: t.key })));
      clients.push(...racers);
      const channel = uniqueChannel();
      // Each connection sends its 20 enters without waiting for any answer.
      const answers = racers.flatMap((c, i) => Array.from({ length: 20 }, (_, j) => c.presence(channel, [{ action: 2, clientId: `r${i}-${j}` }])));
      const results = await Promise.all(answers);
      const acked = results.filter((r) => r.action === Actions.ACK).length;
      for (const r of results.filter((r) => r.action === Actions.NACK)) expect(errorOf(r)).toMatchObject({ code: 91003 });
      expect(acked).toBe(50);
      for (let i = 0; i < 200 && t.service.presence.memberCount() < 50; i++) await sleep(10);
      await sleep(100);
      expect(t.service.presence.memberCount()).toBe(50);
      // Applied, the reservations are gone: a leave makes room for exactly one more.
      const [first] = racers;
      const leaving = results.findIndex((r) => r.action === Actions.ACK);
      expect((await racers[Math.floor(leaving / 20)].presence(channel, [{ action: 3, clientId: `r${Math.floor(leaving / 20)}-${leaving % 20}` }])).action).toBe(Actions.ACK);
      for (let i = 0; i < 200 && t.service.presence.memberCount() > 49; i++) await sleep(10);
      expect((await first.presence(channel, [{ action: 2, clientId: 'one-more' }])).action).toBe(Actions.ACK);
      expect((await first.presence(channel, [{ action: 2, clientId: 'one-too-many' }])).action).toBe(Actions.NACK);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});

/** 10,000 members of `bytes` of data each entered on a new channel by one connection (`enterer`) in `frames` PRESENCE frames, and applied. */
async function tenThousandMembers(t: TestService, port: number, frames: number, bytes: number): Promise<{ channel: string; enterer: RawClient }> {
  const enterer = await RawClient.connect(port, { key: t.key });
  clients.push(enterer);
  const channel = uniqueChannel();
  const data = 'm'.repeat(bytes);
  const perFrame = 10_000 / frames;
  const entered = await Promise.all(Array.from({ length: frames }, (_, f) => enterer.presence(channel, Array.from({ length: perFrame }, (_, i) => ({ action: 2, clientId: `c${f}-${i}`, data })))));
  expect(entered.every((a) => a.action === Actions.ACK)).toBe(true);
  for (let i = 0; i < 500 && t.service.presence.memberCount() < 10_000; i++) await sleep(10);
  return { channel, enterer };
}

describe('a large presence set is synced to a client that reads', () => {
  it('SYNC is paced by the socket: 10,000 members of 1 KB reach a prompt reader whole, under a REALTIME_MAX_BUFFERED_BYTES of 64 KiB', async () => {
    const t = await startTestService({ REALTIME_MAX_BUFFERED_BYTES: '65536', REALTIME_MAX_INBOUND_BYTES_RATE: String(1 << 30) });
    try {
      const port = await listening(t);
      const { channel } = await tenThousandMembers(t, port, 20, 1000);
      const reader = await RawClient.connect(port, { key: t.key });
      clients.push(reader);
      reader.send({ action: Actions.ATTACH, channel });
      const last = await reader.next((pm) => pm.action === Actions.SYNC && String(pm.channelSerial).endsWith(':'), 30_000);
      expect(last.channel).toBe(channel);
      const members = reader.frames.filter((f) => f.action === Actions.SYNC).flatMap((f) => f.presence as { clientId: string }[]);
      expect(new Set(members.map((m) => m.clientId)).size).toBe(10_000);
      expect(reader.frames.filter((f) => f.action === Actions.DISCONNECTED)).toEqual([]);
      expect(reader.isClosed).toBe(false);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});

describe('SYNC requests while a SYNC is being sent', () => {
  it('join the SYNC being sent: a reader that stops reading and asks 50 times gets one SYNC of the whole set, and is not cut off', async () => {
    const t = await startTestService({ REALTIME_MAX_INBOUND_BYTES_RATE: String(1 << 30) });
    try {
      const port = await listening(t);
      const { channel, enterer } = await tenThousandMembers(t, port, 40, 2000);
      const reader = await RawClient.connect(port, { key: t.key });
      clients.push(reader);
      // 20 MB of SYNC: the service waits for the socket while the reader reads nothing.
      expect((await reader.attach(channel)).action).toBe(Actions.ATTACHED);
      pausable(reader).pause();
      // Each request used to start the SYNC again, a page sent at once and the set copied each time.
      for (let i = 0; i < 50; i++) reader.send({ action: Actions.SYNC, channel });
      await enterer.ping();
      pausable(reader).resume();
      await reader.next((pm) => pm.action === Actions.SYNC && String(pm.channelSerial).endsWith(':'), 60_000);
      const syncs = reader.frames.filter((f) => f.action === Actions.SYNC);
      const ids = new Set(syncs.map((f) => String(f.channelSerial).split(':')[0]));
      // One, or two should a request be read only after the first SYNC ended (a new one, whole).
      expect(ids.size).toBeLessThanOrEqual(2);
      expect(new Set(syncs.flatMap((f) => (f.presence as { clientId: string }[]).map((m) => m.clientId))).size).toBe(10_000);
      expect(reader.frames.filter((f) => f.action === Actions.DISCONNECTED)).toEqual([]);
      expect(reader.isClosed).toBe(false);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});
