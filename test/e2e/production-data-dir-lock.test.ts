// README (Configuration, DATA_DIR: "one service per directory (a second one refuses to start)";
// Several instances on Kafka: "DATA_DIR is per instance"). In production mode the directory holds
// the instance's audit key, the witness of its last signed checkpoint and its snapshots; a second
// instance started on it used to run beside the first, rewriting the witness and deleting the
// first one's snapshot files. It must refuse to start, in one line, as the embedded mode does.
import pino from 'pino';
import { expect, it } from 'vitest';
import { adaptersFor } from '../../src/adapters.js';
import { DataDirLockedError } from '../../src/log/embedded/data-dir-lock.js';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig } from '../helpers/production.js';
import { freePort, sleep, spawnServer } from '../helpers/server-process.js';

const infra = await findProductionInfra();
const logger = pino({ level: 'silent' });

describeWithInfra('one production instance per DATA_DIR', 'Kafka and ClickHouse', infra, (found) => {
  it('while an instance holds DATA_DIR, a second start on it exits 1 with one line naming the directory; once the first closes, it starts', async () => {
    const { config, dataDir } = productionConfig(found, [{ appId: 'pdlapp', keys: [{ key: 'pdlapp.k1:data-dir-lock-secret' }] }]);
    // The adapters main.ts builds (they probe Kafka and ClickHouse, and make no topic).
    const first = await adaptersFor(config, logger);
    try {
      await expect(adaptersFor(config, logger)).rejects.toThrow(DataDirLockedError);
      const second = spawnServer(
        { DATA_DIR: dataDir, APPS_FILE: config.appsFile!, KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: '0', INSTANCE_ID: 'pdl-second' },
        await freePort(),
      );
      const outcome = await Promise.race([second.exited, sleep(30_000).then(() => 'still running after 30 s' as const)]);
      await second.stop();
      expect(outcome).toEqual({ code: 1, signal: null });
      const stderr = second.output.join('').trim();
      expect(stderr.split('\n')).toHaveLength(1);
      expect(stderr).toMatch(/^failed to start: another process is using the data directory .* \(it holds .*lock\.db\)/);
    } finally {
      await first.close?.();
    }
    const again = await adaptersFor(config, logger);
    await again.close?.();
  }, 120_000);
});
