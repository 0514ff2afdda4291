// A bounded start of a NEW production instance (README: A bounded start, shared snapshots): after a
// large presence topic, an instance with an empty DATA_DIR starts (a) with no shared snapshot to
// start from (SHARED_SNAPSHOT_INTERVAL_MS=0: every new instance replayed the topics whole before
// shared snapshots) and (b) from the shared snapshot another instance's stop left in ClickHouse,
// in the same run, one after the other. The events are old (the last an hour before the start),
// as after months of churn. Production only: needs Kafka and ClickHouse (infra/local/start.sh).
// librdkafka's mock broker keeps ~5 MiB per partition, some 20,000 of these records (with the
// chain's headers, ~250 bytes each), and makes topics of 4 partitions: for 200,000 presence events
// pre-create the presence topic with more partitions and name its prefix (BENCH_TOPIC_PREFIX):
//
//   INFRA_STATE_DIR=/tmp/infra-bench TOPICS="newinst-presence:12" bash infra/local/start.sh > /tmp/infra-bench.env
//   source /tmp/infra-bench.env && BENCH_TOPIC_PREFIX=newinst- npx tsx test/bench/new-instance-bench.ts 200000 20000
//
// (each run with that prefix needs a fresh broker: the events are appended again). Default: 200000 20000.
// 1,000,000 presence events: TOPICS="newinst-presence:64 newinst-connections:8" and arguments 1000000 100000.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { parseConfig, type Config } from '../../src/config.js';
import { startService, type Adapters } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Log, type Topic } from '../../src/log/port.js';
import { Flag } from '../../src/realtime/protocol.js';
import { countingAdapters } from '../helpers/counting-log.js';
import { writersCaughtUp } from '../helpers/snapshot-start.js';
import { dropTables, productionEnv } from './production-env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PRESENCE = Number(process.argv[2] ?? 200_000);
const CONNECTIONS = Number(process.argv[3] ?? 20_000);
const CHANNELS = 1000;
const CLIENTS = 20;
const APP = 'b';
// Warnings (a snapshot passed over, and why) go to stderr.
const logger = pino({ level: 'warn' }, pino.destination(2));

/** A small deterministic PRNG: the same churn every run. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Appends the churn: members enter (60%) and leave, connections attach (2/3) and detach. */
async function fill(log: Log): Promise<void> {
  const random = prng(23);
  const last = Date.now() - 3600_000;
  const spanMs = 24 * 3600_000;
  const batch = 5000;
  const write = async (topic: Topic, n: number, make: (i: number, ts: number) => [string, LogEvent]): Promise<void> => {
    for (let i = 0; i < n; i += batch) {
      const records = [];
      for (let j = i; j < Math.min(n, i + batch); j++) {
        const ts = last - Math.round(((n - j) / n) * spanMs);
        const [key, event] = make(j, ts);
        records.push({ key, value: encodeEvent(event), timestamp: ts });
      }
      await log.append(topic, records);
      process.stderr.write(`\r[new-instance-bench] ${topic}: ${i + records.length} of ${n}   `);
    }
    process.stderr.write('\n');
  };
  await write(Topics.presence, PRESENCE, (i, ts) => {
    const channel = `c${Math.floor(random() * CHANNELS)}`;
    const clientId = `u${Math.floor(random() * CLIENTS)}`;
    const action = random() < 0.6 ? 'enter' : 'leave';
    return [channelKey(APP, channel), { type: 'presence.changed', appId: APP, channel, event: { action, id: `${i}`, timestamp: ts, clientId, connectionId: clientId } }];
  });
  await write(Topics.connections, CONNECTIONS, () => {
    const channel = `c${Math.floor(random() * CHANNELS)}`;
    const connectionId = `r${Math.floor(random() * 5000)}`;
    const event: LogEvent = random() < 2 / 3 ? { type: 'channel.attached', appId: APP, channel, connectionId, instanceId: 'gone', modes: Flag.SUBSCRIBE | Flag.PRESENCE } : { type: 'channel.detached', appId: APP, channel, connectionId };
    return [channelKey(APP, channel), event];
  });
}

interface Start {
  ms: number;
  /** How long the instance waited, after its start, for its shared writers to write what the log holds (settle). */
  settleMs: number;
  presenceRead: number;
  connectionsRead: number;
  members: number;
}

/**
 * Starts an instance with a new, empty DATA_DIR; closes it (its stop shares its snapshots when shared
 * ones are on). With `settle`, it first waits until its shared writers (presence history, stats) have
 * written everything the log holds, as they would have over the months the churn stands for: the
 * fill appends it in a burst, faster than ClickHouse takes the rows, and a stop whose writers are
 * still behind shares snapshots the next start rightly refuses (README: A bounded start).
 */
async function newInstance(env: Record<string, string>, adapters: (config: Config) => Promise<Adapters>, settle = false): Promise<Start> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cm-new-instance-bench-'));
  try {
    const config = parseConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', INSTANCE_ID: `new-${randomBytes(3).toString('hex')}`, SNAPSHOT_INTERVAL_MS: '60000', ...env });
    const counted = countingAdapters(await adapters(config), config.instanceId);
    const started = performance.now();
    const service = await startService(config, logger, counted.adapters);
    const ms = performance.now() - started;
    const members = service.presence.memberCount(APP);
    const settling = performance.now();
    if (settle) {
      const ends: [Topic, Map<number, number>][] = [[Topics.presence, await service.log.endOffsets(Topics.presence)], [Topics.connections, await service.log.endOffsets(Topics.connections)]];
      const behind = (): number => [...service.runner.lag()].filter(([name]) => /writer/.test(name)).reduce((sum, [, lag]) => sum + lag, 0);
      for (let waited = 0; !writersCaughtUp(service, ends); waited += 1) {
        if (waited % 10 === 0) process.stderr.write(`\r[new-instance-bench] the sharing instance's writers: ${behind().toLocaleString('en')} records behind   `);
        if (waited > 3_600) throw new Error('the shared writers did not catch up within an hour');
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      process.stderr.write('\n');
    }
    const settleMs = performance.now() - settling;
    await service.close();
    const read = (name: string, feed: string) => (counted.handed.get(name) ?? counted.handed.get(feed))?.length ?? 0;
    return { ms, settleMs, members, presenceRead: read('presence', 'presence-feed'), connectionsRead: read('channels-connections', 'connections-feed') };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const found = await productionEnv(process.env, ROOT);
if ('skipped' in found) {
  console.log(`[new-instance-bench] skipped: ${found.skipped}`);
  process.exit(0);
}
const tag = randomBytes(4).toString('hex');
const isolation = { topicPrefix: process.env.BENCH_TOPIC_PREFIX || `newinst-${tag}-`, tablePrefix: `newinst_${tag}_` };
const { productionAdapters } = await import('../../src/production-adapters.js');
const adapters = (config: Config) => productionAdapters(config, logger, isolation);
try {
  const writer = await adapters(parseConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), 'cm-new-instance-w-')), ...found.env }));
  const filling = performance.now();
  await fill(writer.log);
  const fillMs = performance.now() - filling;
  await writer.log.close();
  await writer.close?.();
  const s = (ms: number): string => (ms / 1000).toFixed(2);
  // (a) No shared snapshot: the new instance replays the topics whole.
  const before = await newInstance({ ...found.env, SHARED_SNAPSHOT_INTERVAL_MS: '0' }, adapters);
  // An instance that stops gracefully: its stop shares its snapshots.
  const sharer = await newInstance(found.env, adapters, true);
  // (b) A new instance: from the shared snapshots.
  const after = await newInstance(found.env, adapters);
  if (after.members !== before.members) throw new Error(`members differ: ${after.members} from the shared snapshot, ${before.members} replayed`);
  if (before.presenceRead < PRESENCE) console.log(`[new-instance-bench] the log kept only ${before.presenceRead} of ${PRESENCE} presence events (the mock broker keeps ~5 MiB per partition): use fewer`);
  console.log(`[new-instance-bench] filled in ${s(fillMs)} s; the instance that shared its snapshots started in ${s(sharer.ms)} s, and its writers wrote what the log holds in ${s(sharer.settleMs)} s more`);
  console.log('| new instance (empty DATA_DIR), production | presence / connection events | start s | records read at start (presence / connections) | members present |\n|---|---:|---:|---:|---:|');
  const row = (label: string, r: Start) => `| ${label} | ${PRESENCE.toLocaleString('en')} / ${CONNECTIONS.toLocaleString('en')} | ${s(r.ms)} | ${r.presenceRead.toLocaleString('en')} / ${r.connectionsRead.toLocaleString('en')} | ${r.members.toLocaleString('en')} |`;
  console.log(row('before: no shared snapshot (full replay)', before));
  console.log(row('after: from the shared snapshot (ClickHouse)', after));
} finally {
  await dropTables(found.env.CLICKHOUSE_URL, isolation.tablePrefix);
}
