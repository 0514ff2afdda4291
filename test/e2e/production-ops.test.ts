// Production mode, issue 13: against the local mock broker the service runs without any switch
// (KAFKA_IDEMPOTENT=auto, the default, turns the idempotent producer off where the cluster cannot
// serve it, on where it can), and /ready and /metrics see the Kafka log.
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, startProductionInstance } from '../helpers/production.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'opsapp.k1:ops-secret-ops-secret';

describeWithInfra('production mode without switches (KAFKA_IDEMPOTENT=auto)', 'Kafka and ClickHouse', infra, (found) => {
  it('publishes (201), answers /ready 200 and counts Kafka appends in /metrics', async () => {
    const isolation = { topicPrefix: `ops-${randomBytes(4).toString('hex')}-`, tablePrefix: `ops_${randomBytes(4).toString('hex')}_` };
    const { service } = await startProductionInstance(found, { appId: 'opsapp', key: KEY, instanceId: 'ops-1', isolation, env: { KAFKA_IDEMPOTENT: '' } });
    try {
      expect(service.config.kafkaIdempotent).toBe('auto');
      const res = await service.app.inject({
        method: 'POST',
        url: '/channels/ops/messages',
        headers: { authorization: basic(KEY), 'content-type': 'application/json' },
        payload: { name: 'no-switch' },
      });
      expect(res.statusCode).toBe(201);
      const ready = await service.app.inject({ method: 'GET', url: '/ready' });
      expect(ready.statusCode, ready.body).toBe(200);
      expect(ready.json().checks.find((c: { name: string }) => c.name === 'log').detail).toBe('kafka log writable');
      const metrics = (await service.app.inject({ method: 'GET', url: '/metrics' })).body;
      expect(metrics).toMatch(/^cm_log_append_records_count\{topic="messages"\} [1-9]/m);
      expect(metrics).toMatch(/^cm_log_writable 1$/m);
    } finally {
      await service.close();
    }
  });
});
