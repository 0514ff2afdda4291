// The official SDK (npm `ably` v2), unmodified, against the real listening service
// (ARCHITECTURE: Compatibility with existing clients), in both of its wire formats.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IncomingMessage } from 'node:http';
import * as Ably from 'ably';
import { allPages, rejection, WIRE_FORMATS } from '../helpers/sdk.js';
import { removeDir, startTestService, uniqueChannel, type TestService, listening } from '../helpers/service.js';

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

describe.each(WIRE_FORMATS)('ably-js v2 Rest client ($format)', ({ useBinaryProtocol }) => {
  const client = (key = ts.key): Ably.Rest =>
    new Ably.Rest({
      key,
      restHost: '127.0.0.1',
      port,
      tls: false,
      useBinaryProtocol,
      // Quiets the SDK's deprecation warning about restHost (it prefers `endpoint`).
      logLevel: 0,
    });

  it('RSC16: time() gives the service time', async () => {
    const before = Date.now();
    const time = await client().time();
    expect(Math.abs(time - before)).toBeLessThan(5_000);
  });

  it('RSC19: request("get", "/time") works', async () => {
    const response = await client().request('get', '/time', 6);
    expect(response.success).toBe(true);
    expect(response.statusCode).toBe(200);
    expect(typeof response.items[0]).toBe('number');
    expect(Math.abs((response.items[0] as unknown as number) - Date.now())).toBeLessThan(5_000);
  });

  it('RSC8: requests and responses travel in the client\'s format, with the SDK\'s protocol version', async () => {
    const type = useBinaryProtocol ? 'application/x-msgpack' : 'application/json';
    const seen: { method: string; contentType: string; accept: string; version: string }[] = [];
    const record = (req: IncomingMessage): void => {
      seen.push({
        method: req.method ?? '',
        contentType: String(req.headers['content-type'] ?? ''),
        accept: String(req.headers.accept ?? ''),
        version: String(req.headers['x-ably-version'] ?? ''),
      });
    };
    const rest = client();
    const name = uniqueChannel('sdk-format');
    const channel = rest.channels.get(name);
    ts.service.app.server.on('request', record);
    try {
      await channel.publish('n', 'd');
      await channel.history();
    } finally {
      ts.service.app.server.off('request', record);
    }
    expect(seen).toEqual([
      { method: 'POST', contentType: type, accept: type, version: '6' },
      { method: 'GET', contentType: '', accept: type, version: '6' },
    ]);

    // The SDK decodes a body by its own format; it also reports the response headers.
    const published = await rest.request('post', `/channels/${name}/messages`, 6, null, { name: 'r', data: 'x' });
    expect(published.statusCode).toBe(201);
    expect(published.headers['content-type']).toBe(type);
    const history = await rest.request('get', `/channels/${name}/messages`, 6, { limit: '1' }, null);
    expect(history.statusCode).toBe(200);
    expect(history.headers['content-type']).toBe(type);
    expect(history.headers.link).toMatch(/^<\.\/messages\?[^>]*>; rel="first", <\.\/messages\?[^>]*>; rel="current", <\.\/messages\?[^>]*>; rel="next"$/);
    expect((history.items as unknown as { name: string }[]).map((m) => m.name)).toEqual(['r']);
  });

  it('RSL1, RSL2: string, object, bytes and arrays of messages round-trip through history, newest first', async () => {
    const rest = client();
    const channel = rest.channels.get(uniqueChannel('sdk'));
    const bytes = Buffer.from([0, 1, 2, 127, 128, 254, 255, 10, 13]);
    await channel.publish('text', 'hello world');
    await channel.publish('object', { a: 1, nested: { b: [true, null, 'x'] } });
    await channel.publish('bytes', bytes);
    await channel.publish([
      { name: 'batch-1', data: 'one' },
      { name: 'batch-2', data: 'two' },
    ]);

    const page = await channel.history();
    expect(page.items.map((m) => m.name)).toEqual(['batch-2', 'batch-1', 'bytes', 'object', 'text']);
    const byName = new Map(page.items.map((m) => [m.name, m]));
    expect(byName.get('text')!.data).toBe('hello world');
    expect(byName.get('object')!.data).toEqual({ a: 1, nested: { b: [true, null, 'x'] } });
    const got = byName.get('bytes')!.data as Uint8Array;
    expect(got).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(got).equals(bytes)).toBe(true);
    expect(byName.get('batch-1')!.data).toBe('one');
    for (const m of page.items) {
      expect(typeof m.id).toBe('string');
      expect(typeof m.timestamp).toBe('number');
      expect(m.encoding ?? null).toBeNull();
    }
    expect(page.hasNext()).toBe(false);
  });

  it('RSL2b: limit 2 pages through every message exactly once, backwards and forwards', async () => {
    const rest = client();
    const channel = rest.channels.get(uniqueChannel('sdk-paging'));
    const names = Array.from({ length: 7 }, (_, i) => `m${i}`);
    for (const name of names) await channel.publish(name, name);

    const backwards = await allPages(await channel.history({ limit: 2 }));
    expect(backwards.pages).toBe(4);
    expect(backwards.items.map((m) => m.name)).toEqual([...names].reverse());

    const forwards = await allPages(await channel.history({ limit: 2, direction: 'forwards' }));
    expect(forwards.pages).toBe(4);
    expect(forwards.items.map((m) => m.name)).toEqual(names);

    const first = await channel.history({ direction: 'forwards' });
    expect(first.items.map((m) => m.data)).toEqual(names);
  });

  it('RSL1k: publishing the same explicit id twice leaves one message', async () => {
    const rest = client();
    const channel = rest.channels.get(uniqueChannel('sdk-idempotent'));
    const id = `${Buffer.from(Math.random().toString()).toString('base64').slice(0, 12)}:0`;
    await channel.publish({ id, name: 'once', data: 'first' });
    await channel.publish({ id, name: 'once', data: 'first' });
    const page = await channel.history();
    expect(page.items.map((m) => m.id)).toEqual([id]);
  });

  it('RSA1: a key with a wrong secret is refused with 40101, and the SDK does not turn to token auth', async () => {
    const [name] = ts.key.split(':');
    const rest = client(`${name}:wrong-secret`);
    const seen: { url: string; auth: string }[] = [];
    const record = (req: IncomingMessage): void => {
      seen.push({ url: req.url ?? '', auth: String(req.headers.authorization ?? '') });
    };
    ts.service.app.server.on('request', record);
    try {
      const err = await rejection(rest.channels.get(uniqueChannel('sdk-auth')).publish('x', 'y'));
      expect(err.code).toBe(40101);
      expect(err.statusCode).toBe(401);
      const historyErr = await rejection(rest.channels.get(uniqueChannel('sdk-auth')).history());
      expect(historyErr.code).toBe(40101);
      expect(historyErr.statusCode).toBe(401);
    } finally {
      ts.service.app.server.off('request', record);
    }
    expect(seen).toHaveLength(2);
    for (const r of seen) {
      expect(r.url).not.toContain('requestToken');
      expect(r.auth).toMatch(/^Basic /);
    }
  });

  it('capabilities: a subscribe-only key is refused publish and history with 40160', async () => {
    const created = await client().request('post', '/apps', 6, null, {
      keys: [{ capability: '{"cansubscribe:*":["subscribe"]}' }],
    });
    expect(created.statusCode).toBe(201);
    const appSetup = created.items[0] as unknown as { keys: { keyStr: string }[] };
    const restricted = client(appSetup.keys[0].keyStr);
    const channel = restricted.channels.get(`cansubscribe:${uniqueChannel('sdk')}`);

    const publishErr = await rejection(channel.publish('x', 'y'));
    expect(publishErr.code).toBe(40160);
    expect(publishErr.statusCode).toBe(401);
    const historyErr = await rejection(channel.history());
    expect(historyErr.code).toBe(40160);
    expect(historyErr.statusCode).toBe(401);
  });
});
