// Webhooks as a consumer of the log (README: Webhooks): a receiver in the test process gets every
// message published, in order per channel, signed as the platform signs, whatever the target
// did meanwhile. Runs in the mode startTestService starts (TEST_SERVICE_MODE=production: Kafka
// and ClickHouse, the rule's consumer group and checkpoints shared).
import { afterEach, describe, expect, it } from 'vitest';
import { encode } from '@msgpack/msgpack';
import { Topics } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { WebhookRule } from '../../src/webhooks/rules.js';
import { startTestService, testServiceMode, type TestService } from '../helpers/service.js';
import { startReceiver, until, type Receiver } from '../helpers/webhook-receiver.js';

const FAST_RETRIES = { WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_RETRY_MS: '20', WEBHOOK_RETRY_MAX_MS: '200', WEBHOOK_PAUSE_AFTER_FAILURES: '3' };
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function service(env: Record<string, string> = FAST_RETRIES): Promise<TestService & { appId: string; keyName: string; secret: string }> {
  const ts = await startTestService(env);
  open.push(ts);
  const [keyName, secret] = [ts.key.slice(0, ts.key.indexOf(':')), ts.key.slice(ts.key.indexOf(':') + 1)];
  return Object.assign(ts, { appId: keyName.slice(0, keyName.indexOf('.')), keyName, secret });
}

async function receiver(secrets: Record<string, string> = {}): Promise<Receiver> {
  const r = await startReceiver(secrets);
  open.push({ close: () => r.stop().catch(() => undefined) });
  return r;
}

async function addRule(ts: TestService & { appId: string }, rule: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await ts.service.app.inject({ method: 'POST', url: `/apps/${ts.appId}/rules`, headers: { authorization: ts.auth, 'content-type': 'application/json' }, payload: rule });
  return { status: res.statusCode, body: res.json() };
}

const httpRule = (url: string, extra: { requestMode?: string; channelFilter?: string; signingKeyId?: string; type?: string; format?: string } = {}) => ({
  ruleType: 'http',
  requestMode: extra.requestMode ?? 'batch',
  source: { type: extra.type ?? 'channel.message', channelFilter: extra.channelFilter ?? '' },
  target: { url, enveloped: true, format: extra.format ?? 'json', ...(extra.signingKeyId ? { signingKeyId: extra.signingKeyId } : {}) },
});

async function publish(ts: TestService, channel: string, data: string[]): Promise<void> {
  const res = await ts.service.app.inject({
    method: 'POST',
    url: `/channels/${encodeURIComponent(channel)}/messages`,
    headers: { authorization: ts.auth, 'content-type': 'application/json' },
    payload: data.map((d) => ({ name: 'm', data: d })),
  });
  expect(res.statusCode, res.body).toBe(201);
}

/** `count` messages over `channels` channels, in publishes of `perPublish`; what each channel was sent, in order. */
async function publishMany(ts: TestService, prefix: string, channels: number, count: number, perPublish = 50): Promise<Map<string, string[]>> {
  const sent = new Map<string, string[]>();
  for (let c = 0; c < channels; c++) sent.set(`${prefix}-${c}`, []);
  const perChannel = Math.ceil(count / channels);
  const publishes: Promise<void>[] = [];
  for (const [channel, list] of sent) {
    for (let i = 0; i < perChannel && list.length < perChannel; i++) list.push(`${channel}#${i}`);
    publishes.push((async () => {
      for (let i = 0; i < list.length; i += perPublish) await publish(ts, channel, list.slice(i, i + perPublish));
    })());
  }
  await Promise.all(publishes);
  return sent;
}

const deliveredAll = (r: Receiver, sent: Map<string, string[]>) => () => {
  const got = r.messagesByChannel();
  return [...sent].every(([channel, list]) => (got.get(channel)?.length ?? 0) >= list.length);
};

describe(`webhook delivery (${testServiceMode})`, () => {
  it('delivers every one of 10,000 published messages at least once, in order per channel, in the platform envelope', { timeout: 180_000 }, async () => {
    const ts = await service();
    const r = await receiver();
    const added = await addRule(ts, httpRule(r.url, { channelFilter: '^bulk-' }));
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /1 webhook rule/.test(c.detail)), 20_000);
    const sent = await publishMany(ts, 'bulk', 20, 10_000);
    await until('all 10,000 messages at the receiver', deliveredAll(r, sent), 150_000);
    const got = r.messagesByChannel();
    for (const [channel, list] of sent) expect(got.get(channel)).toEqual(list);
    const item = r.items[0];
    expect(item).toMatchObject({ source: 'channel.message', name: 'channel.message', webhookId: added.body.id });
    expect(item.id).toMatch(/^messages:\d+:\d+$/);
    expect(typeof item.timestamp).toBe('number');
    expect(item.data.channelId).toMatch(/^bulk-/);
    expect(item.data.messages![0]).toMatchObject({ name: 'm' });
  });

  it('signs each request with the key named in X-Ably-Key: the HMAC-SHA256 of the body under its secret verifies', async () => {
    const ts = await service();
    const r = await receiver({ [ts.keyName]: ts.secret });
    expect((await addRule(ts, httpRule(r.url, { requestMode: 'single', signingKeyId: ts.keyName }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    const sent = await publishMany(ts, 'signed', 2, 20, 5);
    await until('20 messages', deliveredAll(r, sent), 60_000);
    expect(r.signedRequests).toBe(r.requests);
    expect(r.badSignatures).toBe(0);
    // A receiver holding another secret rejects them: the check can fail.
    const forged = await receiver({ [ts.keyName]: 'not-the-secret' });
    expect((await addRule(ts, httpRule(forged.url, { requestMode: 'single', signingKeyId: ts.keyName }))).status).toBe(201);
    await until('the second rule to run', () => ts.service.readiness().some((c) => /2 webhook rules/.test(c.detail)), 20_000);
    await publish(ts, 'signed-0', ['after']);
    await until('the second receiver to get a request', () => forged.requests > 0, 60_000);
    expect(forged.badSignatures).toBe(forged.signedRequests);
  });

  it('delivers everything published while the receiver was down once it is back', { timeout: 120_000 }, async () => {
    const ts = await service();
    const r = await receiver();
    expect((await addRule(ts, httpRule(r.url))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    await r.stop();
    const sent = await publishMany(ts, 'down', 4, 400, 20);
    // Down long enough to be paused and reported.
    await until('the target reported paused', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /paused/.test(c.detail)), 30_000);
    const metrics = await ts.service.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/^cm_webhook_targets_paused 1$/m);
    expect(r.items).toHaveLength(0);
    await r.restart();
    await until('all 400 messages after the receiver came back', deliveredAll(r, sent), 60_000);
    expect(r.messagesByChannel()).toEqual(sent);
    await until('the pause lifted', () => ts.service.readiness().some((c) => c.name === 'webhooks' && !/paused/.test(c.detail)));
  });

  it('delivers everything published during a 30 s outage of the receiver once it is up: retried with backoff, paused, resumed', { timeout: 180_000 }, async () => {
    // READY_MAX_LAG 50: the rule's consumer falls further behind than that, and the instance stays ready.
    const ts = await service({ WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_RETRY_MS: '100', WEBHOOK_RETRY_MAX_MS: '5000', WEBHOOK_PAUSE_AFTER_FAILURES: '5', READY_MAX_LAG: '50' });
    const r = await receiver();
    expect((await addRule(ts, httpRule(r.url, { channelFilter: '^outage-' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    const sent = new Map<string, string[]>([['outage-0', ['before']]]);
    await publish(ts, 'outage-0', ['before']);
    await until('the first message', () => r.items.length === 1, 30_000);
    await r.stop();
    // 30 s down, publishing all along: a message every 100 ms over 5 channels.
    const downAt = Date.now();
    for (let i = 0; Date.now() - downAt < 30_000; i++) {
      const channel = `outage-${i % 5}`;
      const data = `${channel}#${i}`;
      await publish(ts, channel, [data]);
      sent.set(channel, [...(sent.get(channel) ?? []), data]);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await until('the target reported paused', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /paused/.test(c.detail)), 10_000);
    const metrics = (await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    const failed = Number(/^cm_webhook_requests_failed_total (\d+)$/m.exec(metrics)?.[1]);
    // Its consumer is one of the runner's: its lag is listed with the others'.
    expect(Number(/^cm_consumer_lag_records\{consumer="webhook-[^"]+"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(50);
    const consumers = ts.service.readiness().find((c) => c.name === 'consumers')!;
    expect(consumers.ok).toBe(true);
    expect(consumers.detail).toMatch(/webhook-\S+ \d+ records behind \(a webhook target's pace: not counted\)/);
    // Retried while down: more failures than it takes to pause.
    expect(failed).toBeGreaterThan(5);
    expect(r.items).toHaveLength(1);
    await r.restart();
    await until('every message of the outage after the receiver came back', deliveredAll(r, sent), 60_000);
    expect(r.messagesByChannel()).toEqual(sent);
    await until('the pause lifted', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /1 webhook rule delivering/.test(c.detail)), 10_000);
  });

  it('a slow target does not hold back a fast one', { timeout: 120_000 }, async () => {
    const ts = await service({ ...FAST_RETRIES, WEBHOOK_TIMEOUT_MS: '60000' });
    const slow = await receiver();
    slow.delayMs = 30_000;
    const fast = await receiver();
    expect((await addRule(ts, httpRule(slow.url, { requestMode: 'single' }))).status).toBe(201);
    expect((await addRule(ts, httpRule(fast.url, { requestMode: 'single' }))).status).toBe(201);
    await until('both rules to run', () => ts.service.readiness().some((c) => /2 webhook rules/.test(c.detail)), 20_000);
    const sent = await publishMany(ts, 'pace', 3, 60, 1);
    await until('the fast target to get all 60', deliveredAll(fast, sent), 60_000);
    // The slow one's first request is still unanswered: it has delivered nothing, yet the fast one has all.
    expect(slow.items).toHaveLength(0);
    expect(slow.requests).toBeGreaterThanOrEqual(1);
  });

  it('refuses a target on a loopback address unless WEBHOOKS_ALLOW_PRIVATE_TARGETS=1, and reports it paused, by its origin only (GET /ready asks no credentials)', async () => {
    const ts = await service({ WEBHOOK_RETRY_MS: '20', WEBHOOK_RETRY_MAX_MS: '200', WEBHOOK_PAUSE_AFTER_FAILURES: '2' });
    const r = await receiver();
    // A receiver's secret in the path and the query, as many give it.
    expect((await addRule(ts, httpRule(`${r.url}/T0/secret-path?token=secret-query`))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    await publish(ts, 'private-1', ['x']);
    await until('the target reported paused', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /paused/.test(c.detail)), 30_000);
    const check = ts.service.readiness().find((c) => c.name === 'webhooks')!;
    expect(check.detail).toMatch(/loopback or private address; set WEBHOOKS_ALLOW_PRIVATE_TARGETS=1/);
    const ready = await ts.service.app.inject({ url: '/ready' });
    expect(ready.body).toContain(`(http://127.0.0.1:${r.port}: `);
    expect(ready.body).not.toContain('secret');
    expect(r.requests).toBe(0);
  });

  it('stops delivering to a rule once it is removed, and refuses a rule that is not http(s) with 40001', async () => {
    const ts = await service();
    const r = await receiver();
    const added = await addRule(ts, httpRule(r.url));
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    const list = await ts.service.app.inject({ method: 'GET', url: `/apps/${ts.appId}/rules`, headers: { authorization: ts.auth } });
    expect(list.json()).toEqual([expect.objectContaining({ id: added.body.id, ruleType: 'http' })]);
    await publish(ts, 'gone-1', ['before']);
    await until('the first message', () => r.items.length === 1, 30_000);
    const removed = await ts.service.app.inject({ method: 'DELETE', url: `/apps/${ts.appId}/rules/${String(added.body.id)}`, headers: { authorization: ts.auth } });
    expect(removed.statusCode).toBe(204);
    await until('the rule to stop', () => ts.service.readiness().some((c) => /0 webhook rules/.test(c.detail)), 20_000);
    await publish(ts, 'gone-1', ['after']);
    // A rule added after it, to the same receiver's other path, gets `after`: the removed one did not.
    expect((await addRule(ts, httpRule(`${r.url}/second`, { channelFilter: '^gone-' }))).status).toBe(201);
    await publish(ts, 'gone-1', ['later']);
    await until('the second rule to deliver', () => r.items.some((i) => i.data.messages?.[0].data === 'later'), 30_000);
    expect(r.items.filter((i) => i.data.messages?.[0].data === 'after')).toHaveLength(0);

    // A filter the linear engine cannot run (a backreference) is refused; nested quantifiers are
    // served, and a channel name that took a backtracking engine 2^40 steps is passed over at once.
    const backref = await addRule(ts, httpRule(r.url, { channelFilter: '^(x)\\1' }));
    expect(backref.status).toBe(400);
    expect(JSON.stringify(backref.body)).toMatch(/linear time/);
    expect((await addRule(ts, httpRule(`${r.url}/nested`, { channelFilter: '^(a+)+$' }))).status).toBe(201);
    await publish(ts, `${'a'.repeat(40)}!`, ['backtracking']);
    await publish(ts, 'aaa', ['nested']);
    await until('the nested-quantifier rule to deliver', () => r.items.some((i) => i.data.messages?.[0].data === 'nested'), 30_000);

    const bad = await addRule(ts, { ...httpRule('ftp://example.com/x') });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 40001 } });
    expect(JSON.stringify(bad.body)).toMatch(/http or https/);
  });

  it('a rule removed and made again with its id delivers from its new creation on: not what was published while it was gone', { timeout: 120_000 }, async () => {
    const ts = await service();
    const r = await receiver();
    const rule = { ...httpRule(r.url, { requestMode: 'single' }), id: 'again' };
    const data = () => r.items.map((i) => String(i.data.messages?.[0].data));
    expect((await addRule(ts, rule)).status).toBe(201);
    await publish(ts, 'again-1', ['before']);
    await until('the first message', () => data().includes('before'), 30_000);
    const removed = await ts.service.app.inject({ method: 'DELETE', url: `/apps/${ts.appId}/rules/again`, headers: { authorization: ts.auth } });
    expect(removed.statusCode).toBe(204);
    await publish(ts, 'again-1', ['while gone']);
    expect((await addRule(ts, rule)).status).toBe(201);
    await publish(ts, 'again-1', ['after']);
    // In order per channel: had it resumed where it stopped, `while gone` would have come first.
    await until('the message after', () => data().includes('after'), 30_000);
    expect(data().filter((d) => d !== 'before')).toEqual(['after']);
  });

  it('posts at most WEBHOOK_MAX_IN_FLIGHT requests to a target at once, its channels spread over them, each still in order', { timeout: 120_000 }, async () => {
    const ts = await service({ ...FAST_RETRIES, WEBHOOK_MAX_IN_FLIGHT: '3', WEBHOOK_BATCH_SIZE: '2' });
    const r = await receiver();
    r.delayMs = 20;
    expect((await addRule(ts, httpRule(r.url, { channelFilter: '^lanes-' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    const sent = await publishMany(ts, 'lanes', 12, 600, 1);
    await until('all 600 messages', deliveredAll(r, sent), 100_000);
    expect(r.messagesByChannel()).toEqual(sent);
    expect(r.maxConcurrent).toBeLessThanOrEqual(3);
    expect(r.maxConcurrent).toBeGreaterThan(1);
  });

  it('delivers channel lifecycle events to a channel.lifecycle rule, filtered by the channel they tell of', async () => {
    const ts = await service();
    const r = await receiver();
    expect((await addRule(ts, httpRule(r.url, { type: 'channel.lifecycle', channelFilter: '^life-' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    await publish(ts, 'other-1', ['x']);
    await publish(ts, 'life-1', ['x']);
    await until('the lifecycle item', () => r.items.length > 0, 30_000);
    expect(r.items[0]).toMatchObject({ source: 'channel.lifecycle', name: 'channel.opened', data: { channelId: 'life-1' } });
    expect(r.items.some((i) => i.data.channelId === 'other-1')).toBe(false);
  });

  it('delivers presence changes to a channel.presence rule', async () => {
    const ts = await service();
    const r = await receiver();
    expect((await addRule(ts, httpRule(r.url, { type: 'channel.presence' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    await ts.service.presenceProducer.appendAcross(ts.appId, [{ channel: 'room-1', changes: [{ action: 'enter', connectionId: 'c1', clientId: 'ann' }] }]);
    await until('the presence item', () => r.items.length > 0, 30_000);
    expect(r.items[0]).toMatchObject({ source: 'channel.presence', name: 'presence.message', data: { channelId: 'room-1', presence: [{ action: 2, clientId: 'ann' }] } });
  });

  it('delivers occupancy changes to a channel.occupancy rule, with the figures of the channel status; a lifecycle rule does not get them', async () => {
    const ts = await service();
    const r = await receiver();
    const life = await receiver();
    expect((await addRule(ts, httpRule(r.url, { type: 'channel.occupancy', channelFilter: '^occ-' }))).status).toBe(201);
    expect((await addRule(ts, httpRule(life.url, { type: 'channel.lifecycle', channelFilter: '^occ-' }))).status).toBe(201);
    await until('the rules to run', () => ts.service.readiness().some((c) => /2 webhook rules/.test(c.detail)), 20_000);
    await ts.service.presenceProducer.appendAcross(ts.appId, [{ channel: 'other-occ', changes: [{ action: 'enter', connectionId: 'c0', clientId: 'zed' }] }]);
    await ts.service.presenceProducer.appendAcross(ts.appId, [{ channel: 'occ-1', changes: [{ action: 'enter', connectionId: 'c1', clientId: 'ann' }, { action: 'enter', connectionId: 'c2', clientId: 'bob' }] }]);
    type Metrics = Record<string, number>;
    const metricsOf = (i: { data: unknown }) => (i.data as { status?: { occupancy?: { metrics?: Metrics } } }).status?.occupancy?.metrics;
    await until('an occupancy item with both members', () => r.items.some((i) => metricsOf(i)?.presenceMembers === 2), 30_000);
    const item = r.items.find((i) => metricsOf(i)?.presenceMembers === 2)!;
    expect(item).toMatchObject({ source: 'channel.occupancy', name: 'channel.occupancy', data: { channelId: 'occ-1' } });
    expect(r.items.every((i) => i.source === 'channel.occupancy' && i.data.channelId === 'occ-1')).toBe(true);
    const status = await ts.service.app.inject({ method: 'GET', url: '/channels/occ-1', headers: { authorization: ts.auth } });
    expect(status.json().status.occupancy.metrics).toEqual(metricsOf(item));
    await until('the lifecycle rule to get the opening', () => life.items.some((i) => i.name === 'channel.opened'), 30_000);
    expect(life.items.filter((i) => i.name === 'channel.occupancy')).toHaveLength(0);
  });
});

describe(`webhook rules from the apps topic (${testServiceMode})`, () => {
  it('starts a rule that arrives on the apps topic from elsewhere (as another instance adds it) and stops it when it is removed there', async () => {
    const ts = await service();
    const r = await receiver();
    const rule = { ...httpRule(r.url, { channelFilter: '^topic-' }), id: 'fromtopic' } as unknown as WebhookRule;
    // Appended as another instance's key management does; this instance only reads it back.
    await ts.service.log.append(Topics.apps, [{ key: ts.appId, value: encodeEvent({ type: 'rule.created', appId: ts.appId, rule }), timestamp: Date.now() }]);
    await until('the rule to run', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /1 webhook rule/.test(c.detail)), 30_000);
    await publish(ts, 'topic-1', ['x']);
    await until('the message', () => r.items.length === 1, 30_000);
    const lag = (await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(lag).toMatch(new RegExp(`^cm_consumer_lag_records\\{consumer="webhook-${ts.appId}-fromtopic"\\} \\d+$`, 'm'));
    await ts.service.log.append(Topics.apps, [{ key: ts.appId, value: encodeEvent({ type: 'rule.deleted', appId: ts.appId, ruleId: 'fromtopic' }), timestamp: Date.now() }]);
    await until('the rule to stop', () => ts.service.readiness().some((c) => c.name === 'webhooks' && /0 webhook rules/.test(c.detail)), 30_000);
    expect((await ts.service.app.inject({ method: 'GET', url: '/metrics' })).body).not.toMatch(/consumer="webhook-/);
  });
});

describe(`webhook msgpack targets (${testServiceMode})`, () => {
  it('posts a msgpack target MessagePack bodies (application/x-msgpack), binary data as bytes, signed over the body bytes', async () => {
    const ts = await service();
    const r = await receiver({ [ts.keyName]: ts.secret });
    expect((await addRule(ts, httpRule(r.url, { format: 'msgpack', signingKeyId: ts.keyName, channelFilter: '^packed-' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    // Published in MessagePack, as the SDK does: the bytes stay bytes.
    const res = await ts.service.app.inject({
      method: 'POST',
      url: '/channels/packed-1/messages',
      headers: { authorization: ts.auth, 'content-type': 'application/x-msgpack' },
      payload: Buffer.from(encode([{ name: 'text', data: 'hello' }, { name: 'bytes', data: new Uint8Array([0, 1, 2, 255]) }])),
    });
    expect(res.statusCode, res.body).toBe(201);
    await until('the item', () => r.items.length === 1, 30_000);
    expect(r.contentTypes).toEqual(['application/x-msgpack']);
    expect(r.signedRequests).toBe(1);
    expect(r.badSignatures).toBe(0);
    expect(r.items[0]).toMatchObject({ source: 'channel.message', data: { channelId: 'packed-1' } });
    const [text, bytes] = r.items[0].data.messages!;
    expect(text).toMatchObject({ name: 'text', data: 'hello' });
    expect(bytes.name).toBe('bytes');
    expect(bytes.data).toBeInstanceOf(Uint8Array);
    expect([...(bytes.data as Uint8Array)]).toEqual([0, 1, 2, 255]);
    expect((bytes as { encoding?: string }).encoding).toBeUndefined();
  });

  it('refuses a target format other than json or msgpack with 40001', async () => {
    const ts = await service();
    const bad = await addRule(ts, httpRule('https://example.com/h', { format: 'xml' }));
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 40001 } });
    expect((bad.body.error as { message: string }).message).toMatch(/"json" or "msgpack"/);
  });
});

describe(`webhook presence actions (${testServiceMode})`, () => {
  it('sends an enter by a member already present (same clientId and connection) as update (4), to a rule added after the first enter too', async () => {
    const ts = await service();
    const r = await receiver();
    expect((await addRule(ts, httpRule(r.url, { type: 'channel.presence', channelFilter: '^reenter-' }))).status).toBe(201);
    await until('the rule to run', () => ts.service.readiness().some((c) => /1 webhook rule/.test(c.detail)), 20_000);
    const change = (action: 'enter' | 'leave', connectionId: string, data?: string) => ({ action, connectionId, clientId: 'ann', ...(data ? { data } : {}) });
    await ts.service.presenceProducer.appendAcross(ts.appId, [{ channel: 'reenter-1', changes: [change('enter', 'c1', 'a')] }]);
    await until('the first enter', () => r.items.length === 1, 30_000);
    // A second rule starts after that enter: it learns from the log that ann is present on c1.
    const late = await receiver();
    expect((await addRule(ts, httpRule(late.url, { type: 'channel.presence', channelFilter: '^reenter-' }))).status).toBe(201);
    await until('both rules to run', () => ts.service.readiness().some((c) => /2 webhook rules/.test(c.detail)), 20_000);
    await ts.service.presenceProducer.appendAcross(ts.appId, [
      { channel: 'reenter-1', changes: [change('enter', 'c1', 'b'), change('enter', 'c2', 'c'), change('leave', 'c1'), change('enter', 'c1', 'd')] },
    ]);
    const actions = (rec: Receiver) => rec.items.map((i) => `${i.data.presence![0].action}:${(i.data.presence![0] as { data?: string }).data ?? ''}`);
    await until('all five changes at the first receiver', () => r.items.length === 5, 30_000);
    await until('all four changes at the second', () => late.items.length === 4, 30_000);
    // enter a; re-enter b (update); enter on another connection c; leave; enter again d.
    expect(actions(r)).toEqual(['2:a', '4:b', '2:c', '3:', '2:d']);
    expect(actions(late)).toEqual(['4:b', '2:c', '3:', '2:d']);
  });
});
