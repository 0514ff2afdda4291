// The replay on Kafka writes nothing to the cluster (REQUIRE_INFRA=1 with infra/local/start.sh's
// KAFKA_BROKERS): its log (createTopics: false, as src/cli/replay.ts opens it) makes no topic it
// reads (it made every missing one, with 4 partitions, when pointed at another cluster or at one the
// service never started on) and says so at once; and its export's progress counts the records read.
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { exportKafkaWithProof } from '../../src/audit/kafka-proof.js';
import type { ScopeProgress, ScopeRequest } from '../../src/audit/replay-scope.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();

describeWithInfra('the replay on Kafka, read only', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  afterAll(async () => {
    await Promise.all(logs.map((l) => l.close()));
  });
  const open = (topicPrefix: string, reader: boolean): KafkaLog => {
    const log = new KafkaLog({ brokers, clientId: 'replay-readonly', topicPrefix, idempotent: !reader && !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 200, sessionTimeoutMs: 6_000, ...(reader ? { createTopics: false } : {}) });
    logs.push(log);
    return log;
  };
  const topicsOf = async (prefix: string): Promise<string[]> => {
    const admin = new Kafka({ brokers, clientId: 'replay-readonly-check', logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      return (await admin.listTopics()).filter((t) => t.startsWith(prefix)).sort();
    } finally {
      await admin.disconnect();
    }
  };

  it('a topic the cluster does not hold is an error naming it, and is not made', async () => {
    const prefix = `ro-${randomBytes(4).toString('hex')}-`;
    const reader = open(prefix, true);
    await expect(reader.partitions(Topics.presence)).rejects.toThrow(`Kafka topic ${prefix}presence does not exist at ${brokers.join(',')}, and a reader makes none`);
    await expect(reader.endOffsets(Topics.apps)).rejects.toThrow(/does not exist/);
    expect(await topicsOf(prefix)).toEqual([]);
  }, 60_000);

  it("the service's topics are read as they are; the export's progress counts every record it read, of as many", async () => {
    const prefix = `ro-${randomBytes(4).toString('hex')}-`;
    const writer = open(prefix, false);
    const publish = (channel: string, n: number) => ({
      key: `app1:${channel}`,
      timestamp: 1_000 + n,
      value: encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${n}:0`, timestamp: 1_000 + n, name: 'e' }] }),
    });
    for (let i = 0; i < 4; i++) await writer.append(Topics.messages, [publish('x', i), publish('y', i)]);
    await writer.append(Topics.audit, [{ key: 'checkpoint', timestamp: 2_000, value: new Uint8Array([0]) }]);
    const made = await topicsOf(prefix);

    const reader = open(prefix, true);
    const request: ScopeRequest = { appId: 'app1', channels: { kind: 'channel', name: 'x' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
    let last: ScopeProgress | undefined;
    let text = '';
    for await (const piece of exportKafkaWithProof(reader, request, (p) => (last = { ...p }))) text += piece;
    expect(text.split('\n')[0]).toContain('"export"');
    expect(last!.found).toBe(4);
    expect(last!.read).toBeGreaterThanOrEqual(5); // the channel's four, the checkpoint, and its partition's others
    expect(last!.read).toBe(last!.total);
    expect(await topicsOf(prefix)).toEqual(made);
  }, 60_000);
});
