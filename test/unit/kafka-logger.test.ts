import { describe, expect, it } from 'vitest';
import { logLevel } from 'kafkajs';
import { kafkajsLogging } from '../../src/log/kafka/kafka-logger.js';

// kafkajs's own lines reach the service's logger: its errors as errors, except the ones an
// ordinary rebalance of a consumer group makes (every instance starting or stopping makes some).

function logged(entries: { level: logLevel; message: string; extra?: Record<string, unknown> }[]): [string, string][] {
  const lines: [string, string][] = [];
  const sink = (level: string) => (_fields: object, msg?: string) => lines.push([level, msg ?? '']);
  const { logCreator } = kafkajsLogging({ debug: sink('debug'), info: sink('info'), warn: sink('warn'), error: sink('error') });
  const log = logCreator!(logLevel.WARN);
  for (const { level, message, extra } of entries) log({ namespace: 'Runner', level, label: 'ERROR', log: { timestamp: '', logger: 'kafkajs', message, ...extra } });
  return lines;
}

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
});
