// kafkajs 2.2.4 runs a check of each connection's request queue about every millisecond, for as
// long as the connection is open, even with nothing pending (kafkajs-idle-timers.ts). What must hold
// once the Kafka log stops that loop: an idle connection checks its queue (almost) never, and requests
// still go out and are answered (appends, a consumer's fetches) as before.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { afterEach, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type LogRecord } from '../../src/log/port.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const require = createRequire(import.meta.url);
const { prototype: queue } = require('kafkajs/src/network/requestQueue/index.js') as { prototype: { checkPendingRequests(): void } };

describeWithInfra('KafkaLog and the idle kafkajs request queues', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
  });

  it('an idle producer connection no longer checks its request queue every millisecond, and appends and fetches go on', { timeout: 60_000 }, async () => {
    const log = new KafkaLog({ brokers, clientId: 'idle-timers', topicPrefix: `t-${randomBytes(4).toString('hex')}-`, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 100, sessionTimeoutMs: 6_000 });
    logs.push(log);
    const enc = new TextEncoder();
    await log.append(Topics.usage, [{ key: 'a', value: enc.encode('first'), timestamp: Date.now() }]);
    // Counted over half a second of a connected producer doing nothing (and its admin client).
    const check = queue.checkPendingRequests;
    let checks = 0;
    queue.checkPendingRequests = function (this: unknown) {
      checks++;
      return check.call(this);
    };
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      queue.checkPendingRequests = check;
    }
    // The loop made hundreds per connection in that time; what is left comes from answered requests.
    expect(checks).toBeLessThan(20);
    const got: LogRecord[] = [];
    const subscription = log.consume({ topic: Topics.usage, consumer: `idle-${randomBytes(4).toString('hex')}`, from: new Map(), handle: (records) => void got.push(...records) });
    await log.append(Topics.usage, [{ key: 'a', value: enc.encode('second'), timestamp: Date.now() }]);
    await expect.poll(() => got.map((r) => Buffer.from(r.value).toString()), { timeout: 30_000 }).toEqual(['first', 'second']);
    await subscription.stop();
  });
});
