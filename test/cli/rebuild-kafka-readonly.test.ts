// The rebuild on Kafka beside a running instance, with the instance's DATA_DIR (its AUDIT_KEY_FILE
// and the witness beside it), as `npm run rebuild` opens its adapters (readOnlyLog): it appends
// nothing to the log and leaves the witness as it is (REQUIRE_INFRA=1 with infra/local/start.sh's
// KAFKA_BROKERS and CLICKHOUSE_URL). Its Kafka log took the service's checkpoints: at its close it
// appended a checkpoint to the audit topic, signed with the instance's key, carrying the heads of the
// witness file, and rewrote that file with none, so a tail cut before the instance's next
// checkpoint and a crash went unseen after the restart.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { expect, it } from 'vitest';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { rebuild } from '../../src/cli/rebuild.js';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics } from '../../src/log/port.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig } from '../helpers/production.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'rkapp.k1:rebuild-readonly-secret';

describeWithInfra('the rebuild on Kafka, beside a running instance', 'Kafka and ClickHouse', infra, (found) => {
  it('appends nothing to the log (no checkpoint of its own) and leaves the witness of the last checkpoint as it is', async () => {
    const { config, dataDir } = productionConfig(found, [{ appId: 'rkapp', keys: [{ key: KEY }] }]);
    const logger = pino({ level: 'silent' });
    const tag = randomBytes(4).toString('hex');
    const isolation = { topicPrefix: `rk-${tag}-`, tablePrefix: `rk_${tag}_` };
    const adapters = await productionAdapters(config, logger, isolation);
    const service = await startService(config, logger, adapters);
    const reader = new KafkaLog({ brokers: found.brokers, clientId: 'rebuild-readonly-check', topicPrefix: isolation.topicPrefix, idempotent: false, createTopics: false });
    try {
      for (let i = 0; i < 5; i++) {
        const res = await service.app.inject({ method: 'POST', url: `/channels/rk-${i}/messages`, headers: { authorization: basic(KEY), 'content-type': 'application/json' }, payload: { name: 'e' } });
        expect(res.statusCode).toBe(201);
      }
      await (adapters.log as KafkaLog).checkpoint();
      const witnessPath = join(dataDir, 'audit-last-checkpoint.json');
      const witness = readFileSync(witnessPath, 'utf8');
      expect((JSON.parse(witness) as { heads: unknown[] }).heads.length).toBeGreaterThan(0);
      const audit = await reader.endOffsets(Topics.audit);

      const beside = await productionAdapters(config, logger, { ...isolation, consumerPrefix: 'rebuild-', readOnlyLog: true });
      try {
        expect(await rebuild('stats', { config, adapters: beside })).toBeGreaterThanOrEqual(5);
      } finally {
        await beside.log.close();
        await beside.close?.();
      }
      expect(await reader.endOffsets(Topics.audit)).toEqual(audit);
      expect(readFileSync(witnessPath, 'utf8')).toBe(witness);
    } finally {
      await reader.close();
      await service.close();
    }
  }, 120_000);
});
