// A graceful stop (SIGTERM once the service listens) in production mode exits only once its Kafka
// consumers have left their groups, the shared writers' consumers stopped in the middle of a group
// join included, within SHUTDOWN_TIMEOUT_MS. It used to give such a consumer 2 s
// (KafkaSubscription.stop) and exit with its member still joining: the other instances and the next
// start waited out its session timeout at their next rebalance.
//
// The join under way: a restart right after a stop joins the writer groups the stopped process's
// members were in, and the local mock broker hands out their partitions only as those members'
// sessions run out (README: A bounded start). The restart is stopped as soon as it listens; its
// drain of the shared writers gives up waiting for their partitions at half of SHUTDOWN_TIMEOUT_MS,
// before the sessions run out, and stops them while they join. (Whether the group is free is not
// asked of the broker: the mock keeps a member that left until its session timeout.) Asserted on
// the process's log lines, in order, never on time. Kafka + ClickHouse only; required under
// REQUIRE_INFRA=1.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra } from '../helpers/production.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/server-process.js';
import { until } from '../faults/publish-load.js';

const infra = await findProductionInfra();

type Line = { level: number; msg: string; topic?: string; consumer?: string };
const output = (s: ServerProcess): string => s.output.join('');
const logLines = (s: ServerProcess): Line[] => output(s).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);

describeWithInfra('a graceful stop in production mode', 'Kafka and ClickHouse', infra, (found) => {
  it('waits for the shared writers stopped during their group join to leave their groups before it exits', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-stop-leave-'));
    const appsFile = join(dataDir, 'apps.json');
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'stopleave', keys: [{ key: 'stopleave.k1:stop-leave-secret' }] }] }));
    const tag = randomBytes(4).toString('hex');
    const start = async (): Promise<ServerProcess> =>
      spawnServer(
        {
          DATA_DIR: dataDir,
          APPS_FILE: appsFile,
          KAFKA_BROKERS: found.brokers.join(','),
          CLICKHOUSE_URL: found.clickhouseUrl,
          KAFKA_IDEMPOTENT: '0',
          INSTANCE_ID: `stopleave-${tag}`,
          // Topics and tables of its own (test/helpers/isolated-main.ts): its groups are this test's alone.
          TEST_TOPIC_PREFIX: `stopleave-${tag}-`,
          TEST_TABLE_PREFIX: `stopleave_${tag}_`,
          SHARED_SNAPSHOT_INTERVAL_MS: '0',
          // The restart's writers join once the first process's sessions have run out (40 s after
          // its stop): after its drain gave up (20 s after its own stop, which comes once it
          // listens) and before its stop runs out of time (40 s after it).
          KAFKA_SESSION_TIMEOUT_MS: '40000',
          SHUTDOWN_TIMEOUT_MS: '40000',
          LOG_LEVEL: 'info',
        },
        await freePort(),
        'test/helpers/isolated-main.ts',
      );
    const listening = (s: ServerProcess) => until('the service listens', () => output(s).includes('"service listening"') || !s.running(), 90_000, 20);

    // 1. A first process, whose shared writers join their groups; stopped.
    const first = await start();
    try {
      await listening(first);
      await until('its four shared writers were handed their partitions', () => logLines(first).filter((l) => l.msg === 'shared kafka consumer: partitions handed over').length >= 4 || !first.running(), 60_000, 20);
      first.child.kill('SIGTERM');
      expect(await first.exited, output(first)).toEqual({ code: 0, signal: null });
    } finally {
      await first.stop();
    }

    // 2. The restart, stopped as soon as it listens: its writers are still joining.
    const second = await start();
    try {
      await listening(second);
      second.child.kill('SIGTERM');
      const exited = await second.exited;
      const lines = logLines(second);
      expect(exited, output(second)).toEqual({ code: 0, signal: null });
      const shutDown = lines.findIndex((l) => l.msg === 'shut down');
      expect(shutDown, output(second)).toBeGreaterThan(0);
      // Writers stopped during their join (what this test is about: its stop could not wait for them).
      const joining = lines.filter((l) => l.msg === 'shared kafka consumer stopped; it leaves its group once the rebalance under way ends');
      expect(joining.length, output(second)).toBeGreaterThan(0);
      // Each of them left its group before the process exited (it said so: a process that exits
      // first never does). Where, among the last lines: pino's writes are asynchronous, and those
      // still in flight at the exit can come out after the ones flushed then.
      for (const j of joining) {
        expect(lines.some((l) => l.msg === 'shared kafka consumer left its group, the rebalance over' && l.topic === j.topic && l.consumer === j.consumer), `${j.topic} ${j.consumer}\n${output(second)}`).toBe(true);
      }
      // The stop said what it waited for, and that every consumer had left, before it shut down.
      const before = lines.slice(0, shutDown);
      expect(before.some((l) => l.msg === 'closing the Kafka log: waiting for its consumers to leave their groups'), output(second)).toBe(true);
      expect(before.some((l) => l.msg === 'closing the Kafka log: its consumers left their groups'), output(second)).toBe(true);
      // No warning but the drain's (it gave up waiting for the writers' partitions, as arranged).
      const drainGaveUp = (l: Line) => l.msg.startsWith('stop: gave up waiting for the shared writers');
      expect(lines.filter((l) => l.level >= 40 && !drainGaveUp(l)).map((l) => l.msg), output(second)).toEqual([]);
    } finally {
      await second.stop();
    }
  }, 300_000);
});
