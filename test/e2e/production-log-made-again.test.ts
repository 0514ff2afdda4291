// A Kafka log made again behind the stores (README: A log made again): the topics deleted and made
// anew, offsets from 0 again, while ClickHouse keeps the history and stats stores, whose
// checkpoints name offsets of the old log. Read from there on, the new log's first records were
// skipped without a word (a publish acknowledged and never in history or stats). The start refuses
// now, saying what happened and what to do: when the new log is short of the checkpoints, and when
// it has grown past them (a marked record's offset holds another record). The local mock broker
// cannot delete a topic, so a log made again is topics of a new prefix under the same tables.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown } from '../helpers/production.js';
import { basic } from '../helpers/service.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';
import { Topics } from '../../src/log/port.js';
import type { AddressInfo } from 'node:net';

const infra = await findProductionInfra();
const KEY = 'resetapp.k1:reset-secret-reset-secret';
const { services } = productionTeardown();

describeWithInfra('production mode: a Kafka log made again behind the ClickHouse stores', 'Kafka and ClickHouse', infra, (found) => {
  const tag = randomBytes(3).toString('hex');
  const tables = `reset_${tag}_`;
  const config = () => productionConfig(found, [{ appId: 'resetapp', keys: [{ key: KEY }] }], { INSTANCE_ID: `reset-${tag}` }).config;

  const start = async (topicPrefix: string, tablePrefix = tables): Promise<{ service: Service; port: number }> => {
    const c = config();
    const logger = pino({ level: 'silent' });
    const adapters = await productionAdapters(c, logger, { topicPrefix, tablePrefix });
    let service: Service;
    try {
      service = await startService(c, logger, adapters);
    } catch (err) {
      await adapters.log.close().catch(() => undefined);
      await adapters.close?.().catch(() => undefined);
      throw err;
    }
    services.push(service);
    await service.app.listen({ port: 0, host: '127.0.0.1' });
    return { service, port: (service.app.server.address() as AddressInfo).port };
  };
  const stop = async (service: Service): Promise<void> => {
    services.splice(services.indexOf(service), 1);
    await service.close();
  };
  const publish = async (port: number, channel: string, n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
        method: 'POST',
        headers: { authorization: basic(KEY), 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'm', data: String(i) }),
      });
      expect(res.status).toBe(201);
    }
  };

  it('a start on a log short of the stores\' checkpoints, or grown past them with other records, refuses with what to do; on the log the stores read, it starts', async () => {
    // The old log: a few publishes, written to the stores by a graceful stop.
    const old = await start(`reset-old-${tag}-`);
    await publish(old.port, `persisted:reset-${tag}`, 5);
    const partitions = await old.service.log.partitions(Topics.messages);
    const ends = await old.service.log.endOffsets(Topics.messages);
    await stop(old.service);

    // 1. The log made again, empty: the stores' checkpoints are past its end.
    await expect(start(`reset-new-${tag}-`)).rejects.toThrow(
      /^the history store has read messages\/\d+ up to offset \d+, past the log's end \(0\): the log \(KAFKA_BROKERS=.*\) was made again or replaced since the stores .* read it, and its new records would be skipped\. Restore the log the stores read, or give the service stores of their own for the new log/,
    );

    // 2. The log made again and grown past the old one on every partition (by an instance with stores of its own):
    // the stores' marked record's offset holds another record.
    const grown = await start(`reset-grown-${tag}-`, `reset_${tag}_other_`);
    for (let p = 0; p < partitions; p++) {
      let channel = '';
      for (let i = 0; partitionFor(channelKey('resetapp', channel), partitions) !== p || channel === ''; i++) channel = `grow-${p}-${i}`;
      await publish(grown.port, channel, (ends.get(p) ?? 0) + 3);
    }
    await stop(grown.service);
    await expect(start(`reset-grown-${tag}-`)).rejects.toThrow(/^the history store read messages\/\d+ offset \d+ as a record of .*, and the log holds one of .* there: the log .* was made again or replaced/);

    // 3. The log the stores read: the start goes ahead.
    const again = await start(`reset-old-${tag}-`);
    const res = await fetch(`http://127.0.0.1:${again.port}/channels/${encodeURIComponent(`persisted:reset-${tag}`)}/messages`, { headers: { authorization: basic(KEY) } });
    expect(((await res.json()) as unknown[]).length).toBe(5);
  }, 240_000);
});
