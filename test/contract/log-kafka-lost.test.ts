// Records the Kafka log deleted before a consumer applied them (src/log/lost-records.ts; README:
// Records the log deleted before they were applied). librdkafka's mock broker keeps ~5 MiB of a
// partition and deletes the oldest records past that, read or not: appended before a consumer
// starts, they are gone when it reads. Before, kafkajs started again at the log's start and the
// consumer was handed what followed with a warning, nothing told its owner, and when nothing
// followed (the partition emptied) no batch ever came: its position stayed before the lost records
// for good (its lag, and every read waiting for them). Now the consumer goes on from the log's
// start, tells its owner (ConsumeOptions.lost) before the next batch, and the log logs each range
// once and counts each record once, however many of its consumers meet it. A Kafka cluster deletes
// only on retention's schedule: the file runs on the mock broker.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { lagOf, Topics, type LogRecord } from '../../src/log/port.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const topic = Topics.messages;
const MiB = 1024 * 1024;
const onCluster = kafka !== undefined && !kafka.mock;
if (onCluster) describe('KafkaLog: records deleted before a consumer applied them', () => it.skip('needs librdkafka\'s mock broker (infra/local), which keeps ~5 MiB of a partition'));

if (!onCluster) describeWithInfra('KafkaLog: records deleted before a consumer applied them (the mock broker\'s 5 MiB a partition)', 'Kafka', kafka, ({ brokers }) => {
  const logs: KafkaLog[] = [];
  const lines: Record<string, unknown>[] = [];
  const logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: (obj: object, msg?: string) => void lines.push({ ...obj, msg }),
  };
  const open = (prefix: string): KafkaLog => {
    const log = new KafkaLog({ brokers, clientId: 'log-lost', topicPrefix: prefix, idempotent: false, fetchMaxWaitMs: 100, sessionTimeoutMs: 6_000, logger });
    logs.push(log);
    return log;
  };
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
    lines.length = 0;
  });
  const told = () => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('log records were deleted'));
  const key = 'app:lost';

  it('a consumer behind the log\'s start is told where it goes on, then handed the records kept; the loss is logged and counted once for two consumers', { timeout: 60_000 }, async () => {
    const prefix = `lost-${randomBytes(4).toString('hex')}-`;
    const log = open(prefix);
    // Five records of 2 MiB: the mock keeps the last two of them (or so).
    for (let i = 0; i < 5; i++) await log.append(topic, [{ key, value: new Uint8Array(2 * MiB).fill(i), timestamp: Date.now() }]);
    const partition = partitionFor(key, await log.partitions(topic));
    const low = (await log.lowOffsets(topic)).get(partition)!;
    expect(low).toBeGreaterThan(0);
    const consumer = (name: string) => {
      const events: string[] = [];
      const subscription = log.consume({
        topic,
        consumer: `${name}-${randomBytes(4).toString('hex')}`,
        from: new Map(),
        handle: (records: LogRecord[]) => void events.push(...records.map((r) => `record ${r.offset}`)),
        lost: (p, next) => void events.push(`lost ${p} ${next}`),
      });
      return { events, subscription };
    };
    const one = consumer('one');
    const two = consumer('two');
    const expected = [`lost ${partition} ${low}`, ...Array.from({ length: 5 - low }, (_, i) => `record ${low + i}`)];
    await expect.poll(() => one.events, { timeout: 30_000 }).toEqual(expected);
    await expect.poll(() => two.events, { timeout: 30_000 }).toEqual(expected);
    expect(one.subscription.positions().get(partition)).toBe(5);
    expect(lagOf(one.subscription)).toBe(0);
    expect(told()).toEqual([expect.objectContaining({ topic: `${prefix}${topic}`, partition, from: 0, to: low, records: low })]);
    expect(log.lostRecords()).toEqual([{ topic, count: low }]);
  });

  it('a partition emptied (nothing follows the lost records): the consumer, a shared one too, moves to the log\'s end and its lag is 0', { timeout: 60_000 }, async () => {
    const log = open(`lost-${randomBytes(4).toString('hex')}-`);
    const channelish = channelKey('app', 'emptied');
    await log.append(topic, [{ key: channelish, value: new Uint8Array(1024), timestamp: Date.now() }]);
    // One record larger than the mock keeps of a partition: none of its records stay.
    await log.append(topic, [{ key: channelish, value: new Uint8Array(8 * MiB), timestamp: Date.now() }]);
    const partition = partitionFor(channelish, await log.partitions(topic));
    const end = (await log.endOffsets(topic)).get(partition)!;
    expect((await log.lowOffsets(topic)).get(partition)).toBe(end);
    const lost: [number, number][] = [];
    const all = log.consume({ topic, consumer: `all-${randomBytes(4).toString('hex')}`, from: new Map(), handle: () => undefined, lost: (p, next) => void lost.push([p, next]) });
    const shared = log.consume({
      topic,
      consumer: `shared-${randomBytes(4).toString('hex')}`,
      from: new Map(),
      handle: () => undefined,
      shared: { from: (partitions) => new Map(partitions.map((p) => [p, 0])) },
      lost: (p, next) => void lost.push([p, next]),
    });
    await all.caughtUp;
    await expect.poll(() => all.positions().get(partition), { timeout: 30_000 }).toBe(end);
    await expect.poll(() => shared.positions().get(partition), { timeout: 30_000 }).toBe(end);
    expect(lagOf(all)).toBe(0);
    expect(lagOf(shared)).toBe(0);
    expect(lost).toEqual([[partition, end], [partition, end]]);
    expect(told()).toEqual([expect.objectContaining({ partition, from: 0, to: end, records: end })]);
    expect(log.lostRecords()).toEqual([{ topic, count: end }]);
  });
});
