// The replay CLI tests' embedded logs (replay*.test.ts): the command run on the embedded log, a data
// directory whose log holds a channel's messages and a checkpoint, and log.db's rows to tamper with.
import { join } from 'node:path';
import { expect } from 'vitest';
import type Database from '../../src/stores/sqlite/driver.mjs';
import { ROOT, runToEnd } from '../helpers/spawn-service.js';
import { startTestService, uniqueChannel } from '../helpers/service.js';

/** `replay` with these arguments, on the embedded log (no Kafka, no ClickHouse). */
export const replay = (...args: string[]) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], { KAFKA_BROKERS: '', CLICKHOUSE_URL: '' });

/** A data directory whose log holds `count` messages on one channel (named from `prefix`), and a checkpoint (the service's close takes one). */
export async function audited(count = 5, dataDir?: string, prefix = 'audited'): Promise<{ dataDir: string; appId: string; channel: string }> {
  const t = await startTestService({}, dataDir ? { dataDir } : {});
  const channel = uniqueChannel(prefix);
  for (let i = 0; i < count; i++) {
    const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: { name: `m${i}`, data: `payload ${i}` } });
    expect(res.statusCode).toBe(201);
  }
  const appId = t.service.registry.all()[0].appId;
  await t.close();
  return { dataDir: t.dataDir, appId, channel };
}

/** A row of log.db's log_segments. */
export interface Row {
  id: number;
  first_offset: number;
  count: number;
  records: Buffer;
  chain: Buffer;
}

/** The rows of a topic's partition 0, in offset order. */
export const rowsOf = (db: Database.Database, topic: string): Row[] => db.prepare('SELECT id, first_offset, count, records, chain FROM log_segments WHERE topic = ? AND partition = 0 ORDER BY id').all(topic) as Row[];
