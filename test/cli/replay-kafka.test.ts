// Replay by scope on Kafka (issue 27, item 1): the same reading as on the embedded log, from the
// local Kafka's topics (REQUIRE_INFRA=1 with infra/local/start.sh's KAFKA_BROKERS).
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { appHasEvents, replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();

describeWithInfra('replay by scope on Kafka', 'Kafka', kafka, ({ brokers, mock }) => {
  it('an app\'s prefix, with messages, presence and key events, each line naming its place and credential', async () => {
    const log = new KafkaLog({ brokers, clientId: 'replay-scope', topicPrefix: `r-${randomBytes(4).toString('hex')}-`, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 200, sessionTimeoutMs: 6_000 });
    try {
      const publish = (appId: string, channel: string, name: string, timestamp: number) => ({
        key: `${appId}:${channel}`,
        timestamp,
        value: encodeEvent({ type: 'messages.published', appId, channel, transport: 'rest', keyName: `${appId}.k1`, messages: [{ id: `${name}:0`, timestamp, name, clientId: 'ann' }] }),
      });
      await log.append(Topics.messages, [publish('app1', 'orders:1', 'a', 10), publish('app1', 'orders:2', 'b', 11), publish('app2', 'orders:1', 'x', 12), publish('app1', 'other', 'c', 13), publish('app1', 'orders:1', 'd', 14)]);
      await log.append(Topics.presence, [{ key: 'app1:orders:1', timestamp: 15, value: encodeEvent({ type: 'presence.changed', appId: 'app1', channel: 'orders:1', event: { action: 'enter', id: 'p:0', timestamp: 15, clientId: 'ann', connectionId: 'conn-1' } }) }]);
      await log.append(Topics.apps, [{ key: 'app1', timestamp: 16, value: encodeEvent({ type: 'key.revoked', appId: 'app1', keyName: 'app1.k0', modified: 16 }) }]);
      expect(await appHasEvents(log, 'app1')).toBe(true);
      expect(await appHasEvents(log, 'app3')).toBe(false);

      const request: ScopeRequest = { appId: 'app1', channels: { kind: 'prefix', prefix: 'orders:' }, include: new Set(['messages', 'presence', 'app-events'] as const), from: 0, to: Number.MAX_SAFE_INTEGER };
      const lines: import('../../src/audit/replay-scope.js').ReplayLine[] = [];
      for await (const { line } of replayScope(log, request)) lines.push(line);
      const names = (channel: string) => lines.filter((l) => l.topic === 'messages' && l.event.channel === channel).map((l) => (l.event.messages as { name: string }[])[0].name);
      expect(names('orders:1')).toEqual(['a', 'd']);
      expect(names('orders:2')).toEqual(['b']);
      expect(lines.filter((l) => l.topic === 'messages')).toHaveLength(3);
      expect(lines.find((l) => l.topic === 'messages')).toMatchObject({ partition: expect.any(Number), offset: expect.any(Number), credential: { keyName: 'app1.k1', clientId: 'ann' } });
      expect(lines.find((l) => l.topic === 'presence')).toMatchObject({ time: 15, credential: { connectionId: 'conn-1', clientId: 'ann' } });
      expect(lines.find((l) => l.topic === 'apps')).toMatchObject({ time: 16, event: { type: 'key.revoked', keyName: 'app1.k0' } });
    } finally {
      await log.close();
    }
  }, 60_000);
});
