import { describe, expect, it } from 'vitest';
import { logLevel } from 'kafkajs';
import { kafkajsLogging } from '../../src/log/kafka/kafka-logger.js';

// kafkajs's own lines reach the service's logger: its errors as errors, except the ones an
// ordinary rebalance of a consumer group makes (every instance starting or stopping makes some).

type Entry = { level: logLevel; message: string; extra?: Record<string, unknown>; at?: number };

function loggedWithFields(entries: Entry[]): [string, string, Record<string, unknown>][] {
  const lines: [string, string, Record<string, unknown>][] = [];
  const sink = (level: string) => (fields: object, msg?: string) => lines.push([level, msg ?? '', fields as Record<string, unknown>]);
  let clock = 0;
  const { logCreator } = kafkajsLogging({ debug: sink('debug'), info: sink('info'), warn: sink('warn'), error: sink('error') }, () => clock);
  const log = logCreator!(logLevel.WARN);
  for (const { level, message, extra, at } of entries) {
    clock = at ?? clock;
    log({ namespace: 'Runner', level, label: 'ERROR', log: { timestamp: '', logger: 'kafkajs', message, ...extra } });
  }
  return lines;
}

const logged = (entries: Entry[]): [string, string][] => loggedWithFields(entries).map(([level, msg]) => [level, msg]);

describe('kafkajs logging', () => {
  it('a rebalance is logged at info: the runner re-joining, a heartbeat answered REBALANCE_IN_PROGRESS', () => {
    expect(
      logged([
        { level: logLevel.ERROR, message: 'The group is rebalancing, re-joining', extra: { groupId: 'g', error: 'The group is rebalancing, so a rejoin is needed' } },
        { level: logLevel.ERROR, message: 'Response Heartbeat(key: 12, version: 3)', extra: { error: 'The group is rebalancing, so a rejoin is needed' } },
      ]),
    ).toEqual([
      ['info', 'The group is rebalancing, re-joining'],
      ['info', 'Response Heartbeat(key: 12, version: 3)'],
    ]);
  });

  it('a fetch of an offset the log deleted is a warning: the consumer logs what was lost itself (src/log/lost-records.ts)', () => {
    expect(
      logged([
        { level: logLevel.ERROR, message: 'Response Fetch(key: 1, version: 11)', extra: { error: 'The requested offset is not within the range of offsets maintained by the server' } },
        { level: logLevel.ERROR, message: 'Offset out of range, resetting to default offset', extra: { topic: 't', partition: 2 } },
      ]),
    ).toEqual([
      ['warn', 'Response Fetch(key: 1, version: 11)'],
      ['warn', 'Offset out of range, resetting to default offset'],
    ]);
  });

  it('other errors stay errors, warnings warnings', () => {
    expect(
      logged([
        { level: logLevel.ERROR, message: 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', extra: { broker: '127.0.0.1:9092' } },
        { level: logLevel.ERROR, message: 'Response Produce(key: 0, version: 7)', extra: { error: 'This server does not host this topic-partition' } },
        { level: logLevel.WARN, message: 'KafkaJS v2.0.0 switched default partitioner' },
      ]),
    ).toEqual([
      ['error', 'Connection error: connect ECONNREFUSED 127.0.0.1:9092'],
      ['error', 'Response Produce(key: 0, version: 7)'],
      ['warn', 'KafkaJS v2.0.0 switched default partitioner'],
    ]);
  });

  it('a broker that cannot be reached is logged at most once a second, each line saying how many it stands for', () => {
    const refused = (at: number): Entry => ({ level: logLevel.ERROR, message: 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', extra: { broker: '127.0.0.1:9092' }, at });
    const seed = (at: number): Entry => ({ level: logLevel.ERROR, message: 'Failed to connect to seed broker, trying another broker from the list: Connection error: connect ECONNREFUSED 127.0.0.1:9092', at });
    // 50 retries a second for 2.5 s, two kinds of line, as kafkajs logs an outage; another error meanwhile.
    const entries: Entry[] = [];
    for (let at = 0; at < 2_500; at += 20) entries.push(refused(at), seed(at));
    entries.splice(10, 0, { level: logLevel.ERROR, message: 'Response Produce(key: 0, version: 7)', extra: { error: 'This server does not host this topic-partition' }, at: 80 });
    const lines = loggedWithFields(entries);
    expect(lines.map(([level, msg, fields]) => [level, msg.slice(0, 16), fields.repeated])).toEqual([
      ['error', 'Connection error', 1],
      ['error', 'Response Produce', undefined],
      ['error', 'Connection error', 100],
      ['error', 'Connection error', 100],
    ]);
    // Every line of the outage is counted once: the last second's 49 are carried by the next line.
    expect(lines.reduce((n, [, , f]) => n + ((f.repeated as number | undefined) ?? 0), 0)).toBe(entries.length - 1 - 49);
  });
});
