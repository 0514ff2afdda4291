// The comet transport (HTTP long polling) on the wire, request by request, in both formats: the
// connect answers CONNECTED, a send's ProtocolMessages are acted on as WebSocket frames (ATTACH,
// MESSAGE with its ACK), a recv waits until the connection sends something, errors go in-band,
// /close and /disconnect are CLOSE and DISCONNECT, and a comet connection is resumed over a
// WebSocket (the transport it left is told it is gone).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CometClient } from '../helpers/comet.js';
import { Actions, RawClient, type Format } from '../helpers/raw-realtime.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let ts: TestService;
let port: number;

beforeAll(async () => {
  ts = await startTestService();
  port = await listening(ts);
});

afterAll(async () => {
  await ts?.close();
  if (ts) removeDir(ts.dataDir);
});

const restPublish = async (channel: string, name: string, data: string): Promise<void> => {
  const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
    method: 'POST',
    headers: { authorization: ts.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name, data }),
  });
  expect(res.status).toBe(201);
};

describe.each<Format>(['json', 'msgpack'])('comet on the wire (%s)', (format) => {
  const connect = async (query: Record<string, string> = {}): Promise<CometClient> => {
    const { client, reply } = await CometClient.connect(port, { key: ts.key, ...query }, format);
    expect(reply.status).toBe(200);
    expect(client).toBeDefined();
    return client!;
  };

  it('connect answers CONNECTED in the asked format, with the connectionKey the transport URLs are named by', async () => {
    const client = await connect();
    expect(client.connected).toMatchObject({ action: Actions.CONNECTED, connectionId: expect.any(String) });
    expect(client.connected.connectionDetails).toMatchObject({ connectionKey: client.key, maxIdleInterval: expect.any(Number), connectionStateTtl: expect.any(Number) });
    const res = await fetch(`http://127.0.0.1:${port}/comet/connect?key=${encodeURIComponent(ts.key)}${format === 'msgpack' ? '&format=msgpack' : ''}`);
    expect(res.headers.get('content-type')).toBe(format === 'msgpack' ? 'application/x-msgpack' : 'application/json');
    // Counted by the comet transports gauge (and among the realtime sockets).
    const metrics = (await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(Number(/^cm_realtime_comet_transports (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
    await client.close();
  });

  it('a send is acted on as frames (ATTACH, then MESSAGE acknowledged), and a waiting recv is answered once a message comes', async () => {
    const client = await connect();
    const channel = uniqueChannel('comet-wire');
    expect((await client.send([{ action: Actions.ATTACH, channel }])).status).toBe(204);
    const attached = await client.recvUntil((m) => m.action === Actions.ATTACHED);
    expect(attached.find((m) => m.action === Actions.ATTACHED), JSON.stringify(attached)).toMatchObject({ channel });

    // A recv waits: nothing is sent to the connection until the publish.
    const waiting = client.recv();
    await restPublish(channel, 'via-rest', 'hello');
    const { status, messages } = await waiting;
    expect(status).toBe(200);
    expect(messages).toEqual([expect.objectContaining({ action: Actions.MESSAGE, channel, messages: [expect.objectContaining({ name: 'via-rest', data: 'hello' })] })]);

    // Two ProtocolMessages in one send: both published, both acknowledged, in msgSerial order.
    await client.send([
      { action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ name: 'a', data: '1' }] },
      { action: Actions.MESSAGE, channel, msgSerial: 1, messages: [{ name: 'b', data: '2' }] },
    ]);
    const got = await client.recvUntil((m) => m.action === Actions.ACK && (m.msgSerial as number) + ((m.count as number) ?? 1) >= 2);
    const acked = got.filter((m) => m.action === Actions.ACK).reduce((n, m) => n + (m.count as number), 0);
    expect(acked).toBe(2);
    await client.close();
  });

  it('errors go in-band: a key naming no transport here gets DISCONNECTED 80017, a body that is not an array fails the connection (80013)', async () => {
    const client = await connect();
    const gone = await CometClient.read(await fetch(client.url('recv', `${client.key.split('!')[0]}!not-a-key`)), format);
    expect(gone.status).toBe(200);
    expect(gone.messages).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 80017 }) })]);

    const sent = await client.send(format === 'json' ? '{"action":0}' : Buffer.from([0x81, 0xa6, ...Buffer.from('action'), 0x00]));
    expect(sent.status).toBe(204);
    const failed = await client.recvUntil((m) => m.action === Actions.ERROR);
    expect(failed.find((m) => m.action === Actions.ERROR)?.error).toMatchObject({ code: 80013, statusCode: 400 });
    // Ended for good: a resume is refused.
    const { client: again } = await CometClient.connect(port, { key: ts.key, resume: client.key }, format);
    expect(again!.connected.error).toMatchObject({ code: 80008 });
    await again!.close();
  });

  it('a connection failed while no recv waits keeps its ERROR for the next recv, made later than the hang-up (1 s), not DISCONNECTED 80017', async () => {
    const client = await connect();
    expect((await client.send(format === 'json' ? '{"action":0}' : Buffer.from([0xc0]))).status).toBe(204);
    // A client on a slow network: its next recv comes 1.5 s later.
    await new Promise((r) => setTimeout(r, 1500));
    const { messages } = await client.recv();
    expect(messages).toEqual([expect.objectContaining({ action: Actions.ERROR, error: expect.objectContaining({ code: 80013 }) })]);
    const after = await client.recv();
    expect(after.messages).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 80017 }) })]);
  });

  it("a recv with another key's secret is refused in-band (ERROR 40101) and the connection goes on", async () => {
    const client = await connect();
    const [keyName] = ts.key.split(':');
    const params = new URLSearchParams({ key: `${keyName}:wrong`, ...(format === 'msgpack' ? { format } : {}) });
    const refused = await CometClient.read(await fetch(`http://127.0.0.1:${port}/comet/${encodeURIComponent(client.key)}/recv?${params}`), format);
    expect(refused.messages).toEqual([expect.objectContaining({ action: Actions.ERROR, error: expect.objectContaining({ code: 40101 }) })]);
    await client.send([{ action: Actions.HEARTBEAT, id: 'still-here' }]);
    const echoed = await client.recvUntil((m) => m.action === Actions.HEARTBEAT && m.id === 'still-here');
    expect(echoed.length).toBeGreaterThan(0);
    await client.close();
  });

  it('/close answers CLOSED and ends the connection; /disconnect leaves it resumable, with its id', async () => {
    const closing = await connect();
    const closed = await closing.close();
    expect(closed.messages).toEqual([expect.objectContaining({ action: Actions.CLOSED })]);
    const { client: afterClose } = await CometClient.connect(port, { key: ts.key, resume: closing.key }, format);
    expect(afterClose!.connected.error).toMatchObject({ code: 80008 });
    await afterClose!.close();

    const leaving = await connect();
    const left = await CometClient.read(await fetch(leaving.url('disconnect')), format);
    expect(left).toEqual({ status: 200, messages: [] });
    const { client: resumed } = await CometClient.connect(port, { key: ts.key, resume: leaving.key }, format);
    expect(resumed!.connected.error).toBeUndefined();
    expect(resumed!.connected.connectionId).toBe(leaving.connected.connectionId);
    await resumed!.close();
  });

  it('a comet connection resumed over a WebSocket keeps its id; the comet transport it left is told it is gone', async () => {
    const client = await connect();
    const waiting = client.recv();
    const ws = await RawClient.connect(port, { key: ts.key, resume: client.key }, format);
    const connected = ws.frames[0];
    expect(connected.connectionId).toBe(client.connected.connectionId);
    expect(connected.error).toBeUndefined();
    // The waiting recv ends with the transport; the next finds none.
    await waiting;
    const after = await client.recv();
    expect(after.messages).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 80017 }) })]);
    ws.ws.close();
  });
});

describe('a comet send (JSON) whose bytes are not UTF-8', () => {
  it('fails the connection (ERROR 80013), as a WebSocket frame that is not UTF-8 is refused: nothing is published with U+FFFD in place of the bytes', async () => {
    const { client } = await CometClient.connect(port, { key: ts.key });
    const channel = uniqueChannel('comet-utf8');
    await client!.send([{ action: Actions.ATTACH, channel }]);
    await client!.recvUntil((m) => m.action === Actions.ATTACHED);
    const text = JSON.stringify([{ action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ name: 'bad', data: 'AB' }] }]);
    const [before, after] = text.split('AB');
    expect((await client!.send(Buffer.concat([Buffer.from(before), Buffer.from([0x41, 0xff, 0xfe, 0x42]), Buffer.from(after)]))).status).toBe(204);
    const got = await client!.recvUntil((m) => m.action === Actions.ERROR || m.action === Actions.ACK);
    expect(got.filter((m) => m.action === Actions.ACK)).toEqual([]);
    expect(got.find((m) => m.action === Actions.ERROR)?.error).toMatchObject({ code: 80013, message: expect.stringMatching(/UTF-8/) });
    const history = await (await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, { headers: { authorization: ts.auth } })).json();
    expect(history).toEqual([]);
  });
});

describe("comet requests with other credentials of the same app (the connection's key and clientId only)", () => {
  it("another key of the app, or a token for another clientId, holding the connectionKey can neither send, recv nor close: ERROR 40102, and the connection goes on", async () => {
    const made = await fetch(`http://127.0.0.1:${port}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: [{}, { capability: '{"*":["subscribe"]}' }] }) });
    expect(made.status).toBe(201);
    const [owner, other] = ((await made.json()) as { keys: { keyName: string; keyStr: string }[] }).keys;
    const token = async (clientId: string): Promise<string> => {
      const res = await fetch(`http://127.0.0.1:${port}/keys/${owner.keyName}/requestToken`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(owner.keyStr).toString('base64')}`, 'content-type': 'application/json' },
        body: JSON.stringify({ keyName: owner.keyName, clientId, timestamp: Date.now() }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { token: string }).token;
    };
    const { client } = await CometClient.connect(port, { access_token: await token('alice') });
    expect(client!.connected.connectionDetails).toMatchObject({ clientId: 'alice' });
    const strangers = [new URLSearchParams({ key: other.keyStr }), new URLSearchParams({ access_token: await token('bob') })];
    for (const query of strangers) {
      const at = (path: string): string => `http://127.0.0.1:${port}/comet/${encodeURIComponent(client!.key)}/${path}?${query}`;
      const refused = [
        await CometClient.read(await fetch(at('send'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ action: Actions.HEARTBEAT, id: 'stranger' }]) }), 'json'),
        await CometClient.read(await fetch(at('recv')), 'json'),
        await CometClient.read(await fetch(at('close')), 'json'),
      ];
      for (const reply of refused) expect(reply.messages).toEqual([expect.objectContaining({ action: Actions.ERROR, error: expect.objectContaining({ code: 40102 }) })]);
    }
    // The owner's own token (another of alice's, as a renewal sends) still acts on it, and nothing the strangers sent arrived.
    const renewed = new URLSearchParams({ access_token: await token('alice') });
    const sent = await fetch(`http://127.0.0.1:${port}/comet/${encodeURIComponent(client!.key)}/send?${renewed}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ action: Actions.HEARTBEAT, id: 'owner' }]) });
    expect(sent.status).toBe(204);
    const echoed = await client!.recvUntil((m) => m.action === Actions.HEARTBEAT && m.id === 'owner');
    expect(echoed.filter((m) => m.id === 'stranger')).toEqual([]);
    await client!.close();
  });
});

describe('a comet recv whose client went away', () => {
  it('settles with nothing taken (it does not wait for ever), and the next recv takes what comes', async () => {
    const { client } = await CometClient.connect(port, { key: ts.key });
    const gone = new AbortController();
    const recv = ts.service.gateway.comet.recv(client!.key, new URLSearchParams({ key: ts.key }), gone.signal);
    // The recv waits (nothing is queued once CONNECTED was taken); its client goes.
    await new Promise((r) => setImmediate(r));
    gone.abort();
    expect(await recv).toEqual({ empty: true });
    await client!.send([{ action: Actions.HEARTBEAT, id: 'after' }]);
    const next = await client!.recvUntil((m) => m.action === Actions.HEARTBEAT && m.id === 'after');
    expect(next.length).toBeGreaterThan(0);
    await client!.close();
  });
});
