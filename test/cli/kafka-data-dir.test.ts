// The embedded CLIs given the DATA_DIR of a running instance in Kafka mode, without KAFKA_BROKERS
// (REQUIRE_INFRA=1 with infra/local/start.sh's KAFKA_BROKERS and CLICKHOUSE_URL): its log is in
// Kafka, so replay, rebuild and keys --direct refuse in one line that says to give KAFKA_BROKERS and
// CLICKHOUSE_URL, exit 1, and make nothing in the directory; keys --direct with them is refused too
// (Kafka goes through a running instance).
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { expect, it } from 'vitest';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { ROOT, runToEnd } from '../helpers/spawn-service.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig } from '../helpers/production.js';

const infra = await findProductionInfra();
const cli = (script: string, env: Record<string, string>, ...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, `src/cli/${script}.ts`), ...args], env);

describeWithInfra('the embedded CLIs on a Kafka-mode instance\'s DATA_DIR', 'Kafka and ClickHouse', infra, (found) => {
  it('replay, rebuild and keys --direct refuse in one line naming KAFKA_BROKERS and CLICKHOUSE_URL (exit 1) and make nothing there', async () => {
    const { config, dataDir } = productionConfig(found, [{ appId: 'kdapp', keys: [{ key: 'kdapp.k1:kafka-data-dir-secret' }] }]);
    const logger = pino({ level: 'silent' });
    const tag = randomBytes(4).toString('hex');
    const service = await startService(config, logger, await productionAdapters(config, logger, { topicPrefix: `kd-${tag}-`, tablePrefix: `kd_${tag}_` }));
    try {
      const files = readdirSync(dataDir).sort();
      expect(files).not.toContain('log.db');
      const embedded = { DATA_DIR: dataDir, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' };
      const runs = await Promise.all([
        cli('replay', embedded, '--app', 'kdapp', '--channel', 'c'),
        cli('rebuild', embedded, '--projection', 'stats'),
        cli('keys', embedded, 'list', '--direct'),
      ]);
      for (const [i, r] of runs.entries()) {
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr.split('\n').filter((l) => l !== '')).toHaveLength(1);
        expect(r.stderr).toMatch(new RegExp(`^(replay failed|rebuild|keys): DATA_DIR=${dataDir} holds no log .*If it is a service's in Kafka mode, its log is in Kafka: give KAFKA_BROKERS and CLICKHOUSE_URL`));
        expect(readdirSync(dataDir).sort(), `run ${i}`).toEqual(files);
      }
      const withKafka = await cli('keys', { DATA_DIR: dataDir, KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl }, 'list', '--direct');
      expect(withKafka.code).toBe(1);
      expect(withKafka.stderr).toBe('keys: --direct appends to the embedded log; with Kafka, go through a running instance (--url)\n');
    } finally {
      await service.close();
    }
  }, 120_000);
});
