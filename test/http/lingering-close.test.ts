import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listening, startTestService, type TestService } from '../helpers/service.js';

/**
 * A body refused before it was read (issue 24 item 7): the client must read the refusal, not a
 * connection reset, even when it writes its whole body before it reads anything. Real sockets on
 * loopback: the reset is the kernel's.
 */

let t: TestService;
let port: number;
beforeAll(async () => {
  t = await startTestService();
  port = await listening(t);
});
afterAll(() => t.close());

interface Outcome {
  /** The first error the client's socket saw (EPIPE, ECONNRESET), if any. */
  error?: string;
  /** Bytes of the body the client managed to write. */
  written: number;
  /** Everything the service sent back. */
  response: string;
}

/**
 * Sends a request head declaring `declared` bytes, then writes `send` bytes of body as fast as the
 * socket takes them, then reads. `allowHalfOpen`: the client keeps sending after the service's FIN.
 */
function upload(path: string, declared: number | 'chunked', send: number, headers: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    const outcome: Outcome = { written: 0, response: '' };
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      outcome.error ??= e.code ?? e.message;
    });
    socket.on('close', () => {
      outcome.response = Buffer.concat(chunks).toString();
      resolve(outcome);
    });
    const length = declared === 'chunked' ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(declared) };
    const head = Object.entries({ host: 'x', authorization: t.auth, 'content-type': 'application/json', ...length, ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
    const data = Buffer.alloc(256 * 1024, 0x20);
    const chunk = declared === 'chunked' ? Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]) : data;
    const pump = (): void => {
      while (outcome.written < send && !socket.destroyed) {
        outcome.written += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
      if (socket.destroyed) return;
      if (declared === 'chunked') socket.end('0\r\n\r\n');
      else socket.end();
    };
    pump();
  });
}

const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1]);

describe('an upload refused before its body is read gets the refusal, not a reset (a lingering close)', () => {
  it('a 10 MB batch publish over the 2 MiB body limit, written whole before reading: 413 (40009) each of 20 times, with Connection: close', async () => {
    const size = 10 * 1024 * 1024;
    const outcomes: Outcome[] = [];
    for (let i = 0; i < 20; i++) outcomes.push(await upload('/messages', size, size));
    for (const o of outcomes) {
      expect(o.error).toBeUndefined();
      expect(o.written).toBeGreaterThanOrEqual(size);
      expect(statusOf(o.response)).toBe(413);
      expect(o.response).toMatch(/connection: close/i);
      expect(JSON.parse(o.response.split('\r\n\r\n')[1]).error).toMatchObject({ code: 40009, statusCode: 413 });
    }
  });

  it('a chunked 10 MB body, refused once 2 MiB have arrived: 413, read by the client', async () => {
    const o = await upload('/messages', 'chunked', 10 * 1024 * 1024);
    expect(o.error).toBeUndefined();
    expect(statusOf(o.response)).toBe(413);
  });

  it("Node's fetch, 20 uploads of 10 MB: every one answered 413, none a network error", async () => {
    const body = JSON.stringify({ channels: ['a'], messages: [{ data: 'x'.repeat(10 * 1024 * 1024) }] });
    const seen: string[] = [];
    for (let i = 0; i < 20; i++) {
      const answer = await fetch(`http://127.0.0.1:${port}/messages`, { method: 'POST', headers: { authorization: t.auth, 'content-type': 'application/json' }, body }).then(
        async (res) => `${res.status} ${(await res.json()).error.code}`,
        (err: Error & { cause?: { code?: string } }) => `failed: ${err.cause?.code ?? err.message}`,
      );
      seen.push(answer);
    }
    expect(seen).toEqual(Array(20).fill('413 40009'));
  });

  it('bad credentials on a large upload: 401 read by the client, not a reset', async () => {
    const size = 4 * 1024 * 1024;
    const o = await upload('/channels/x/messages', size, size, { authorization: `Basic ${Buffer.from('nope:secret').toString('base64')}` });
    expect(o.error).toBeUndefined();
    expect(statusOf(o.response)).toBe(401);
  });

  it('the linger is bounded: a client that goes on sending (500 MB declared) is cut off after about 64 MiB more, having read its 413', async () => {
    const size = 500 * 1024 * 1024;
    const o = await upload('/messages', size, size);
    expect(statusOf(o.response)).toBe(413);
    expect(o.written).toBeLessThan(200 * 1024 * 1024);
    expect(o.error).toMatch(/EPIPE|ECONNRESET/);
  });

  it('the service goes on answering on other connections meanwhile', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/time`);
    expect(res.status).toBe(200);
  });
});
