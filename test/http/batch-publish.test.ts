import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';

let t: TestService;
let restricted: string;
beforeAll(async () => {
  t = await startTestService();
  const created = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{ capability: '{"ok:*":["publish","history"]}' }] } })).json();
  restricted = basic(created.keys[0].keyStr);
});
afterAll(() => t.close());

const batch = (payload: unknown, headers: Record<string, string> = {}, authorization = t.auth) =>
  t.service.app.inject({ method: 'POST', url: '/messages', headers: { authorization, 'content-type': 'application/json', ...headers }, payload: JSON.stringify(payload) });
const history = async (channel: string, authorization = t.auth) =>
  (await t.service.app.inject({ url: `/channels/${encodeURIComponent(channel)}/messages?direction=forwards`, headers: { authorization } })).json();

describe('POST /messages (spec: Bulk publish)', () => {
  it('all publishes succeed: 201 with results in request order', async () => {
    const [a, b, c] = [uniqueChannel(), uniqueChannel(), uniqueChannel()];
    const res = await batch([
      { channels: [a, b], messages: [{ name: 'one' }, { name: 'two' }] },
      { channels: c, messages: { name: 'three' } },
    ]);
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.map((r: { channel: string }) => r.channel)).toEqual([a, b, c]);
    for (const r of body) expect(r.messageId).toEqual(expect.any(String));
    expect((await history(a)).map((m: { name: string }) => m.name)).toEqual(['one', 'two']);
    expect((await history(c)).map((m: { name: string }) => m.name)).toEqual(['three']);
  });

  it('at least one failed: 400 with 40020 and batchResponse in request order; the others are published', async () => {
    const good = `ok:${uniqueChannel()}`;
    const res = await batch({ channels: [good, 'forbidden', '[meta]log'], messages: { data: 'x' } }, {}, restricted);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error).toMatchObject({ code: 40020, statusCode: 400, message: expect.stringContaining('batch') });
    expect(res.headers['x-service-errorcode']).toBe('40020');
    expect(body.batchResponse).toEqual([
      { channel: good, messageId: expect.any(String) },
      { channel: 'forbidden', error: expect.objectContaining({ code: 40160, statusCode: 401 }) },
      { channel: '[meta]log', error: expect.objectContaining({ code: 40160 }) },
    ]);
    expect(await history(good, restricted)).toHaveLength(1);
  });

  it("each failed item's error is a whole error object, with the href of its code (README: Errors), in batch publish and batch presence", async () => {
    const channel = uniqueChannel();
    const published = await batch({ channels: [channel, ''], messages: { data: 'x' } });
    expect(published.json().batchResponse[1]).toEqual({ channel: '', error: { code: 40010, statusCode: 400, message: expect.any(String), href: '/errors#error-40010' } });
    const presence = await t.service.app.inject({ url: `/presence?channel=${channel},${encodeURIComponent('[bad')}`, headers: { authorization: t.auth } });
    expect(presence.json().batchResponse[1]).toEqual({ channel: '[bad', error: { code: 40010, statusCode: 400, message: expect.any(String), href: '/errors#error-40010' } });
  });

  it('a validation failure of one message set fails only that publish', async () => {
    const [a, b] = [uniqueChannel(), uniqueChannel()];
    const res = await batch([
      { channels: a, messages: { data: 'fine' } },
      { channels: b, messages: { data: 42 } },
    ]);
    expect(res.statusCode).toBe(400);
    expect(res.json().batchResponse[1].error.code).toBe(40013);
    expect(await history(a)).toHaveLength(1);
    expect(await history(b)).toHaveLength(0);
  });

  it('at most 100 distinct channels; a name repeated across specs counts once', async () => {
    const names = Array.from({ length: 100 }, () => uniqueChannel());
    expect((await batch([{ channels: names, messages: { data: 'a' } }, { channels: names[0], messages: { data: 'b' } }])).statusCode).toBe(201);
    const res = await batch({ channels: [...names, uniqueChannel()], messages: { data: 'x' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40001);
    expect(res.json().batchResponse).toBeUndefined();
  });

  it('a spec without messages counts once per channel towards MAX_BATCH_MESSAGES: its channels are refused whole, 40034', async () => {
    // Each channel of it gets an outcome; counted as none, a 1.6 MB body of channel names was
    // answered with 52 MB of failures (review finding).
    const res = await batch({ channels: Array.from({ length: 10_001 }, () => 'a'), messages: [] });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40034);
    expect(res.json().batchResponse).toBeUndefined();
    // Within the limit, each channel fails on its own, as before.
    const few = await batch({ channels: ['a', 'b'], messages: [] });
    expect(few.statusCode).toBe(400);
    expect(few.json().batchResponse).toEqual([
      { channel: 'a', error: expect.objectContaining({ code: 40001 }) },
      { channel: 'b', error: expect.objectContaining({ code: 40001 }) },
    ]);
  });

  it.each([
    ['an empty array', []],
    ['a spec without channels', { messages: { data: 'x' } }],
    ['a spec without messages', { channels: 'a' }],
    ['channels of the wrong type', { channels: [1], messages: {} }],
    ['a non-object spec', ['x']],
  ])('an invalid request (%s) fails before any publish is tried', async (_what, payload) => {
    const res = await batch(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(40001);
  });

  it('authorisation failure before any publish: 401', async () => {
    expect((await batch({ channels: 'a', messages: {} }, {}, 'Basic eDp5')).statusCode).toBe(401);
  });

  it('protocol version 3 and later: one {successCount, failureCount, results} per spec, status 201', async () => {
    for (const version of ['3', '6']) {
      const good = `ok:${uniqueChannel()}`;
      const res = await batch([{ channels: [good, 'nope'], messages: [{ data: 'x' }] }], { 'x-ably-version': version }, restricted);
      expect(res.statusCode).toBe(201);
      expect(res.json()).toEqual([
        {
          successCount: 1,
          failureCount: 1,
          results: [
            { channel: good, messageId: expect.any(String), serials: [expect.any(String)] },
            { channel: 'nope', error: expect.objectContaining({ code: 40160 }) },
          ],
        },
      ]);
      // One BatchSpec (not in an array): its BatchResult alone.
      const single = await batch({ channels: good, messages: { data: 'y' } }, { 'x-ably-version': version }, restricted);
      expect(single.statusCode).toBe(201);
      expect(single.json()).toMatchObject({ successCount: 1, failureCount: 0, results: [{ channel: good, messageId: expect.any(String) }] });
    }
  });

  it('protocol version 2, one BatchSpec: the spec\'s flat array of per-channel results, 201', async () => {
    const [a, b] = [`ok:${uniqueChannel()}`, `ok:${uniqueChannel()}`];
    const res = await batch({ channels: [a, b], messages: [{ data: 'x' }] }, { 'x-ably-version': '2' }, restricted);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual([
      { channel: a, messageId: expect.any(String) },
      { channel: b, messageId: expect.any(String) },
    ]);
    // A failure among them: the spec's 400 with 40020 and batchResponse, as for 0.8.
    const mixed = await batch({ channels: [a, 'nope'], messages: [{ data: 'x' }] }, { 'x-ably-version': '2' }, restricted);
    expect(mixed.statusCode).toBe(400);
    expect(mixed.json()).toMatchObject({ error: { code: 40020 }, batchResponse: [{ channel: a, messageId: expect.any(String) }, { channel: 'nope', error: { code: 40160 } }] });
  });
});
