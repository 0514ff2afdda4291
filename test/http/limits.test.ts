import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';

// Issue 10, items 2, 3, 6 and 8: limits on what one client can make the service spend, and every
// refusal in the spec's error format, router- and parser-level ones included. A real listener, so
// that Node's HTTP parser, its timeouts and fastify's router take part.

let t: TestService;
let port: number;
beforeAll(async () => {
  t = await startTestService({ REQUEST_TIMEOUT_MS: '1500', MAX_INFLIGHT_BODY_BYTES: String(1024 * 1024), MAX_BATCH_MESSAGES: '2000', MAX_MESSAGE_SIZE: '800000' });
  port = await listening(t);
});
afterAll(() => t.close());

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const send = (method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers: { authorization: t.auth, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });

/** Writes raw bytes on a new connection and reads until the server closes it. */
const raw = (bytes: string | Buffer, opts: { keepOpenMs?: number } = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('error', reject);
    socket.write(bytes);
    if (opts.keepOpenMs === undefined) socket.end();
  });

/** The spec's error shape: body `{error: {code, statusCode, message}}` and the error headers. */
function expectError(reply: Reply, status: number, code: number): void {
  expect(reply.status).toBe(status);
  const { error } = JSON.parse(reply.body);
  expect(error).toMatchObject({ code, statusCode: status, message: expect.any(String) });
  expect(reply.headers['x-service-errorcode']).toBe(String(code));
  expect(reply.headers['x-ably-errorcode']).toBe(String(code));
}

/** The same from a raw HTTP response's text. */
function expectRawError(response: string, status: number, code: number): void {
  const [head, body] = response.split('\r\n\r\n');
  expect(head).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
  expect(head).toMatch(new RegExp(`X-Service-ErrorCode: ${code}`, 'i'));
  expect(JSON.parse(body).error).toMatchObject({ code, statusCode: status, message: expect.any(String) });
}

const json = { 'content-type': 'application/json' };
const history = async (channel: string) => JSON.parse((await send('GET', `/channels/${channel}/messages`)).body) as unknown[];

describe('batch publish is bounded (issue 10 item 2)', () => {
  it('a batch over MAX_BATCH_MESSAGES (counted once per channel) is refused with 40034 before anything is published', async () => {
    const [a, b] = [uniqueChannel(), uniqueChannel()];
    const specs = [{ channels: [a, b], messages: Array.from({ length: 1001 }, (_, i) => ({ data: `m${i}` })) }];
    expectError(await send('POST', '/messages', JSON.stringify(specs), json), 400, 40034);
    expect(await history(a)).toEqual([]);
  });

  it('400,000 tiny BatchSpecs are refused (body too large, or too many messages), quickly, and nothing is published', async () => {
    const channel = uniqueChannel();
    const spec = `{"channels":"${channel}","messages":{"data":"x"}}`;
    const huge = `[${Array.from({ length: 400_000 }, () => spec).join(',')}]`;
    const reply = await send('POST', '/messages', huge, json);
    expect([400, 413]).toContain(reply.status);
    expect(JSON.parse(reply.body).error.code).toBe(reply.status === 413 ? 40009 : 40034);
    const justUnder = `[${Array.from({ length: 2001 }, () => spec).join(',')}]`;
    expectError(await send('POST', '/messages', justUnder, json), 400, 40034);
    expect(await history(channel)).toEqual([]);
  });

  it('a large legal batch is published whole while /time keeps answering (worst /time latency printed)', async () => {
    const channels = Array.from({ length: 100 }, () => uniqueChannel('batch'));
    const specs = [{ channels, messages: Array.from({ length: 20 }, (_, i) => ({ name: 'n', data: `payload ${i} ${'x'.repeat(200)}` })) }];
    let worst = 0;
    let done = false;
    const probe = (async () => {
      let probes = 0;
      while (!done) {
        const start = performance.now();
        const reply = await send('GET', '/time');
        expect(reply.status).toBe(200);
        worst = Math.max(worst, performance.now() - start);
        probes++;
      }
      return probes;
    })();
    const reply = await send('POST', '/messages', JSON.stringify(specs), json);
    done = true;
    const probes = await probe;
    expect(reply.status).toBe(201);
    expect(JSON.parse(reply.body)).toHaveLength(100);
    expect(await history(channels[99])).toHaveLength(20);
    console.log(`batch of 2,000 messages (100 channels x 20): ${probes} /time probes meanwhile, worst ${worst.toFixed(1)} ms`);
  });
});

describe('request bodies and slow clients are bounded (issue 10 item 3)', () => {
  it('a route that needs no credentials takes small bodies only: a 20 KiB token request gets 413 (40009) without credentials', async () => {
    const body = JSON.stringify({ keyName: 'x.y', timestamp: Date.now(), padding: 'p'.repeat(20 * 1024) });
    expectError(await send('POST', '/keys/x.y/requestToken', body, { ...json, authorization: '' }), 413, 40009);
  });

  it('a body over MAX_BODY_BYTES gets 413 (40009) in the error format', async () => {
    const body = JSON.stringify({ data: 'x'.repeat(3 * 1024 * 1024) });
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, body, json), 413, 40009);
  });

  it('a body that arrives too slowly is answered 408 in the error format and its connection closed', async () => {
    const head = `POST /keys/x.y/requestToken HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"slow":`;
    const response = await raw(head, { keepOpenMs: 10_000 });
    expectRawError(response, 408, 40000);
  });

  it('bodies in flight share one budget: over it, a body is refused with 50004 (503) until others finish', async () => {
    const size = 700 * 1024;
    const holder = connect(port, '127.0.0.1');
    await new Promise((r) => holder.once('connect', r));
    // Declares 700 KiB, sends part of it, and holds the rest: its reservation stays.
    holder.write(`POST /channels/${uniqueChannel()}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.auth}\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n{"data":"`);
    await new Promise((r) => setTimeout(r, 100));
    const body = JSON.stringify({ data: 'y'.repeat(size - 20) });
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, body, json), 503, 50004);
    holder.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const channel = uniqueChannel();
    expect((await send('POST', `/channels/${channel}/messages`, body, json)).status).toBe(201);
    expect(await history(channel)).toHaveLength(1);
  });
});

describe('chunked bodies count against the budget as they arrive', () => {
  it('a chunked body larger than the whole budget is refused with 50004; a small chunked body is published', async () => {
    const chunk = 'z'.repeat(64 * 1024);
    const reply = await new Promise<Reply>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: `/channels/${uniqueChannel()}/messages`, headers: { authorization: t.auth, ...json, 'transfer-encoding': 'chunked' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
        },
      );
      req.on('error', reject);
      req.write('{"data":"');
      for (let i = 0; i < 20; i++) req.write(chunk);
      req.end('"}');
    });
    expectError(reply, 503, 50004);
    const channel = uniqueChannel();
    const ok = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, method: 'POST', path: `/channels/${channel}/messages`, headers: { authorization: t.auth, ...json, 'transfer-encoding': 'chunked' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.write('{"data":"');
      req.write(chunk);
      req.end('"}');
    });
    expect(ok).toBe(201);
    expect(await history(channel)).toHaveLength(1);
  });
});

describe('every error has the spec shape, router and HTTP parser errors included (issue 10 item 6)', () => {
  it('a path with a bad percent-encoding gets 400 (40000) with the error body and headers', async () => {
    expectError(await send('GET', '/channels/%E0%A4%A/messages'), 400, 40000);
  });

  it('a channel name over the router limit gets 400 (40010), like any other name that is too long', async () => {
    expectError(await send('GET', `/channels/${'c'.repeat(5000)}/messages`), 400, 40010);
    expectError(await send('GET', `/channels/${'c'.repeat(3000)}/messages`), 400, 40010);
  });

  it('a malformed HTTP request gets 400 (40000) in the error format', async () => {
    expectRawError(await raw('GARBAGE\r\n\r\n'), 400, 40000);
  });

  it('headers over the size limit get 431 (40004) in the error format', async () => {
    expectRawError(await raw(`GET /time HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`), 431, 40004);
  });
});

describe('invalid UTF-8 is refused, not rewritten (issue 10 item 8)', () => {
  const bad = Buffer.from([0xc3, 0x28]);

  it('in a JSON body: 400 (40001)', async () => {
    const body = Buffer.concat([Buffer.from('{"data":"'), bad, Buffer.from('"}')]);
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, body, json), 400, 40001);
  });

  it('in a MessagePack string: 400 (40001); binary data stays allowed', async () => {
    const good = Buffer.from(encode({ name: '@@', data: new Uint8Array([0xc3, 0x28]) }));
    const body = Buffer.from(good);
    bad.copy(body, body.indexOf(Buffer.from('@@')));
    const headers = { 'content-type': 'application/x-msgpack' };
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, body, headers), 400, 40001);
    expect((await send('POST', `/channels/${uniqueChannel()}/messages`, good, headers)).status).toBe(201);
  });

  it('in a form body, raw or percent-encoded: 400 (40001)', async () => {
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, 'data=%C3%28', headers), 400, 40001);
    expectError(await send('POST', `/channels/${uniqueChannel()}/messages`, Buffer.concat([Buffer.from('data='), bad]), headers), 400, 40001);
    const channel = uniqueChannel();
    expect((await send('POST', `/channels/${channel}/messages`, 'name=a+b&data=%C3%A9', headers)).status).toBe(201);
    expect(await history(channel)).toMatchObject([{ name: 'a b', data: 'é' }]);
  });
});

describe('request bodies nested deeper than MAX_BODY_DEPTH are refused before they are decoded (issue 22)', () => {
  // MessagePack: fixarray of one element, n times, around a 0 (1 byte a level).
  const deepMsgpack = (levels: number): Buffer => Buffer.concat([Buffer.alloc(levels, 0x91), Buffer.from([0x00])]);
  const deepJson = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);

  it.each([
    ['JSON', 'application/json', (n: number) => `{"name":"deep","data":${deepJson(n)}}`],
    ['MessagePack', 'application/x-msgpack', (n: number) => Buffer.concat([Buffer.from([0x82, 0xa4, ...Buffer.from('name'), 0xa4, ...Buffer.from('deep'), 0xa4, ...Buffer.from('data')]), deepMsgpack(n)])],
    ['text/plain JSON token request', 'text/plain', (n: number) => `{"timestamp":${deepJson(n)}}`],
  ] as const)('%s nested far deeper (400,000 levels; 7,000 on the token route, whose bodies are small): 400 (40013) naming MAX_BODY_DEPTH; nothing appended', async (_name, type, body) => {
    const channel = uniqueChannel();
    const path = type === 'text/plain' ? `/keys/${t.key.split(':')[0]}/requestToken` : `/channels/${channel}/messages`;
    const reply = await send('POST', path, body(type === 'text/plain' ? 7000 : 400_000), { 'content-type': type });
    expectError(reply, 400, 40013);
    expect(JSON.parse(reply.body).error.message).toMatch(/deeper than 512 levels.*MAX_BODY_DEPTH/);
    expect(await history(channel)).toEqual([]);
  });

  it('a body within MAX_BODY_DEPTH whose data nests too deep gets the finer message error (40013 on data)', async () => {
    const reply = await send('POST', `/channels/${uniqueChannel()}/messages`, `{"data":${deepJson(400)}}`, json);
    expectError(reply, 400, 40013);
    expect(JSON.parse(reply.body).error.message).toMatch(/data nests deeper than 32/);
  });

  it('brackets inside strings do not count as nesting', async () => {
    const channel = uniqueChannel();
    const text = '['.repeat(5000) + '{{"';
    expect((await send('POST', `/channels/${channel}/messages`, JSON.stringify({ name: 'brackets', data: text }), json)).status).toBe(201);
    expect(await history(channel)).toMatchObject([{ name: 'brackets', data: text }]);
  });
});
