// The realtime gateway's limits per connection and of connections (channels, members, credentials,
// frames, timeouts, connections per instance), each with the error the README's "Resource limits
// and isolation" table gives; a client that does not read: limits-slow-reader.test.ts; the rest:
// limits.test.ts.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect as tcpConnect } from 'node:net';
import { encode as encodeMsgpack } from '@msgpack/msgpack';
import { listening, removeDir, serialAhead, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, closedWithin, nested, RawClient, sleep, type Pm } from '../helpers/raw-realtime.js';
import { clients, connect, errorOf, history, open, pausable, port, requestToken, ts, useLimitsService } from './limits-service.js';

useLimitsService();

/** Sends a frame as written, its SERIAL the connection's next msgSerial, and resolves with the ACK or NACK of it. */
function answerTo(c: RawClient, pm: string): Promise<Pm> {
  const msgSerial = c.nextSerial();
  const answer = c.ackOf(msgSerial);
  c.sendRaw(pm.replace('SERIAL', String(msgSerial)));
  return answer;
}

describe('channels per connection', () => {
  it('an ATTACH beyond REALTIME_MAX_CHANNELS_PER_CONNECTION gets a channel ERROR 90010; after a DETACH there is room again', async () => {
    const c = await connect();
    const names = [1, 2, 3, 4].map(() => uniqueChannel());
    for (const name of names.slice(0, 3)) expect((await c.attach(name)).action).toBe(Actions.ATTACHED);
    const refused = await c.attach(names[3]);
    expect(refused).toMatchObject({ action: Actions.ERROR, channel: names[3] });
    expect(errorOf(refused)).toMatchObject({ code: 90010, statusCode: 400 });
    // Attaching a channel already attached is no new channel.
    expect((await c.attach(names[0])).action).toBe(Actions.ATTACHED);
    c.send({ action: Actions.DETACH, channel: names[1] });
    await c.next((pm) => pm.action === Actions.DETACHED && pm.channel === names[1]);
    expect((await c.attach(names[3])).action).toBe(Actions.ATTACHED);
    // A channel error is not a connection error.
    await c.ping();
  });

  it('ATTACHes sent at once, each waiting on the log (a channelSerial ahead of delivery), still attach at most REALTIME_MAX_CHANNELS_PER_CONNECTION channels', async () => {
    const c = await connect();
    const names = Array.from({ length: 8 }, () => uniqueChannel());
    // A position far ahead on each channel's own partition makes each attach ask the log its end first.
    const serials = await Promise.all(names.map((channel) => serialAhead(ts, channel)));
    names.forEach((channel, i) => c.send({ action: Actions.ATTACH, channel, channelSerial: serials[i] }));
    const answers = await Promise.all(names.map((channel) => c.next((pm) => pm.channel === channel && (pm.action === Actions.ATTACHED || pm.action === Actions.ERROR))));
    expect(answers.filter((pm) => pm.action === Actions.ATTACHED)).toHaveLength(3);
    for (const refused of answers.filter((pm) => pm.action === Actions.ERROR)) expect(errorOf(refused)).toMatchObject({ code: 90010 });
    await c.ping();
  });
});

describe('presence members per connection', () => {
  let small: TestService;
  let smallPort: number;
  beforeAll(async () => {
    small = await startTestService({ REALTIME_MAX_MEMBERS_PER_CONNECTION: '5', REALTIME_MAX_CHANNELS_PER_CONNECTION: '2' });
    smallPort = await listening(small);
  });
  afterAll(async () => {
    await small?.close();
    if (small) removeDir(small.dataDir);
  });

  const enter = (clientId: string, action = 2): Record<string, unknown> => ({ action, clientId, data: clientId });

  it('an enter beyond REALTIME_MAX_MEMBERS_PER_CONNECTION gets NACK 91003; updates, leaves and a DETACH make room as they should', async () => {
    const c = await RawClient.connect(smallPort, { key: small.key });
    clients.push(c);
    const [one, two] = [uniqueChannel(), uniqueChannel()];
    expect((await c.presence(one, ['a', 'b', 'c'].map((id) => enter(id)))).action).toBe(Actions.ACK);
    expect((await c.presence(two, ['d', 'e'].map((id) => enter(id)))).action).toBe(Actions.ACK);
    const over = await c.presence(one, [enter('f')]);
    expect(over.action).toBe(Actions.NACK);
    expect(errorOf(over)).toMatchObject({ code: 91003, statusCode: 400 });
    // Entering again, or updating, a member it holds adds none.
    expect((await c.presence(one, [enter('a'), enter('b', 4)])).action).toBe(Actions.ACK);
    expect((await c.presence(one, [enter('c', 3)])).action).toBe(Actions.ACK);
    expect((await c.presence(one, [enter('f')])).action).toBe(Actions.ACK);
    // A DETACH makes its members there leave: room for two more.
    c.send({ action: Actions.DETACH, channel: two });
    await c.next((pm) => pm.action === Actions.DETACHED && pm.channel === two);
    expect((await c.presence(one, [enter('g'), enter('h')])).action).toBe(Actions.ACK);
    // Members on a third channel: over REALTIME_MAX_CHANNELS_PER_CONNECTION channels with members.
    expect((await c.presence(two, [enter('i', 3)])).action).toBe(Actions.ACK);
    const res = await small.service.app.inject({ method: 'GET', url: `/channels/${one}/presence`, headers: { authorization: small.auth } });
    expect((res.json() as { clientId: string }[]).map((m) => m.clientId).sort()).toEqual(['a', 'b', 'f', 'g', 'h']);
  });

  it('members on more channels than REALTIME_MAX_CHANNELS_PER_CONNECTION get NACK 90010', async () => {
    const c = await RawClient.connect(smallPort, { key: small.key });
    clients.push(c);
    const names = [uniqueChannel(), uniqueChannel(), uniqueChannel()];
    expect((await c.presence(names[0], [enter('a')])).action).toBe(Actions.ACK);
    expect((await c.presence(names[1], [enter('a')])).action).toBe(Actions.ACK);
    const over = await c.presence(names[2], [enter('a')]);
    expect(over.action).toBe(Actions.NACK);
    expect(errorOf(over)).toMatchObject({ code: 90010, statusCode: 400 });
    expect((await c.presence(names[0], [enter('a', 3)])).action).toBe(Actions.ACK);
    expect((await c.presence(names[2], [enter('a')])).action).toBe(Actions.ACK);
  });
});

describe('credentials', () => {
  it('a wrong secret gets ERROR 40101 and the socket is closed', async () => {
    const c = await open({ key: `${ts.key.split(':')[0]}:wrong-secret` });
    const error = await c.next(() => true);
    expect(error).toMatchObject({ action: Actions.ERROR });
    expect(error.channel).toBeUndefined();
    expect(errorOf(error)).toMatchObject({ code: 40101, statusCode: 401 });
    await closedWithin(c, 5000);
  });

  it('a key of an unknown app gets ERROR 40400 and the socket is closed', async () => {
    const c = await open({ key: 'nosuchapp.nosuchkey:secret' });
    expect(errorOf(await c.next(() => true))).toMatchObject({ code: 40400, statusCode: 404 });
    await closedWithin(c, 5000);
  });

  it('no credentials get ERROR 40106 and the socket is closed', async () => {
    const c = await open({});
    const error = await c.next(() => true);
    expect(error.action).toBe(Actions.ERROR);
    expect(errorOf(error)).toMatchObject({ code: 40106, statusCode: 401 });
    await closedWithin(c, 5000);
  });

  it('a token that is not one gets an error in-band, never a refused upgrade', async () => {
    const c = await open({ access_token: 'not-a-token' });
    const answer = await c.next(() => true);
    expect([Actions.ERROR, Actions.DISCONNECTED]).toContain(answer.action);
    expect(Number(errorOf(answer).code)).toBeGreaterThanOrEqual(40100);
    expect(Number(errorOf(answer).code)).toBeLessThan(40200);
    await closedWithin(c, 5000);
  });

  it('a token that expires while connected gets DISCONNECTED 40142 and the socket is closed', async () => {
    const token = await requestToken({ ttl: 1500 });
    const c = await connect({ access_token: token });
    const disconnected = await c.next((pm) => pm.action === Actions.DISCONNECTED, 5000);
    expect(disconnected.channel).toBeUndefined();
    expect(errorOf(disconnected)).toMatchObject({ code: 40142, statusCode: 401 });
    await closedWithin(c, 5000);
  });

  it('a client that does not read the DISCONNECTED 40142 and goes on publishing on that socket publishes nothing', async () => {
    const token = await requestToken({ ttl: 1500 });
    const c = await connect({ access_token: token });
    const socket = pausable(c);
    socket.pause(); // the client never sees the DISCONNECTED nor the close, and keeps writing
    await sleep(2500);
    const channel = uniqueChannel();
    c.send({ action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ name: 'after-expiry' }] });
    await sleep(500);
    expect(await history(channel)).toEqual([]);
    socket.resume();
    expect(errorOf(await c.next((pm) => pm.action === Actions.DISCONNECTED))).toMatchObject({ code: 40142 });
    expect(c.frames.filter((f) => f.action === Actions.ACK || f.action === Actions.NACK)).toEqual([]);
    await closedWithin(c, 5000);
  });

  it('a token already expired at connect gets DISCONNECTED with a token error (40140-40149) and the socket is closed', async () => {
    const token = await requestToken({ ttl: 1000 });
    await sleep(1100);
    const c = await open({ access_token: token });
    const answer = await c.next(() => true);
    expect(answer.action).toBe(Actions.DISCONNECTED);
    expect(errorOf(answer).statusCode).toBe(401);
    expect(Number(errorOf(answer).code)).toBeGreaterThanOrEqual(40140);
    expect(Number(errorOf(answer).code)).toBeLessThan(40150);
    await closedWithin(c, 5000);
  });
});

describe('a connection that is over stays over', () => {
  it('a MESSAGE right behind a frame that ends the connection (ERROR) is not published', async () => {
    const c = await connect();
    const channel = uniqueChannel();
    c.sendRaw('{"action":15,');
    c.send({ action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ name: 'after-error' }] });
    await c.next((pm) => pm.action === Actions.ERROR);
    await closedWithin(c, 5000);
    await sleep(200);
    expect(await history(channel)).toEqual([]);
  });

  it('a MESSAGE right behind CLOSE is not published', async () => {
    const c = await connect();
    const channel = uniqueChannel();
    c.send({ action: Actions.CLOSE });
    c.send({ action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ name: 'after-close' }] });
    await c.next((pm) => pm.action === Actions.CLOSED);
    await closedWithin(c, 5000);
    await sleep(200);
    expect(await history(channel)).toEqual([]);
  });
});

describe('frames that are not what the protocol says', () => {
  // OBJECT (19) and ANNOTATION (21) without a msgSerial: with one they are NACKed (unserved-actions.test.ts).
  it('unknown actions and actions only the server sends are ignored; the connection goes on', async () => {
    const c = await connect();
    for (const action of [3, 4, 6, 8, 9, 11, 13, 18, 19, 20, 21, 99, -1, 2 ** 40]) c.send({ action });
    await c.ping();
    expect(c.frames.filter((f) => f.action === Actions.ERROR || f.action === Actions.DISCONNECTED)).toEqual([]);
    expect(c.isClosed).toBe(false);
  });

  const bad: [string, 'json' | 'msgpack', string | Buffer, boolean][] = [
    ['JSON that does not parse', 'json', '{"action":15,', false],
    ['a JSON array', 'json', '[1,2]', false],
    ['a JSON number', 'json', '15', false],
    ['an object without an action', 'json', '{"channel":"x"}', false],
    ['a string action', 'json', '{"action":"15"}', false],
    ['a fractional action', 'json', '{"action":1.5}', false],
    ['JSON in a binary frame, not UTF-8', 'json', Buffer.from([0x7b, 0x22, 0x61, 0x63, 0x74, 0x69, 0x6f, 0x6e, 0x22, 0x3a, 0x30, 0x2c, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), true],
    ['MessagePack that does not decode', 'msgpack', Buffer.from([0xc1, 0x00, 0x01]), true],
    ['truncated MessagePack', 'msgpack', Buffer.from(encodeMsgpack({ action: 15, channel: 'x', msgSerial: 0 })).subarray(0, 9), true],
    ['MessagePack in a text frame', 'msgpack', '{"action":0}', false],
    ['MessagePack with a string that is not UTF-8', 'msgpack', Buffer.from([0x82, 0xa6, ...Buffer.from('action'), 0x00, 0xa2, ...Buffer.from('id'), 0xa2, 0xff, 0xfe]), true],
    ['a MessagePack map with a map for a key', 'msgpack', Buffer.from([0x81, 0x80, 0x00]), true],
    ['a MESSAGE without a msgSerial', 'json', '{"action":15,"channel":"x","messages":[{"data":"d"}]}', false],
    // Refused on their bytes, before decoding (REALTIME_MAX_FRAME_DEPTH, REALTIME_MAX_FRAME_WIDTH).
    ['JSON nested 30,000 deep', 'json', `{"action":0,"id":${'['.repeat(30_000)}${']'.repeat(30_000)}}`, false],
    ['MessagePack nested 60,000 deep', 'msgpack', Buffer.concat([Buffer.from([0x82, 0xa6, ...Buffer.from('action'), 0x00, 0xa2, ...Buffer.from('id')]), Buffer.alloc(60_000, 0x91), Buffer.from([0x00])]), true],
    ['a JSON HEARTBEAT whose id is an array of 12,000 items', 'json', JSON.stringify({ action: 0, id: Array.from({ length: 12_000 }, () => 0) }), false],
    ['a MessagePack HEARTBEAT of 11,000 keys', 'msgpack', Buffer.from(encodeMsgpack({ action: 0, ...Object.fromEntries(Array.from({ length: 11_000 }, (_, i) => [i.toString(36), 0])) })), true],
    ['a MessagePack array of 15,000 items', 'msgpack', Buffer.from(encodeMsgpack({ action: 0, id: Array.from({ length: 15_000 }, () => 0) })), true],
    // Nothing to answer on but the connection.
    ['an ATTACH with no channel', 'json', '{"action":10}', false],
    ['an ATTACH whose channel is not a string', 'msgpack', Buffer.from(encodeMsgpack({ action: 10, channel: 5 })), true],
    ['a DETACH with no channel', 'json', '{"action":12}', false],
    ['a SYNC whose channel is an object', 'json', '{"action":16,"channel":{}}', false],
  ];

  // 80013: "the connection received something it could not interpret as a valid protocol message".
  it.each(bad)('%s: a connection ERROR 80013, then the socket is closed; other connections go on', async (_name, format, frame, binary) => {
    const bystander = await connect();
    const c = await connect({ key: ts.key }, format);
    c.sendRaw(frame, binary);
    const error = await c.next((pm) => pm.action === Actions.ERROR);
    expect(error.channel).toBeUndefined();
    const e = errorOf(error);
    expect(typeof e.message).toBe('string');
    expect(e).toMatchObject({ code: 80013, statusCode: 400 });
    await closedWithin(c, 5000);
    expect(c.undecodable).toEqual([]);
    await bystander.ping();
  });

  it('data nested deeper than MAX_DATA_DEPTH but within REALTIME_MAX_FRAME_DEPTH gets NACK 40013; the connection goes on', async () => {
    const c = await connect();
    const nack = await c.publish(uniqueChannel(), [{ data: nested(36) }]);
    expect(nack.action).toBe(Actions.NACK);
    expect(errorOf(nack)).toMatchObject({ code: 40013 });
    await c.ping();
  });

  // A lone surrogate has no UTF-8 form: stored, it would come back as bytes that are not UTF-8.
  // (MessagePack cannot carry one as text: its UTF-8 check refuses the frame, 80013 above.)
  it('a lone surrogate in a MESSAGE or PRESENCE (a JSON escape) gets NACK 40001 and nothing is stored; an escaped pair is fine', async () => {
    const c = await connect();
    const channel = uniqueChannel();
    const raw = (pm: string): Promise<Pm> => answerTo(c, pm);
    expect(errorOf(await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"n","data":"a\\ud800b"}]}`))).toMatchObject({ code: 40001, statusCode: 400 });
    expect(errorOf(await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"n","data":{"\\udfff":1}}]}`))).toMatchObject({ code: 40001 });
    expect(errorOf(await raw(`{"action":14,"channel":"${channel}","msgSerial":SERIAL,"presence":[{"action":2,"clientId":"x\\udc00","data":"d"}]}`))).toMatchObject({ code: 40001 });
    expect((await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"pair","data":"\\ud83d\\ude00 and \\\\ud800"}]}`)).action).toBe(Actions.ACK);
    expect(await history(channel)).toMatchObject([{ name: 'pair', data: '\u{1F600} and \\ud800' }]);
  });

  // JSON.parse makes "__proto__" an own key; the log's MessagePack decoder refuses it, so a record
  // holding one could never be read back (history answered 500, the audit replay stopped on it).
  it('a "__proto__" key in a MESSAGE or PRESENCE (plain or \\u-escaped; in extras.push, data, presence data) gets NACK 40001 and nothing is stored; as a value it is fine', async () => {
    const c = await connect();
    const channel = uniqueChannel();
    const raw = (pm: string): Promise<Pm> => answerTo(c, pm);
    expect(errorOf(await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"n","data":"d","extras":{"push":{"__proto__":{"x":1}}}}]}`))).toMatchObject({ code: 40001, statusCode: 400 });
    expect(errorOf(await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"n","data":{"a":[{"\\u005f_proto__":1}]}}]}`))).toMatchObject({ code: 40001 });
    expect(errorOf(await raw(`{"action":14,"channel":"${channel}","msgSerial":SERIAL,"presence":[{"action":2,"clientId":"x","data":{"__proto__":null}}]}`))).toMatchObject({ code: 40001 });
    expect((await raw(`{"action":15,"channel":"${channel}","msgSerial":SERIAL,"messages":[{"name":"__proto__","data":{"k":"__proto__"}}]}`)).action).toBe(Actions.ACK);
    expect(await history(channel)).toMatchObject([{ name: '__proto__', data: { k: '__proto__' } }]);
  });

  it('a HEARTBEAT id that is not a string is echoed as one or refused, never taking the service down', async () => {
    const c = await connect();
    c.sendRaw('{"action":0,"id":{"toString":1}}');
    c.sendRaw(`{"action":0,"id":${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
    const other = await connect();
    await other.ping();
    expect(c.undecodable).toEqual([]);
  });
});

describe('handshake and idle timeouts', () => {
  it('an upgrade request whose headers never end is answered 408 after the headers timeout (REQUEST_TIMEOUT_MS)', async () => {
    const socket = tcpConnect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`GET /?key=${encodeURIComponent(ts.key)}&format=json HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`);
    const closed = await Promise.race([new Promise((resolve) => socket.once('close', () => resolve(true))), sleep(8000).then(() => false)]);
    socket.destroy();
    expect(closed).toBe(true);
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a silent gateway sends HEARTBEAT at least every REALTIME_MAX_IDLE_INTERVAL_MS (heartbeats=true)', async () => {
    const c = await connect();
    const since = c.frames.length;
    await sleep(2600);
    expect(c.frames.slice(since).filter((f) => f.action === Actions.HEARTBEAT).length).toBeGreaterThanOrEqual(1);
    expect(c.connectionId.length).toBeGreaterThan(0);
  });

  it('a client that stops answering (no frames, no pongs) is closed after 2 × maxIdleInterval + 10 s', { timeout: 40_000 }, async () => {
    const c = await connect();
    const socket = pausable(c);
    socket.pause();
    const before = ts.service.gateway.connectionCount;
    const deadline = Date.now() + 25_000;
    while (ts.service.gateway.connectionCount >= before && Date.now() < deadline) await sleep(250);
    expect(ts.service.gateway.connectionCount).toBeLessThan(before);
    socket.resume();
    await closedWithin(c, 5000);
  });
});

describe('connections per instance', () => {
  let small: TestService;
  let smallPort: number;
  beforeAll(async () => {
    small = await startTestService({ REALTIME_MAX_CONNECTIONS: '3' });
    smallPort = await listening(small);
  });
  afterAll(async () => {
    await small?.close();
    if (small) removeDir(small.dataDir);
  });

  it('a connection over REALTIME_MAX_CONNECTIONS gets DISCONNECTED 42910 and is closed; once one leaves, there is room', async () => {
    const held = await Promise.all([1, 2, 3].map(() => RawClient.connect(smallPort, { key: small.key })));
    clients.push(...held);
    const over = await RawClient.open(smallPort, { key: small.key });
    clients.push(over);
    const answer = await over.next(() => true);
    expect(answer.action).toBe(Actions.DISCONNECTED);
    expect(errorOf(answer).code).toBe(42910);
    expect(typeof errorOf(answer).statusCode).toBe('number');
    await closedWithin(over, 5000);
    // The held ones still work.
    for (const c of held) await c.ping();
    held[0].send({ action: Actions.CLOSE });
    await closedWithin(held[0], 5000);
    const deadline = Date.now() + 5000;
    while (small.service.gateway.connectionCount > 2 && Date.now() < deadline) await sleep(50);
    const again = await RawClient.connect(smallPort, { key: small.key });
    clients.push(again);
    await again.ping();
    for (const c of [...held, again]) c.close();
  });

  it('realtime sockets do not count against MAX_CONNECTIONS (open HTTP connections): with 3 allowed, 5 WebSocket connections and 3 HTTP ones are served, a 4th HTTP one is closed', async () => {
    const t = await startTestService({ MAX_CONNECTIONS: '3' });
    try {
      const port = await listening(t);
      const sockets = await Promise.all([1, 2, 3, 4, 5].map(() => RawClient.connect(port, { key: t.key })));
      clients.push(...sockets);
      for (const c of sockets) await c.ping();
      // Keep-alive HTTP connections, each held open by its own agent.
      const agents = [1, 2, 3, 4].map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
      const get = (agent: http.Agent): Promise<number> =>
        new Promise((resolve, reject) => {
          const req = http.get({ host: '127.0.0.1', port, path: '/time', agent }, (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode ?? 0));
          });
          req.once('error', reject);
        });
      for (const agent of agents.slice(0, 3)) expect(await get(agent)).toBe(200);
      await expect(get(agents[3])).rejects.toThrow(/socket hang up|ECONNRESET/);
      // One HTTP connection closed: room for another.
      agents[0].destroy();
      await sleep(100);
      expect(await get(agents[3])).toBe(200);
      for (const agent of agents) agent.destroy();
      for (const c of sockets) c.close();
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('an upgrade the gateway refuses (another path) is answered 404 and its socket closed by the service, even when the client never closes its end', async () => {
    const t = await startTestService({ MAX_CONNECTIONS: '5' });
    try {
      const port = await listening(t);
      const sockets = Array.from({ length: 20 }, () => {
        const socket = tcpConnect({ port, host: '127.0.0.1', allowHalfOpen: true });
        let answer = '';
        // The service's end of the socket closing (its FIN): the client here never closes its own.
        const closed = new Promise<string>((resolve) => socket.once('end', () => resolve(answer)).once('close', () => resolve(answer)));
        socket.on('data', (d: Buffer) => (answer += d.toString()));
        socket.on('error', () => undefined);
        socket.write('GET /nope HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
        return closed;
      });
      const answers = await Promise.all(sockets.map((closed) => Promise.race([closed, sleep(5000).then(() => 'still open')])));
      // Each was answered 404 and closed, or (over MAX_CONNECTIONS while others were open) closed at once.
      for (const answer of answers) expect(answer === '' || answer.startsWith('HTTP/1.1 404'), answer).toBe(true);
      expect(answers.filter((a) => a.startsWith('HTTP/1.1 404')).length).toBeGreaterThanOrEqual(5);
      const time = await t.service.app.inject({ url: '/time' });
      expect(time.statusCode).toBe(200);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('connections waiting for a resume are bounded too: past REALTIME_MAX_CONNECTIONS of them, the one dropped longest ago is forgotten and its members leave', async () => {
    const channel = uniqueChannel();
    const members = async (): Promise<string[]> => {
      const res = await small.service.app.inject({ method: 'GET', url: `/channels/${channel}/presence`, headers: { authorization: small.auth } });
      return (res.json() as { clientId: string }[]).map((m) => m.clientId);
    };
    const first = await RawClient.connect(smallPort, { key: small.key, clientId: 'dropped-first' });
    expect((await first.presence(channel, [{ action: 2, data: 'here' }])).action).toBe(Actions.ACK);
    first.close(); // dropped without CLOSE: resumable, its member stays for REALTIME_PRESENCE_DROP_MS (a minute)
    await closedWithin(first, 5000);
    const deadline = Date.now() + 5000;
    while (!(await members()).includes('dropped-first') && Date.now() < deadline) await sleep(50);
    expect(await members()).toEqual(['dropped-first']);
    // Three more open and drop: four waiting, one too many.
    for (let i = 0; i < 3; i++) {
      const c = await RawClient.connect(smallPort, { key: small.key });
      c.close();
      await closedWithin(c, 5000);
    }
    const gone = Date.now() + 5000;
    while ((await members()).length > 0 && Date.now() < gone) await sleep(50);
    expect(await members()).toEqual([]);
  });
});
