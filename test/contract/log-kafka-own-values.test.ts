// The Kafka log hands its own consumers the values this process appended (kafka-own-values.ts), so
// that an event it encoded is not decoded again. What must hold: a consumer gets exactly the bytes
// Kafka holds, the appended value itself only when it is equal, and another process's records are
// read as they are.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { OwnValues } from '../../src/log/kafka/kafka-own-values.js';
import { CHAIN_HEADER, ProducerChains } from '../../src/log/kafka/kafka-chain.js';
import { Topics, type AppendRecord, type LogRecord } from '../../src/log/port.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const topic = Topics.messages;
const enc = new TextEncoder();
const NOW = 1_700_000_000_000;
const rec = (key: string, value: string): AppendRecord => ({ key, value: enc.encode(value), timestamp: NOW });

describe('OwnValues', () => {
  const headersOf = (records: AppendRecord[]) => new ProducerChains().headersFor('messages', records.map((record) => ({ record, partition: 0 }))).headers;

  it('hands back the appended value when the bytes read are the same, and the bytes read otherwise', () => {
    const own = new OwnValues(() => 5);
    const records = [rec('a', 'one'), rec('a', 'two')];
    const headers = headersOf(records);
    own.sent('t-messages', records.map((record) => ({ record, partition: 0 })), headers);
    const same = Buffer.from('one');
    expect(own.valueOf('t-messages', headers[0], same)).toBe(records[0].value);
    // The same chain link with other bytes (a record that is not the one appended): the bytes read.
    const other = Buffer.from('six');
    expect(own.valueOf('t-messages', headers[0], other)).toBe(other);
    // Another topic, no chain header, an unknown link: the bytes read.
    expect(own.valueOf('t-presence', headers[1], Buffer.from('two'))).not.toBe(records[1].value);
    const plain = Buffer.from('two');
    expect(own.valueOf('t-messages', {}, plain)).toBe(plain);
    expect(own.valueOf('t-messages', { [CHAIN_HEADER]: Buffer.alloc(80) }, plain)).toBe(plain);
  });

  it('keeps a value until each of its readers has read it, and none for a partition no consumer here reads', () => {
    const own = new OwnValues((_, partition) => (partition === 0 ? 2 : 0));
    const records = [rec('a', 'one'), rec('b', 'two')];
    const headers = headersOf(records);
    own.sent('t', records.map((record, i) => ({ record, partition: i })), headers);
    expect(own.valueOf('t', headers[0], Buffer.from('one'))).toBe(records[0].value);
    expect(own.valueOf('t', headers[0], Buffer.from('one'))).toBe(records[0].value);
    expect(own.valueOf('t', headers[0], Buffer.from('one'))).not.toBe(records[0].value);
    expect(own.valueOf('t', headers[1], Buffer.from('two'))).not.toBe(records[1].value);
  });

  it('keeps a bounded number of values per topic, the newest', () => {
    const own = new OwnValues(() => 1);
    const records = Array.from({ length: 5_000 }, (_, i) => rec('k', `v${i}`));
    const headers = headersOf(records);
    own.sent('t', records.map((record) => ({ record, partition: 0 })), headers);
    expect(own.valueOf('t', headers[0], Buffer.from('v0'))).not.toBe(records[0].value);
    expect(own.valueOf('t', headers[4_999], Buffer.from('v4999'))).toBe(records[4_999].value);
  });
});

describeWithInfra('KafkaLog consumers and the values their process appended', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  const open = (prefix: string): KafkaLog => {
    const log = new KafkaLog({ brokers, clientId: 'log-own-values', topicPrefix: prefix, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 100, sessionTimeoutMs: 6_000 });
    logs.push(log);
    return log;
  };
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
  });

  it("a consumer gets this process's appended values themselves, and another process's records as Kafka holds them", { timeout: 60_000 }, async () => {
    const prefix = `t-${randomBytes(4).toString('hex')}-`;
    const mine = open(prefix);
    const theirs = open(prefix);
    const got: LogRecord[] = [];
    const subscription = mine.consume({ topic, consumer: `own-${randomBytes(4).toString('hex')}`, from: new Map(), handle: async (records) => void got.push(...records) });
    await subscription.caughtUp;
    const own = [rec('app:a', 'mine 1'), rec('app:b', 'mine 2')];
    const other = [rec('app:a', 'theirs 1')];
    await mine.append(topic, own);
    await theirs.append(topic, other);
    await expect.poll(() => got.length, { timeout: 30_000 }).toBe(3);
    const byText = new Map(got.map((r) => [Buffer.from(r.value).toString(), r]));
    expect([...byText.keys()].sort()).toEqual(['mine 1', 'mine 2', 'theirs 1']);
    expect(byText.get('mine 1')!.value).toBe(own[0].value);
    expect(byText.get('mine 2')!.value).toBe(own[1].value);
    expect(byText.get('theirs 1')!.value).not.toBe(other[0].value);
    await subscription.stop();
  });
});
