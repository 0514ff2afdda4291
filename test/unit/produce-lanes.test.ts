// The Kafka log's producers' queues (src/log/kafka/produce-lanes.ts), with the request itself
// stood in for (the requests against a real broker: test/contract/log-kafka-in-flight.test.ts).
import { describe, expect, it, vi } from 'vitest';
import { ProduceLanes, type Produce } from '../../src/log/kafka/produce-lanes.js';
import type { AppendRecord } from '../../src/log/port.js';

const rec = (key: string, bytes = 10): AppendRecord => ({ key, value: new Uint8Array(bytes), timestamp: 1 });

describe('producers\' queues', () => {
  it('an append that timed out leaves its queue at once, while the request before it still hangs; its records are never sent', async () => {
    const sent: number[] = [];
    let answer: () => void = () => undefined;
    const produce: Produce = (_topic, _lane, messages) => {
      sent.push(messages.length);
      return new Promise((resolve) => (answer = () => resolve(new Map(messages.map((m) => [m.partition, 0])))));
    };
    const lanes = new ProduceLanes(1, produce, () => false);
    const first = lanes.append('t', 4, [rec('a')], { passed: false });
    const late = { passed: false };
    const second = lanes.append('t', 4, [rec('b'), rec('c')], late);
    expect(lanes.queued('t')).toBe(1);
    late.passed = true;
    lanes.expire('t', late, new Error('timed out'));
    expect(lanes.queued('t')).toBe(0);
    await expect(second).rejects.toThrow('timed out');
    answer();
    expect(await first).toHaveLength(1);
    expect(sent).toEqual([1]);
  });

  it('one append larger than a request goes in several, each record at its own place', async () => {
    const requests: number[] = [];
    const next = new Map<number, number>();
    const produce: Produce = async (_topic, _lane, messages) => {
      requests.push(messages.reduce((n, m) => n + m.record.value.byteLength, 0));
      const base = new Map<number, number>();
      for (const { partition } of messages) {
        if (!base.has(partition)) base.set(partition, next.get(partition) ?? 0);
        next.set(partition, (next.get(partition) ?? 0) + 1);
      }
      return base;
    };
    const lanes = new ProduceLanes(1, produce, () => false);
    const positions = await lanes.append('t', 1, Array.from({ length: 6 }, () => rec('k', 200 * 1024)), { passed: false });
    expect(requests.every((bytes) => bytes <= 512 * 1024)).toBe(true);
    expect(requests.length).toBe(3);
    expect(positions.map((p) => p.offset)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  describe('linger (KAFKA_LINGER_MS): between back-to-back requests only', () => {
    /** A produce whose requests are answered one by one, by the test. */
    function heldProduce(): { produce: Produce; sent: number[]; answer(): void } {
      const waiting: (() => void)[] = [];
      const sent: number[] = [];
      const produce: Produce = (_topic, _lane, messages) => {
        sent.push(messages.length);
        return new Promise((resolve) => waiting.push(() => resolve(new Map(messages.map((m) => [m.partition, 0])))));
      };
      return { produce, sent, answer: () => waiting.shift()!() };
    }
    const ticks = async (n = 5): Promise<void> => {
      for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
    };

    it('a lone append is sent at once, whatever the linger', async () => {
      const { produce, sent, answer } = heldProduce();
      const lanes = new ProduceLanes(1, produce, () => false, { lingerMs: 60_000, lingerRecords: 100 });
      const first = lanes.append('t', 4, [rec('a')], { passed: false });
      expect(sent).toEqual([1]);
      answer();
      expect(await first).toHaveLength(1);
    });

    it('after a request settles, the next waits for more records and goes as one request once lingerRecords wait', async () => {
      const { produce, sent, answer } = heldProduce();
      const lanes = new ProduceLanes(1, produce, () => false, { lingerMs: 60_000, lingerRecords: 5 });
      const first = lanes.append('t', 4, [rec('a')], { passed: false });
      const queued = [lanes.append('t', 4, [rec('b'), rec('c')], { passed: false }), lanes.append('t', 4, [rec('d')], { passed: false })];
      answer();
      await first;
      await ticks();
      expect(sent).toEqual([1]); // lingering: 3 records wait, fewer than 5
      queued.push(lanes.append('t', 4, [rec('e'), rec('f')], { passed: false }));
      await ticks();
      expect(sent).toEqual([1, 5]);
      answer();
      expect((await Promise.all(queued)).flat()).toHaveLength(5);
    });

    it('a producer whose request settled with nothing queued still lingers for the appends on their way; then, given nothing, it is idle again', async () => {
      const { produce, sent, answer } = heldProduce();
      const lanes = new ProduceLanes(1, produce, () => false, { lingerMs: 60_000, lingerRecords: 2 });
      const first = lanes.append('t', 4, [rec('a')], { passed: false });
      answer();
      await first;
      const next = [lanes.append('t', 4, [rec('b')], { passed: false })];
      await ticks();
      expect(sent).toEqual([1]); // lingering: 1 record waits, fewer than 2
      next.push(lanes.append('t', 4, [rec('c')], { passed: false }));
      await ticks();
      expect(sent).toEqual([1, 2]);
      answer();
      await Promise.all(next);
      vi.useFakeTimers();
      try {
        const idle = new ProduceLanes(1, produce, () => false, { lingerMs: 5, lingerRecords: 1000 });
        const lone = idle.append('t', 4, [rec('d')], { passed: false });
        answer();
        await lone;
        await vi.advanceTimersByTimeAsync(5); // its linger over, nothing sent meanwhile: idle
        const later = idle.append('t', 4, [rec('e')], { passed: false });
        expect(sent).toEqual([1, 2, 1, 1]); // sent at once, as a lone append
        answer();
        await later;
      } finally {
        vi.useRealTimers();
      }
    });

    it('past lingerMs the records wait no longer', async () => {
      const { produce, sent, answer } = heldProduce();
      const lanes = new ProduceLanes(1, produce, () => false, { lingerMs: 5, lingerRecords: 1000 });
      const first = lanes.append('t', 4, [rec('a')], { passed: false });
      const second = lanes.append('t', 4, [rec('b')], { passed: false });
      answer();
      await first;
      await expect.poll(() => sent).toEqual([1, 1]);
      answer();
      expect(await second).toHaveLength(1);
    });

    it('an append that times out while its producer lingers leaves the queue and is never sent', async () => {
      const { produce, sent, answer } = heldProduce();
      const lanes = new ProduceLanes(1, produce, () => false, { lingerMs: 60_000, lingerRecords: 3 });
      const first = lanes.append('t', 4, [rec('a')], { passed: false });
      const late = { passed: false };
      const second = lanes.append('t', 4, [rec('b')], late);
      answer();
      await first;
      await ticks();
      late.passed = true;
      lanes.expire('t', late, new Error('timed out'));
      await expect(second).rejects.toThrow('timed out');
      const third = lanes.append('t', 4, [rec('c'), rec('d'), rec('e')], { passed: false });
      await ticks();
      expect(sent).toEqual([1, 3]); // the expired record is not counted towards lingerRecords, nor sent
      answer();
      expect(await third).toHaveLength(3);
    });
  });
});
