// The comet transport's limits, each with its error: a connection whose recvs stop is cut off at
// REALTIME_MAX_BUFFERED_BYTES like a WebSocket client that stops reading (and may resume); a send
// over REALTIME_COMET_MAX_SEND_BYTES is refused (413 40009) and fails the connection; recvs waiting
// past REALTIME_COMET_MAX_PENDING_REQUESTS are refused (429 42910); a connection whose client stops
// polling altogether is dropped, then ends after connectionStateTtl, its members leaving.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CometClient } from '../helpers/comet.js';
import { within } from '../helpers/realtime.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

const services: TestService[] = [];

afterAll(async () => {
  for (const ts of services) {
    await ts.close();
    removeDir(ts.dataDir);
  }
});

async function start(env: Record<string, string>): Promise<{ ts: TestService; port: number }> {
  const ts = await startTestService(env);
  services.push(ts);
  return { ts, port: await listening(ts) };
}

/** Resolves once `check` holds, polling; rejects after `ms` saying what was awaited. */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  await within(
    (async () => {
      while (!(await check())) await new Promise((r) => setTimeout(r, 25));
    })(),
    ms,
    what,
  );
}

describe('comet limits (REALTIME_MAX_BUFFERED_BYTES 64 KiB, REALTIME_COMET_MAX_SEND_BYTES 4 KiB, REALTIME_MAX_FRAME_BYTES 2 KiB)', () => {
  let ts: TestService;
  let port: number;
  beforeAll(async () => {
    ({ ts, port } = await start({ REALTIME_MAX_BUFFERED_BYTES: String(64 * 1024), REALTIME_COMET_MAX_SEND_BYTES: '4096', REALTIME_MAX_FRAME_BYTES: '2048' }));
  });

  const attached = async (channel: string): Promise<CometClient> => {
    const { client } = await CometClient.connect(port, { key: ts.key });
    await client!.send([{ action: Actions.ATTACH, channel }]);
    await client!.recvUntil((m) => m.action === Actions.ATTACHED);
    return client!;
  };

  it('a connection that stops making recvs is cut off (DISCONNECTED 80020 behind what it did not read) and may resume', async () => {
    const channel = uniqueChannel('comet-unread');
    const client = await attached(channel);
    const before = ts.service.gateway.metrics().slowConsumerDisconnects;
    const data = 'x'.repeat(2000);
    // 60 KB a publish: the second goes over the bound, nobody polling.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, {
        method: 'POST',
        headers: { authorization: ts.auth, 'content-type': 'application/json' },
        body: JSON.stringify(Array.from({ length: 30 }, (_, n) => ({ name: `m${i}-${n}`, data }))),
      });
      expect(res.status).toBe(201);
    }
    await until(() => ts.service.gateway.metrics().slowConsumerDisconnects > before, 'the comet connection to be cut off');
    // What was queued, then why it ends; then the transport is gone.
    const { messages } = await client.recv();
    expect(messages.filter((m) => m.action === Actions.MESSAGE).length).toBeGreaterThan(0);
    expect(messages.at(-1)).toMatchObject({ action: Actions.DISCONNECTED, error: { code: 80020, statusCode: 429 } });
    const gone = await client.recv();
    expect(gone.messages).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 80017 }) })]);
    // Dropped, not ended: the same connection resumes.
    const { client: resumed } = await CometClient.connect(port, { key: ts.key, resume: client.key });
    expect(resumed!.connected.connectionId).toBe(client.connected.connectionId);
    expect(resumed!.connected.error).toBeUndefined();
    await resumed!.close();
  });

  it('a send over REALTIME_COMET_MAX_SEND_BYTES is refused unread (413 40009) and the connection fails with that error', async () => {
    const client = await attached(uniqueChannel('comet-huge'));
    const huge = JSON.stringify([{ action: Actions.MESSAGE, channel: 'c', msgSerial: 0, messages: [{ data: 'y'.repeat(8000) }] }]);
    const refused = await client.send(huge);
    expect(refused.status).toBe(413);
    expect(refused.error).toMatchObject({ code: 40009, statusCode: 413 });
    expect(refused.error!.message).toMatch(/4096 bytes/);
    const failed = await client.recvUntil((m) => m.action === Actions.ERROR);
    expect(failed.find((m) => m.action === Actions.ERROR)?.error).toMatchObject({ code: 40009 });
    const { client: again } = await CometClient.connect(port, { key: ts.key, resume: client.key });
    expect(again!.connected.error).toMatchObject({ code: 80008 });
    await again!.close();
  });

  it('a send holding a ProtocolMessage over REALTIME_MAX_FRAME_BYTES (its maxFrameSize) fails the connection (ERROR 40009); none of the body is acted on', async () => {
    const channel = uniqueChannel('comet-wide');
    const client = await attached(channel);
    expect(client.connected.connectionDetails).toMatchObject({ maxFrameSize: 2048 });
    // 3 KB in one ProtocolMessage: within the body's 4 KiB, over a frame's 2 KiB.
    const body = [{ action: Actions.HEARTBEAT, id: 'first' }, { action: Actions.MESSAGE, channel, msgSerial: 0, messages: [{ data: 'w'.repeat(3000) }] }];
    expect((await client.send(body)).status).toBe(204);
    // The ERROR is all it is sent (no HEARTBEAT echoed, no ACK).
    const { messages } = await client.recv();
    expect(messages).toEqual([expect.objectContaining({ action: Actions.ERROR, error: expect.objectContaining({ code: 40009, message: expect.stringMatching(/2048 bytes/) }) })]);
    const history = await (await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, { headers: { authorization: ts.auth } })).json();
    expect(history).toEqual([]);
  });

  it('recvs waiting past REALTIME_COMET_MAX_PENDING_REQUESTS (2) are refused (429 42910); those waiting go on', async () => {
    const channel = uniqueChannel('comet-recvs');
    const client = await attached(channel);
    const first = client.recv();
    const second = client.recv();
    // Both are waiting once the connection counts two: a third is refused at once.
    let third = await client.recv();
    for (let i = 0; i < 50 && third.status !== 429; i++) third = await client.recv();
    expect(third.status).toBe(429);
    expect(third.error).toMatchObject({ code: 42910, statusCode: 429 });
    // The waiting ones are answered as frames come: the first takes the message.
    await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: ts.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'wake' }),
    });
    const answered = await first;
    expect(answered.messages).toEqual([expect.objectContaining({ action: Actions.MESSAGE })]);
    const closed = await client.close();
    expect(closed.messages).toEqual([expect.objectContaining({ action: Actions.CLOSED })]);
    expect((await second).messages).toEqual([]);
  });
});

describe('an idle comet connection (REALTIME_MAX_IDLE_INTERVAL_MS 1 s, REALTIME_CONNECTION_STATE_TTL_MS 1 s)', () => {
  it('whose client stops polling is dropped, then ends after connectionStateTtl: its members leave and a resume is refused (80008)', async () => {
    const { ts, port } = await start({ REALTIME_MAX_IDLE_INTERVAL_MS: '1000', REALTIME_CONNECTION_STATE_TTL_MS: '1000', REALTIME_PRESENCE_DROP_MS: '0' });
    const channel = uniqueChannel('comet-idle');
    const { client } = await CometClient.connect(port, { key: ts.key, clientId: 'idler' });
    await client!.send([{ action: Actions.ATTACH, channel }]);
    await client!.send([{ action: Actions.PRESENCE, channel, msgSerial: 0, presence: [{ action: 2, data: 'here' }] }]);
    await client!.recvUntil((m) => m.action === Actions.ACK);
    const members = async (): Promise<unknown[]> => (await (await fetch(`http://127.0.0.1:${port}/channels/${channel}/presence`, { headers: { authorization: ts.auth } })).json()) as unknown[];
    expect(await members()).toHaveLength(1);
    // No recv from here on: silence past twice the idle interval (and 10 s) drops the transport.
    await until(() => ts.service.gateway.comet.size === 0 && ts.service.gateway.metrics().connections === 0, 'the idle connection to end', 30_000);
    await until(async () => (await members()).length === 0, 'its member to leave');
    const { client: late } = await CometClient.connect(port, { key: ts.key, clientId: 'idler', resume: client!.key });
    expect(late!.connected.error).toMatchObject({ code: 80008 });
    await late!.close();
  }, 45_000);
});

describe('comet: the inbound budget and the flood cool-down (REALTIME_MAX_INBOUND_RATE 20: bursts of 40)', () => {
  it('a comet client flooding is sent away (42911) after its burst; its next connection starts with a tenth of it', async () => {
    const { ts, port } = await start({ REALTIME_MAX_INBOUND_RATE: '20' });
    const heartbeats = (tag: string): { action: number; id: string }[] => Array.from({ length: 100 }, (_, i) => ({ action: Actions.HEARTBEAT, id: `${tag}${i}` }));
    const floodOnce = async (tag: string): Promise<number> => {
      const { client } = await CometClient.connect(port, { key: ts.key });
      await client!.send(heartbeats(tag));
      const got = await client!.recvUntil((m) => m.action === Actions.DISCONNECTED);
      expect(got.find((m) => m.action === Actions.DISCONNECTED)?.error).toMatchObject({ code: 42911 });
      return got.filter((m) => m.action === Actions.HEARTBEAT).length;
    };
    expect(ts.service.gateway.metrics().cooledConnections).toBe(0);
    expect(await floodOnce('a')).toBeGreaterThanOrEqual(40);
    expect(await floodOnce('b')).toBeLessThanOrEqual(8);
    expect(ts.service.gateway.metrics().cooledConnections).toBe(1);
  });
});

describe('comet transports left unpolled (REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS 3)', () => {
  it('an address holding 3 transports with no recv waiting has its next comet connect refused (DISCONNECTED 42910), not the instance filled; a polled one does not count', async () => {
    const { ts, port } = await start({ REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS: '3' });
    const opened: CometClient[] = [];
    for (let i = 0; i < 3; i++) opened.push((await CometClient.connect(port, { key: ts.key })).client!);
    const refused = await CometClient.connect(port, { key: ts.key });
    expect(refused.client).toBeUndefined();
    expect(refused.reply.status).toBe(200);
    expect(refused.reply.messages).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 42910, statusCode: 503 }) })]);
    expect(ts.service.gateway.comet.size).toBe(3);
    // A WebSocket holds its own socket: not counted here.
    const ws = await RawClient.connect(port, { key: ts.key }, 'json');
    expect(ws.frames[0].action).toBe(Actions.CONNECTED);
    ws.ws.close();
    // One of them polls (a recv waits): there is room for another.
    const waiting = new AbortController();
    const polling = opened[0].recv(waiting.signal).catch(() => undefined);
    let next = await CometClient.connect(port, { key: ts.key });
    await until(async () => {
      if (next.client) return true;
      next = await CometClient.connect(port, { key: ts.key });
      return next.client !== undefined;
    }, 'a comet connect to be taken once a transport polls');
    // Closed transports leave the count.
    await next.client!.close();
    for (const c of opened.slice(1)) await c.close();
    const again = await CometClient.connect(port, { key: ts.key });
    expect(again.client).toBeDefined();
    await again.client!.close();
    await opened[0].close();
    await polling;
  });
});

describe('comet sends that may not act on the connection (MAX_INFLIGHT_BODY_BYTES 1 MiB)', () => {
  it("are answered in-band before their body is read: a Content-Length of 1 MiB, never sent, holds none of the service's body budget", async () => {
    const { ts, port } = await start({ MAX_INFLIGHT_BODY_BYTES: String(1024 * 1024) });
    const { client } = await CometClient.connect(port, { key: ts.key });
    const [keyName] = ts.key.split(':');
    /** Headers only, no body: the answer, once it is whole (or what came when the server waits for the body). */
    const headersOnly = (path: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let text = '';
        const done = (): void => {
          clearTimeout(timer);
          socket.destroy();
          resolve(text);
        };
        const timer = setTimeout(done, 3000);
        socket.on('data', (chunk) => {
          text += chunk;
          if (/\r\n\r\n.*\]\n$/s.test(text)) done();
        });
        socket.on('error', reject);
        socket.write(`POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${1024 * 1024}\r\n\r\n`);
      });
    const pathOf = (url: string): string => url.slice(`http://127.0.0.1:${port}`.length);
    // No transport by that key; and the connection's key, with another secret (no credentials of it).
    const [gone, forged] = await Promise.all([
      headersOnly(pathOf(client!.url('send', `${client!.key.split('!')[0]}!not-a-key`))),
      headersOnly(`/comet/${encodeURIComponent(client!.key)}/send?key=${encodeURIComponent(`${keyName}:wrong-secret`)}`),
    ]);
    expect(gone).toMatch(/^HTTP\/1\.1 200/);
    expect(JSON.parse(gone.split('\r\n\r\n')[1])).toEqual([expect.objectContaining({ action: Actions.DISCONNECTED, error: expect.objectContaining({ code: 80017 }) })]);
    expect(JSON.parse(forged.split('\r\n\r\n')[1])).toEqual([expect.objectContaining({ action: Actions.ERROR, error: expect.objectContaining({ code: 40101 }) })]);
    // The budget is whole: a REST publish of 20 KB (a body counted in it) is taken.
    const res = await fetch(`http://127.0.0.1:${port}/channels/${uniqueChannel('comet-budget')}/messages`, {
      method: 'POST',
      headers: { authorization: ts.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'n', data: 'z'.repeat(20_000) }),
    });
    expect(res.status).toBe(201);
    // The connection's own client still sends.
    expect((await client!.send([{ action: Actions.HEARTBEAT, id: 'still' }])).status).toBe(204);
    await client!.close();
  });
});
