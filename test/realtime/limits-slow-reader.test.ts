// The realtime gateway's limit on what waits for a client that does not read
// (REALTIME_MAX_BUFFERED_BYTES), with the error the README's "Resource limits and isolation" table
// gives; the other limits per connection: limits-connections.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listening, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { Actions, closedWithin, RawClient, sleep } from '../helpers/raw-realtime.js';
import { errorOf, pausable } from './limits-service.js';

const opened: RawClient[] = [];
afterAll(() => {
  for (const c of opened.splice(0)) c.close();
});

describe('a client that does not read', () => {
  const MAX_BUFFERED = 1024 * 1024;
  const AHEAD = 4;
  let slow: TestService;
  let slowPort: number;
  beforeAll(async () => {
    slow = await startTestService({ REALTIME_MAX_BUFFERED_BYTES: String(MAX_BUFFERED) });
    slowPort = await listening(slow);
  });
  afterAll(async () => {
    await slow?.close();
    if (slow) removeDir(slow.dataDir);
  });

  it('gets DISCONNECTED 80020 once REALTIME_MAX_BUFFERED_BYTES wait for it, and is closed; a reader on the same channel gets everything; memory stays bounded', { timeout: 120_000 }, async () => {
    const channel = uniqueChannel('flood');
    const stalled = await Promise.all(Array.from({ length: 8 }, () => RawClient.connect(slowPort, { key: slow.key })));
    // The reader counts what it gets and keeps nothing: this process's memory is measured.
    const reader = await RawClient.connect(slowPort, { key: slow.key }, 'msgpack');
    opened.push(...stalled, reader);
    for (const c of [...stalled, reader]) expect((await c.attach(channel)).action).toBe(Actions.ATTACHED);
    const payload = 'p'.repeat(60_000);
    // Each publish's MESSAGE (eight payloads), not the HEARTBEATs that come meanwhile.
    let delivered = 0;
    reader.ws.removeAllListeners('message');
    reader.ws.on('message', (data: Buffer) => {
      if (data.length > payload.length) delivered++;
    });
    for (const c of stalled) pausable(c).pause();

    const used = (): number => {
      const m = process.memoryUsage();
      return m.heapUsed + m.external;
    };
    const before = used();
    const publishes = 100;
    let grown = 0;
    for (let i = 0; i < publishes; i++) {
      // At most AHEAD publishes ahead of the reader (never of the stalled ones): in production mode
      // the tests' Kafka, librdkafka's mock broker, keeps only a partition's last 5 MB (ten of these
      // records) and drops older ones unread, where a real cluster keeps them for its retention time.
      // A flood further ahead of delivery (its consumer joins its group a few seconds after the
      // start) lost records to the broker, not to the service.
      const behind = Date.now() + 30_000;
      while (delivered < i - AHEAD && Date.now() < behind) await sleep(5);
      expect(delivered, `the reader ${i - delivered} publishes behind`).toBeGreaterThanOrEqual(i - AHEAD);
      const res = await slow.service.app.inject({
        method: 'POST',
        url: `/channels/${channel}/messages`,
        headers: { authorization: slow.auth, 'content-type': 'application/json' },
        payload: JSON.stringify(Array.from({ length: 8 }, (_, j) => ({ name: `m${i}-${j}`, data: payload }))),
      });
      expect(res.statusCode).toBe(201);
      if (i % 10 === 9) grown = Math.max(grown, used() - before);
    }
    const deadline = Date.now() + 30_000;
    while (delivered < publishes && Date.now() < deadline) await sleep(100);
    grown = Math.max(grown, used() - before);
    expect(delivered).toBe(publishes);
    // 48 MB published, held by the history tail too; the 8 stalled sockets may hold 1 MiB and a frame each.
    // Not a measurement: a bound far above what the limit allows, far below 8 copies of the flood.
    expect(grown).toBeLessThan(256 * 1024 * 1024);

    for (const c of stalled) pausable(c).resume();
    for (const c of stalled) {
      await closedWithin(c, 20_000);
      const messages = c.frames.filter((f) => f.action === Actions.MESSAGE).length;
      expect(messages).toBeGreaterThan(0);
      expect(messages).toBeLessThan(publishes);
      const last = c.frames.at(-1)!;
      expect(last.action).toBe(Actions.DISCONNECTED);
      expect(errorOf(last)).toMatchObject({ code: 80020, statusCode: 429 });
      expect(c.undecodable).toEqual([]);
    }
  });
});
