import { randomBytes } from 'node:crypto';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';
import { logContract } from './log.contract.js';

const kafka = await findKafka();

describeWithInfra('KafkaLog', 'Kafka', kafka, ({ brokers, mock }) => {
  logContract(
    'kafka',
    async () => {
      // Each test gets topics of its own; the mock broker auto-creates them with 4 partitions.
      const log = new KafkaLog({
        brokers,
        clientId: 'log-contract',
        topicPrefix: `t-${randomBytes(4).toString('hex')}-`,
        idempotent: !mock,
        replicationFactor: mock ? undefined : 1,
        fetchMaxWaitMs: 200,
        // The mock broker holds a rejoin under a known group name for about the session timeout.
        sessionTimeoutMs: 6_000,
      });
      return { log, cleanup: () => log.close() };
    },
    { deliveryTimeoutMs: 20_000, quietMs: 1_000 },
  );
});
