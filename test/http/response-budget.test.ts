import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listening, onMockBroker, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

// Large replies that their clients do not read are bounded all together (MAX_INFLIGHT_RESPONSE_BYTES):
// Node keeps a reply's bytes until the client reads them, with no time limit, so 30 connections
// that asked for a 60 MB page of history and read nothing held 1.8 GB for as long as they stayed
// open (review finding). A real listener, so that the bytes wait on real sockets.

const MiB = 1024 * 1024;
let t: TestService;
let port: number;
const channel = uniqueChannel('large-pages');
// The page (16 MiB of one channel, so of one partition) is more than librdkafka's mock broker keeps
// of a partition (5 MiB: it deletes the oldest records, read or not), so in production mode on
// the mock the history projection never gets them (lost: README, Records the log deleted before
// they were applied) and there is no page to send. A Kafka cluster keeps them: the file runs
// there, and in the embedded mode.
const tooLargeForTheLog = await onMockBroker();

beforeAll(async () => {
  if (tooLargeForTheLog) return;
  t = await startTestService({
    MAX_INFLIGHT_RESPONSE_BYTES: String(64 * MiB),
    MAX_MESSAGE_SIZE: String(2 * MiB),
    MAX_PUBLISH_BYTES: String(9 * MiB),
    MAX_BODY_BYTES: String(10 * MiB),
  });
  port = await listening(t);
  // A page of 16 MB: more than the loopback socket buffers take from a client that reads nothing.
  const data = 'x'.repeat(MiB);
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      body: JSON.stringify(Array.from({ length: 8 }, () => ({ data }))),
    });
    expect(res.status).toBe(201);
  }
});
afterAll(() => t?.close());

const page = () => fetch(`http://127.0.0.1:${port}/channels/${channel}/messages?limit=100`, { headers: { authorization: t.auth } });

/** A client that asks for the page and reads nothing; resolves once the service has sent it its reply's first bytes. */
const nonReader = (): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', reject);
    socket.write(`GET /channels/${channel}/messages?limit=100 HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.auth}\r\n\r\n`);
    socket.once('data', () => {
      socket.pause();
      resolve(socket);
    });
  });

describe.skipIf(tooLargeForTheLog)('response bodies not yet read by their clients (MAX_INFLIGHT_RESPONSE_BYTES)', () => {
  it('a large reply is refused with 50004 (503, retry) while the clients of its app hold their share of the budget (a quarter), and sent again once they are gone', async () => {
    // Alone, a reply larger than the app's share still goes out.
    const first = await page();
    expect(first.status).toBe(200);
    expect((await first.arrayBuffer()).byteLength).toBeGreaterThan(16 * MiB);

    const stalled = await nonReader();
    const refused = await page();
    expect(refused.status).toBe(503);
    expect(refused.headers.get('x-service-errorcode')).toBe('50004');
    expect(refused.headers.get('link')).toBeNull();
    expect(await refused.json()).toMatchObject({ error: { code: 50004, statusCode: 503, message: expect.stringContaining('retry') } });
    // Small replies are not held back.
    expect((await fetch(`http://127.0.0.1:${port}/time`)).status).toBe(200);

    // Another app's large reply still goes out: one app's clients hold at most a quarter of the budget.
    const other = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const otherAuth = `Basic ${Buffer.from(other.keys[0].keyStr).toString('base64')}`;
    const published = await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: otherAuth, 'content-type': 'application/json' },
      body: JSON.stringify([{ data: 'y'.repeat(MiB / 2) }]),
    });
    expect(published.status).toBe(201);
    const otherPage = await fetch(`http://127.0.0.1:${port}/channels/${channel}/messages`, { headers: { authorization: otherAuth } });
    expect(otherPage.status).toBe(200);
    await otherPage.arrayBuffer();

    stalled.destroy();
    let status = 0;
    for (let tries = 0; tries < 200 && status !== 200; tries++) {
      const res = await page();
      status = res.status;
      await res.arrayBuffer();
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(status).toBe(200);
    // Every reply read: nothing is held (the last one's bytes are given back as its reply closes).
    for (let tries = 0; tries < 200 && t.service.app.responseBudget?.held() !== 0; tries++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(t.service.app.responseBudget?.held()).toBe(0);
  });
});
