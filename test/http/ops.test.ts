// Operations routes (issue 13): GET /health, GET /ready, GET /metrics, and CORS for browsers.
import type { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedAdapters } from '../../src/service.js';
import { parseConfig } from '../../src/config.js';
import { Topics, type Log } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { basic, ready, startTestService, testServiceMode, uniqueChannel, type TestService, listening } from '../helpers/service.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';
import { until } from '../faults/publish-load.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ CORS_ORIGINS: 'https://app.example.com,http://localhost:3000' });
});
afterAll(() => t.close());

const publish = (s: TestService, channel: string, data = 'hello') =>
  s.service.app.inject({
    method: 'POST',
    url: `/channels/${channel}/messages`,
    headers: { authorization: s.auth, 'content-type': 'application/json' },
    payload: JSON.stringify({ name: 'm', data }),
  });

/** One sample of a metric line (`name{labels} value`), or undefined. */
const sample = (text: string, name: string, labels: Record<string, string> = {}): number | undefined => {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
};

/**
 * A service on the embedded log whose consumer named `consumer` waits at a gate, closed once the
 * service has started and until `release()`: its lag grows while the others go on.
 */
async function startWithGatedConsumer(consumer: string): Promise<{ s: TestService; release: () => void }> {
  let open: () => void = () => {};
  let gate: Promise<void> | undefined;
  const s = await startTestService(
    { READY_MAX_LAG: '2' },
    {
      adapters: (dataDir) => {
        const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir }));
        const log = adapters.log;
        const held: Log = Object.assign(Object.create(Object.getPrototypeOf(log)), log, {
          consume: (options: Parameters<Log['consume']>[0]) =>
            log.consume({
              ...options,
              handle: async (records) => {
                if (options.consumer === consumer && gate) await gate;
                return options.handle(records);
              },
            }),
        });
        return { ...adapters, log: held };
      },
    },
  );
  gate = new Promise((r) => (open = r));
  return {
    s,
    release: () => {
      gate = undefined;
      open();
    },
  };
}

describe('GET /health and GET /ready', () => {
  it('/health answers 200 without credentials', async () => {
    const res = await t.service.app.inject({ method: 'GET', url: '/health' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('/ready answers 200 with its checks when the log is writable and the consumers caught up', async () => {
    await publish(t, uniqueChannel());
    // A production instance is not ready until its consumers read the log (some 3 s after its start: README, Health).
    await ready(t);
    const res = await t.service.app.inject({ method: 'GET', url: '/ready' });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { status: string; checks: { name: string; ok: boolean }[] };
    expect(body.status).toBe('ready');
    expect(body.checks.map((c) => c.name)).toEqual(['shutdown', 'log', 'consumers', 'webhooks']);
    expect(body.checks.every((c) => c.ok)).toBe(true);
  });

  it('/ready answers 503 (50005, error headers) while a consumer is more than READY_MAX_LAG behind, and 200 once it caught up', async () => {
    // The history projection's consumer waits at a gate (a slow store, say) while it is closed.
    const { s, release } = await startWithGatedConsumer('history');
    try {
      const channel = uniqueChannel();
      for (let i = 0; i < 5; i++) expect((await publish(s, channel, `m${i}`)).statusCode).toBe(201);
      const res = await s.service.app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['x-service-errorcode']).toBe('50005');
      const body = res.json() as { error: { code: number; message: string }; checks: { name: string; ok: boolean; detail: string }[] };
      expect(body.error.code).toBe(50005);
      expect(body.error.message).toMatch(/history \d+ records behind/);
      expect(body.checks.find((c) => c.name === 'consumers')?.ok).toBe(false);
      const metrics = (await s.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(sample(metrics, 'cm_consumer_lag_records', { consumer: 'history' })).toBeGreaterThan(2);
      release();
      let ready = 503;
      while (ready !== 200) {
        await new Promise((r) => setTimeout(r, 20));
        ready = (await s.service.app.inject({ method: 'GET', url: '/ready' })).statusCode;
      }
      expect(ready).toBe(200);
    } finally {
      release();
      await s.close();
    }
  });

  it('/ready answers 503 naming connection-events while the connection events consumer is behind, /metrics gives its lag, and both recover', async () => {
    // The connection events' consumer (embedded: one of their own, `connections`) waits at a gate while it is closed.
    const { s, release } = await startWithGatedConsumer('connections');
    try {
      const detaches = [...Array(5).keys()].map((i) => ({ key: `gone-${i}`, build: () => encodeEvent({ type: 'channel.detached', appId: 'none', channel: `gone-${i}`, connectionId: 'nobody' }) }));
      await s.service.batcher.append(Topics.connections, detaches);
      let res = await s.service.app.inject({ method: 'GET', url: '/ready' });
      while (res.statusCode !== 503) {
        await new Promise((r) => setTimeout(r, 20));
        res = await s.service.app.inject({ method: 'GET', url: '/ready' });
      }
      expect(res.json().error.message).toMatch(/connection-events \d+ records behind/);
      const metrics = (await s.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(sample(metrics, 'cm_consumer_lag_records', { consumer: 'connection-events' })).toBeGreaterThan(2);
      release();
      let ready = 503;
      while (ready !== 200) {
        await new Promise((r) => setTimeout(r, 20));
        ready = (await s.service.app.inject({ method: 'GET', url: '/ready' })).statusCode;
      }
      expect(sample((await s.service.app.inject({ method: 'GET', url: '/metrics' })).body, 'cm_consumer_lag_records', { consumer: 'connection-events' })).toBe(0);
    } finally {
      release();
      await s.close();
    }
  });

  it('/ready answers 503 while the log refuses appends, and 200 after an append succeeds again', async () => {
    let failing = false;
    const s = await startTestService(
      {},
      {
        adapters: (dataDir) => {
          const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir }));
          const log = adapters.log;
          const faulty: Log = Object.assign(Object.create(Object.getPrototypeOf(log)), log, {
            append: (topic: Parameters<Log['append']>[0], records: Parameters<Log['append']>[1]) =>
              failing ? Promise.reject(new Error('disk I/O error (injected)')) : log.append(topic, records),
          });
          return { ...adapters, log: faulty };
        },
      },
    );
    try {
      failing = true;
      expect((await publish(s, uniqueChannel())).statusCode).toBeGreaterThanOrEqual(500);
      const res = await s.service.app.inject({ method: 'GET', url: '/ready' });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.message).toMatch(/log \(the last embedded log append failed: disk I\/O error \(injected\)\)/);
      failing = false;
      expect((await publish(s, uniqueChannel())).statusCode).toBe(201);
      expect((await s.service.app.inject({ method: 'GET', url: '/ready' })).statusCode).toBe(200);
    } finally {
      await s.close();
    }
  });

  // Its subject, the SQLite writer thread, is the embedded log's alone: skipped in production mode.
  it.runIf(testServiceMode === 'embedded')('/ready answers 503 for good once the embedded log\'s writer thread is gone (no append commits until a restart), before any append fails', async () => {
    const s = await startTestService();
    try {
      const { worker } = (s.service.log as unknown as { writer: { worker: Worker } }).writer;
      await worker.terminate();
      for (const attempt of [0, 1]) {
        const res = await s.service.app.inject({ method: 'GET', url: '/ready' });
        expect(res.statusCode, `attempt ${attempt}`).toBe(503);
        expect(res.json().error.message).toMatch(/the embedded log cannot write until the service restarts: the log writer thread exited/);
        expect((await publish(s, uniqueChannel())).statusCode).toBeGreaterThanOrEqual(500);
      }
    } finally {
      await s.close().catch(() => undefined);
    }
  });

  it('/ready says "shutting down" once close has begun', async () => {
    const s = await startTestService();
    const closed = s.close();
    const check = s.service.readiness().find((c) => c.name === 'shutdown');
    expect(check).toEqual({ name: 'shutdown', ok: false, detail: 'shutting down' });
    await closed;
  });
});

describe('GET /metrics (Prometheus)', () => {
  it('counts requests and latency per route, log appends and their sizes, tails, connections and the realtime gateway', async () => {
    const channel = uniqueChannel();
    for (let i = 0; i < 3; i++) expect((await publish(t, channel)).statusCode).toBe(201);
    await t.service.app.inject({ method: 'GET', url: `/channels/${channel}/messages`, headers: { authorization: t.auth } });
    const res = await t.service.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.body;
    const route = { method: 'POST', route: '/channels/:channelId/messages' };
    expect(sample(text, 'cm_http_requests_total', { ...route, status: '201' })).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'cm_http_request_duration_seconds_count', route)).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'cm_http_request_duration_seconds_bucket', { ...route, le: '+Inf' })).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'cm_http_requests_total', { method: 'GET', route: '/channels/:channelId/messages', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'cm_log_append_duration_seconds_count', { topic: 'messages' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'cm_log_append_records_sum', { topic: 'messages' })).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'cm_log_writable')).toBe(1);
    expect(sample(text, 'cm_consumer_lag_records', { consumer: 'history' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'cm_memory_tail_entries', { tail: 'history' })).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'cm_http_open_connections')).toBeGreaterThanOrEqual(0);
    for (const name of ['cm_realtime_sockets', 'cm_realtime_connections', 'cm_realtime_attachments', 'cm_realtime_messages_delivered_total', 'cm_realtime_slow_consumer_disconnects_total']) {
      expect(sample(text, name), name).toBe(0);
    }
    // prom-client's defaults under their standard names, which stock dashboards know
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d+/m);
    // the log and store kinds of the mode the service runs in (TEST_SERVICE_MODE)
    const kinds = testServiceMode === 'production' ? 'log="kafka",store="clickhouse"' : 'log="embedded",store="sqlite"';
    expect(text).toMatch(new RegExp(`^cm_build_info\\{version="\\d+\\.\\d+\\.\\d+",node="v\\d+[^"]*",${kinds}\\} 1$`, 'm'));
    expect(sample(text, 'cm_store_unstored_rows', { projection: 'history' })).toBe(0);
    for (const consumer of ['apps', 'history', 'presence', 'channels-messages', 'channels-presence', 'channels-connections', 'realtime-delivery', 'connection-events']) {
      expect(sample(text, 'cm_consumer_lag_records', { consumer }), consumer).toBeGreaterThanOrEqual(0);
    }
  });

  it('counts messages published by transport: rest, batch (once per channel), realtime', async () => {
    const before = (await t.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    const count = (text: string, transport: string) => sample(text, 'cm_messages_published_total', { transport }) ?? 0;
    await t.service.app.inject({
      method: 'POST',
      url: `/channels/${uniqueChannel()}/messages`,
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      payload: JSON.stringify([{ data: 'one' }, { data: 'two' }]),
    });
    const batch = await t.service.app.inject({
      method: 'POST',
      url: '/messages',
      headers: { authorization: t.auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ channels: [uniqueChannel(), uniqueChannel()], messages: [{ data: 'b' }] }),
    });
    expect(batch.statusCode).toBe(201);
    const after = (await t.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(count(after, 'rest') - count(before, 'rest')).toBe(2);
    expect(count(after, 'batch') - count(before, 'batch')).toBe(2);
    expect(count(after, 'realtime') - count(before, 'realtime')).toBe(0);
  });

  it('counts GET /stats reads answered from memory (hit) and from the store (miss), and the rows held', async () => {
    const before = await t.service.app.inject({ method: 'GET', url: '/metrics' });
    const hits = sample(before.body, 'cm_stats_cache_reads_total', { outcome: 'hit' }) ?? 0;
    const misses = sample(before.body, 'cm_stats_cache_reads_total', { outcome: 'miss' }) ?? 0;
    t.service.statsCache.clear();
    // An app of its own, with nothing published: a write of an app's samples (the other tests' publishes, applied
    // by the stats projection whenever it gets to them) lets no read of that app running meanwhile keep its rows.
    const app = (await t.service.app.inject({ method: 'POST', url: '/apps', payload: { keys: [{}] } })).json();
    const url = `/stats?unit=hour&end=${Date.UTC(2020, 0, 1)}`; // a past hour: no write changes it
    for (let i = 0; i < 2; i++) expect((await t.service.app.inject({ url, headers: { authorization: basic(app.keys[0].keyStr) } })).statusCode).toBe(200);
    const text = (await t.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(sample(text, 'cm_stats_cache_reads_total', { outcome: 'miss' })).toBe(misses + 1);
    expect(sample(text, 'cm_stats_cache_reads_total', { outcome: 'hit' })).toBe(hits + 1);
    expect(sample(text, 'cm_stats_cache_rows')).toBeGreaterThanOrEqual(0);
  });

  it('the route names the pattern, never the channel (labels stay bounded)', async () => {
    const channel = uniqueChannel('secret-name');
    await publish(t, channel);
    const text = (await t.service.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).not.toContain(channel);
  });
});

describe('GET /metrics: the realtime gateway', () => {
  it('counts sockets, connections, attachments and delivered messages', async () => {
    const s = await startTestService();
    let client: RawClient | undefined;
    try {
      const port = await listening(s);
      client = await RawClient.connect(port, { key: s.key });
      const channel = uniqueChannel();
      client.send({ action: Actions.ATTACH, channel });
      await client.next((pm) => pm.action === Actions.ATTACHED);
      expect((await publish(s, channel)).statusCode).toBe(201);
      await client.next((pm) => pm.action === Actions.MESSAGE);
      // Delivery reads every record: on Kafka one appended after the message (the service's own,
      // a channel lifecycle event) may still be on its way when the message arrives: the lag is waited for.
      let text = '';
      await until('realtime delivery\'s lag at 0', async () => {
        text = (await s.service.app.inject({ method: 'GET', url: '/metrics' })).body;
        return sample(text, 'cm_consumer_lag_records', { consumer: 'realtime-delivery' }) === 0;
      }, 10_000, 50);
      expect(sample(text, 'cm_realtime_sockets')).toBe(1);
      expect(sample(text, 'cm_realtime_connections')).toBe(1);
      expect(sample(text, 'cm_realtime_attachments')).toBe(1);
      expect(sample(text, 'cm_realtime_messages_delivered_total')).toBe(1);
      expect(sample(text, 'cm_realtime_slow_consumer_disconnects_total')).toBe(0);
      expect(sample(text, 'cm_consumer_lag_records', { consumer: 'realtime-delivery' })).toBe(0);
      expect(sample(text, 'cm_http_open_connections')).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'cm_realtime_connections_opened_total')).toBe(1);
      expect(sample(text, 'cm_realtime_connections_closed_total')).toBe(0);
      expect((await client.publish(channel, [{ data: 'from realtime' }])).action).toBe(Actions.ACK);
      client.send({ action: Actions.CLOSE });
      await client.next((pm) => pm.action === Actions.CLOSED);
      const after = (await s.service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(sample(after, 'cm_messages_published_total', { transport: 'realtime' })).toBe(1);
      expect(sample(after, 'cm_messages_published_total', { transport: 'rest' })).toBe(1);
      expect(sample(after, 'cm_realtime_connections_closed_total')).toBe(1);
    } finally {
      client?.close();
      await s.close();
    }
  });
});

describe('CORS (@fastify/cors, CORS_ORIGINS)', () => {
  it('a preflight from an allowed origin is answered 204 with the allowed methods, without credentials', async () => {
    const res = await t.service.app.inject({
      method: 'OPTIONS',
      url: '/channels/x/messages',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://app.example.com');
    expect(String(res.headers['access-control-allow-methods'])).toContain('POST');
    expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
  });

  it('a request from an allowed origin gets Access-Control-Allow-Origin and the error headers exposed', async () => {
    const res = await t.service.app.inject({ method: 'GET', url: '/time', headers: { origin: 'http://localhost:3000' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('http://localhost:3000');
    expect(String(res.headers['access-control-expose-headers'])).toContain('X-Ably-ErrorCode');
  });

  it('a request without Origin (an SDK, a server) gets no CORS headers: browsers always send one', async () => {
    const res = await t.service.app.inject({ method: 'GET', url: '/time' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers['access-control-expose-headers']).toBeUndefined();
  });

  it('an OPTIONS request that is no preflight (no Origin) is not answered as one', async () => {
    const res = await t.service.app.inject({ method: 'OPTIONS', url: '/channels/x/messages' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['access-control-allow-methods']).toBeUndefined();
  });

  it('an origin not in CORS_ORIGINS gets no Access-Control-Allow-Origin', async () => {
    const res = await t.service.app.inject({ method: 'GET', url: '/time', headers: { origin: 'https://evil.example.net' } });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('by default any origin may call (CORS_ORIGINS=*); CORS_ORIGINS=none sends no CORS headers', async () => {
    const any = await startTestService();
    const none = await startTestService({ CORS_ORIGINS: 'none' });
    try {
      const a = await any.service.app.inject({ method: 'GET', url: '/time', headers: { origin: 'https://x.example' } });
      expect(a.headers['access-control-allow-origin']).toBe('*');
      const n = await none.service.app.inject({ method: 'GET', url: '/time', headers: { origin: 'https://x.example' } });
      expect(n.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await any.close();
      await none.close();
    }
  });

  it('a bad CORS_ORIGINS entry stops the start with a message that says what to fix', () => {
    expect(() => parseConfig({ CORS_ORIGINS: 'app.example.com' })).toThrowError(/CORS_ORIGINS entry "app.example.com" must be an origin/);
  });
});
