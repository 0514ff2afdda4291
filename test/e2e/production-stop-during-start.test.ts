// A SIGTERM or SIGINT during a production start (waiting for Kafka or ClickHouse, its consumers
// joining their groups) stops it: what it made is closed, its Kafka consumers leave their groups,
// and the process exits 0 with a line saying so. It used to die of the signal (the handlers were
// installed once it listened), leaving its members in their groups until the session timeout: the
// other instances and the next start waited that long at their next rebalance.
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra } from '../helpers/production.js';
import { freePort, spawnServer, type ServerProcess } from '../helpers/server-process.js';
import { until } from '../faults/publish-load.js';

const infra = await findProductionInfra();

function appsFileIn(dir: string, appId: string): string {
  const file = join(dir, 'apps.json');
  writeFileSync(file, JSON.stringify({ apps: [{ appId, keys: [{ key: `${appId}.k1:stop-during-start-secret` }] }] }));
  return file;
}

const output = (s: ServerProcess): string => s.output.join('');
type Line = { level: number; msg: string; consumersLeft?: number };
const logLines = (s: ServerProcess): Line[] => output(s).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);
/**
 * Its warnings and errors. A stop during the start is quiet but for its own lines: the parts of the
 * start still running when the log closed (the connection events' appends, the resume reader's
 * start) used to warn of the closed log ("connection event not appended" and the like).
 */
const warnings = (s: ServerProcess): string[] => logLines(s).filter((l) => l.level >= 40).map((l) => l.msg);

describe('a signal during a production start', () => {
  const held: Socket[] = [];
  let silent: Server | undefined;
  afterAll(() => {
    for (const s of held) s.destroy();
    silent?.close();
  });

  it('while it waits for Kafka: SIGTERM ends the wait, exit 0 with a line saying the start was stopped', async () => {
    // A "broker" that takes connections and never answers: the start waits for it.
    silent = createServer((socket) => void held.push(socket));
    const port = await freePort();
    await new Promise<void>((r) => silent!.listen(port, '127.0.0.1', r));
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-stop-start-'));
    const server = spawnServer(
      {
        DATA_DIR: dataDir,
        APPS_FILE: appsFileIn(dataDir, 'stopstart'),
        KAFKA_BROKERS: `127.0.0.1:${port}`,
        CLICKHOUSE_URL: 'http://127.0.0.1:1',
        KAFKA_IDEMPOTENT: '0',
        STARTUP_TIMEOUT_MS: '120000',
        LOG_LEVEL: 'info',
      },
      await freePort(),
    );
    try {
      await until('the start waits for Kafka', () => output(server).includes('waiting for Kafka'), 30_000, 50);
      server.child.kill('SIGTERM');
      expect(await server.exited, output(server)).toEqual({ code: 0, signal: null });
      expect(output(server)).toContain('stopping during the start: nothing connected yet');
      expect(output(server)).toContain('stopped during the start');
      expect(warnings(server), output(server)).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 60_000);
});

describeWithInfra('a signal while a production start joins its consumer groups', 'Kafka and ClickHouse', infra, (found) => {
  it('SIGTERM once its consumers read: they leave their groups, the shared writers\' joins included, before it exits 0 saying how many', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-stop-start-'));
    const tag = randomBytes(4).toString('hex');
    // Topics and tables of its own (test/helpers/isolated-main.ts): its groups are this test's alone.
    const topicPrefix = `stopjoin-${tag}-`;
    const server = spawnServer(
      {
        DATA_DIR: dataDir,
        APPS_FILE: appsFileIn(dataDir, 'stopjoin'),
        KAFKA_BROKERS: found.brokers.join(','),
        CLICKHOUSE_URL: found.clickhouseUrl,
        KAFKA_IDEMPOTENT: '0',
        INSTANCE_ID: `stopjoin-${tag}`,
        TEST_TOPIC_PREFIX: topicPrefix,
        TEST_TABLE_PREFIX: `stopjoin_${tag}_`,
        SHUTDOWN_TIMEOUT_MS: '30000',
        LOG_LEVEL: 'info',
      },
      await freePort(),
      'test/helpers/isolated-main.ts',
    );
    try {
      // The history projection read the log: the shared writers' consumers are joining their groups.
      await until('the history projection read the log', () => output(server).includes('"history projection caught up"') || !server.running(), 60_000, 20);
      server.child.kill('SIGTERM');
      expect(await server.exited, output(server)).toEqual({ code: 0, signal: null });
      // Its consumers (the apps, the projections' feeds, the shared writers still joining) were
      // disconnected, each having left its group, before it exited. (Whether the group is free is not
      // asked of the broker: librdkafka's mock keeps a member that left in its group until its
      // session timeout, a plain kafkajs consumer's alike.)
      const stopped = logLines(server).find((l) => l.msg === 'stopped during the start; the service did not start');
      expect(stopped, output(server)).toBeDefined();
      // apps, the projections' feeds of four topics, four shared writer feeds, at least.
      expect(stopped!.consumersLeft).toBeGreaterThanOrEqual(9);
      // Nothing else said: the parts of the start that met the closed log are quiet.
      expect(warnings(server), output(server)).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 180_000);
});
