import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

// Issue 10, item 1: a message whose data nests deeply made MessagePack encoding throw inside the
// shared group commit, and every publish in that commit (other apps' too) answered 503.

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(() => t.close());

const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { v };
  return v;
};

const publish = (channel: string, body: unknown, msgpack = false) =>
  t.service.app.inject({
    method: 'POST',
    url: `/channels/${channel}/messages`,
    headers: { authorization: t.auth, 'content-type': msgpack ? 'application/x-msgpack' : 'application/json' },
    payload: msgpack ? Buffer.from(encode(body, { maxDepth: 1000 })) : JSON.stringify(body),
  });

describe('one message cannot fail other publishes (issue 10)', () => {
  it.each([
    ['JSON', false],
    ['MessagePack', true],
  ])('a deeply nested message (%s) gets 40013 alone; the publishes sent with it all succeed', async (_name, msgpack) => {
    const channel = uniqueChannel();
    const results = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => publish(channel, { name: 'ok', data: `m${i}` }, msgpack)),
      publish(channel, { name: 'deep', data: nested(100) }, msgpack),
      ...Array.from({ length: 20 }, (_, i) => publish(channel, { name: 'ok', data: `n${i}` }, msgpack)),
    ]);
    const statuses = results.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(40);
    const bad = results[20];
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatchObject({ code: 40013, statusCode: 400 });
    expect(bad.headers['x-service-errorcode']).toBe('40013');
  });

  it('data nested 10,000 levels deep gets 400 in the error format, not a 500 from a stack overflow', async () => {
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const res = await t.service.app.inject({
      method: 'POST',
      url: `/channels/${uniqueChannel()}/messages`,
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      payload: `{"data":${deep}}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40013);
  });

  it('extras nested deeply get 40032', async () => {
    const res = await publish(uniqueChannel(), { data: 'x', extras: { push: nested(64) } });
    expect(res.json().error).toMatchObject({ code: 40032, statusCode: 400 });
  });
});
