// The Kafka log's producers' queues (src/log/kafka/produce-lanes.ts), with the request itself
// stood in for (the requests against a real broker: test/contract/log-kafka-in-flight.test.ts).
import { describe, expect, it } from 'vitest';
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
});
