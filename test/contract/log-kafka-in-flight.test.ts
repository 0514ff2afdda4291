// Issue 23, item 3: the Kafka log keeps several produce requests in flight (one per producer, each
// producer owning a share of the partitions). What must hold: each key's records land in call order
// and once each, and a produce request that fails fails only its own producer's records.
import { randomBytes } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { partitionFor } from '../../src/log/partitioner.js';
import { PartialAppendError, Topics, type AppendRecord, type LogPosition, type LogRecord } from '../../src/log/port.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const topic = Topics.messages;
const enc = new TextEncoder();
const dec = new TextDecoder();
const NOW = 1_700_000_000_000;

const rec = (key: string, value: string, timestamp = NOW): AppendRecord => ({ key, value: enc.encode(value), timestamp });

/** Every record of the topic, partition by partition, in offset order. */
async function readAll(log: KafkaLog): Promise<LogRecord[]> {
  const out: LogRecord[] = [];
  for (const [partition, end] of await log.endOffsets(topic)) {
    for (let from = 0; from < end; ) {
      const batch = await log.read(topic, partition, from, end - from);
      if (batch.length === 0) throw new Error(`partition ${partition}: nothing from ${from} though it ends at ${end}`);
      out.push(...batch);
      from = batch.at(-1)!.offset + 1;
    }
  }
  return out;
}

/** One key per partition of `partitions`. */
function keyPerPartition(partitions: number): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < partitions; i++) {
    const key = `ch-${i}`;
    if (!keys.some((k) => partitionFor(k, partitions) === partitionFor(key, partitions))) keys.push(key);
  }
  return keys.sort((a, b) => partitionFor(a, partitions) - partitionFor(b, partitions));
}

describeWithInfra('KafkaLog with produce requests in flight together', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  const open = (producers: number): KafkaLog => {
    const log = new KafkaLog({
      brokers,
      clientId: 'log-in-flight',
      topicPrefix: `t-${randomBytes(4).toString('hex')}-`,
      idempotent: !mock,
      replicationFactor: mock ? undefined : 1,
      producers,
      appendTimeoutMs: 20_000,
    });
    logs.push(log);
    return log;
  };
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
  });

  it('appends in flight together land each key\'s records in call order, each once, where their positions say', { timeout: 60_000 }, async () => {
    const log = open(4);
    expect(log.maxAppendsInFlight).toBeGreaterThan(1);
    const keys = Array.from({ length: 30 }, (_, i) => `app:ch-${i}`);
    const sent = new Map<string, number>(); // per key, records appended so far
    const appends: AppendRecord[][] = [];
    for (let a = 0; a < 120; a++) {
      appends.push(
        Array.from({ length: 8 }, (_, i) => {
          const key = keys[(a * 7 + i * 11) % keys.length];
          const n = sent.get(key) ?? 0;
          sent.set(key, n + 1);
          return rec(key, `${key}#${n}`, NOW + a);
        }),
      );
    }
    // Not awaited one by one: all 120 are in the log's hands at once.
    const results = await Promise.all(appends.map((records) => log.append(topic, records)));

    const stored = await readAll(log);
    expect(stored).toHaveLength(120 * 8);
    const at = new Map(stored.map((r) => [`${r.partition}:${r.offset}`, r]));
    for (const [a, positions] of results.entries()) {
      for (const [i, p] of positions.entries()) expect(dec.decode(at.get(`${p.partition}:${p.offset}`)!.value)).toBe(dec.decode(appends[a][i].value));
    }
    for (const key of keys) {
      const mine = stored.filter((r) => r.key === key).map((r) => dec.decode(r.value));
      expect(mine).toEqual(Array.from({ length: sent.get(key)! }, (_, n) => `${key}#${n}`));
    }
  });

  it('a produce request that fails fails only its own producer\'s records: the others are written, and later appends go on in order', { timeout: 60_000 }, async () => {
    const log = open(2);
    const partitions = await log.partitions(topic);
    expect(partitions).toBeGreaterThanOrEqual(2);
    const keys = keyPerPartition(partitions);
    const refusedLane = partitionFor(keys[0], partitions) % 2;
    const inRefusedLane = (key: string): boolean => partitionFor(key, partitions) % 2 === refusedLane;
    // kafkajs cannot encode this timestamp (it is no integer in its notation), so the request of
    // the producer that owns keys[0]'s partition fails before it is sent; the others go.
    const records = [rec(keys[0], 'refused', 1e21), ...keys.map((k) => rec(k, `${k} first`))];
    const failure = await log.append(topic, records).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(PartialAppendError);
    const written = (failure as PartialAppendError).positions;
    expect(written).toHaveLength(records.length);
    for (const [i, r] of records.entries()) expect(written[i] === undefined, r.key).toBe(inRefusedLane(r.key));

    // Later appends, to every key, are written after what was.
    const later = await log.append(topic, keys.map((k) => rec(k, `${k} second`)));
    const stored = await readAll(log);
    for (const key of keys) {
      const mine = stored.filter((r) => r.key === key).map((r) => dec.decode(r.value));
      expect(mine).toEqual(inRefusedLane(key) ? [`${key} second`] : [`${key} first`, `${key} second`]);
    }
    for (const [i, p] of later.entries()) {
      const before = written[i + 1] as LogPosition | undefined;
      if (before) expect(p.offset).toBeGreaterThan(before.offset);
    }
  });
  it('an append whose records for a partition add up past the broker\'s 1 MiB batch goes in requests of at most 512 KiB, each record at the offset its position says', async () => {
    const log = open(1);
    // What each produce request carried, per partition (the real request, watched on its way).
    const requests: Map<number, number>[] = [];
    const internal = log as unknown as { produce(t: string, lane: number, m: { record: AppendRecord; partition: number }[]): Promise<Map<number, number>> };
    const produce = internal.produce.bind(log);
    internal.produce = (t, lane, messages) => {
      const bytes = new Map<number, number>();
      for (const { record, partition } of messages) bytes.set(partition, (bytes.get(partition) ?? 0) + record.value.byteLength + record.key.length);
      requests.push(bytes);
      return produce(t, lane, messages);
    };
    const [a, b] = keyPerPartition(4);
    // As a group commit gathers them: several clients' 200 KiB publishes, most on one partition.
    const records = Array.from({ length: 12 }, (_, i) => rec(i % 4 === 3 ? b : a, `${i}:${'x'.repeat(200 * 1024)}`));
    const positions = await log.append(topic, records);
    expect(requests.length).toBeGreaterThan(1);
    for (const request of requests) for (const bytes of request.values()) expect(bytes).toBeLessThanOrEqual(512 * 1024);
    const read = await readAll(log);
    records.forEach((r, i) => {
      const found = read.find((x) => x.partition === positions[i].partition && x.offset === positions[i].offset)!;
      expect(dec.decode(found.value).split(':')[0]).toBe(String(i));
    });
    expect(read).toHaveLength(12);
  }, 60_000);
});
