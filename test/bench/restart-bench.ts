// A bounded start (issue 23 item 6; README: A bounded start): a restart after 1,000,000 presence
// events and 100,000 connection events, replaying the topics whole (SNAPSHOT_INTERVAL_MS=0, as
// every start did before snapshots) and from the snapshots, one after the other in the same run.
// The events are old (the last an hour before the restart), as after months of churn: the history
// window holds none of them. Embedded always; production too when its infrastructure is there,
// with as many events as librdkafka's mock broker keeps (~5 MiB per partition, 4 partitions).
//
// `npx tsx test/bench/restart-bench.ts [presence events] [connection events]` (0 presence events: production only)
// (`BENCH_PRODUCTION_PRESENCE` / `BENCH_PRODUCTION_CONNECTIONS` for production; 0 skips it).
// Figures: test/bench/README.md, Restart.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { encode } from '@msgpack/msgpack';
import { parseConfig, type Config } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Log, type Topic } from '../../src/log/port.js';
import { Flag } from '../../src/realtime/protocol.js';
import { countingAdapters } from '../helpers/counting-log.js';
import { dropTables, productionEnv } from './production-env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PRESENCE = Number(process.argv[2] ?? 1_000_000);
const CONNECTIONS = Number(process.argv[3] ?? 100_000);
const CHANNELS = 2000;
const CLIENTS = 20;
const APP = 'restartapp';
// Warnings (a snapshot passed over, and why) go to stderr.
const logger = pino({ level: 'warn' }, pino.destination(2));

/** A small deterministic PRNG: the same churn every run. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Appends the churn: members enter (60%) and leave, connections attach (2/3) and detach. */
async function fill(log: Log, presence: number, connections: number): Promise<void> {
  const random = prng(23);
  const last = Date.now() - 3600_000;
  const spanMs = 80 * 3600_000; // within the embedded log's 96 h retention
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
      if ((i / batch) % 20 === 0) process.stderr.write(`\r[restart-bench] ${topic}: ${i + records.length} of ${n}   `);
    }
    process.stderr.write('\n');
  };
  await write(Topics.presence, presence, (i, ts) => {
    const channel = `ch-${Math.floor(random() * CHANNELS)}`;
    const clientId = `client-${Math.floor(random() * CLIENTS)}`;
    const action = random() < 0.6 ? 'enter' : 'leave';
    return [channelKey(APP, channel), { type: 'presence.changed', appId: APP, channel, event: { action, id: `p${i}`, timestamp: ts, clientId, connectionId: `conn-${clientId}`, data: `status ${i % 100}` } }];
  });
  await write(Topics.connections, connections, (i) => {
    const channel = `ch-${Math.floor(random() * CHANNELS)}`;
    const connectionId = `rt-${Math.floor(random() * 5000)}`;
    const event: LogEvent = random() < 2 / 3 ? { type: 'channel.attached', appId: APP, channel, connectionId, instanceId: 'gone-instance', modes: Flag.SUBSCRIBE | Flag.PRESENCE } : { type: 'channel.detached', appId: APP, channel, connectionId };
    return [channelKey(APP, channel), event];
  });
}

interface Start {
  ms: number;
  presenceRead: number;
  connectionsRead: number;
  members: number;
  closeMs: number;
  /** What one periodic snapshot holds the event loop for: taking both states and encoding them. */
  takeMs: number;
}

async function timedStart(config: Config, adapters: () => Promise<Adapters>): Promise<Start> {
  const counted = countingAdapters(await adapters(), config.instanceId);
  const started = performance.now();
  const service = await startService(config, logger, counted.adapters);
  const ms = performance.now() - started;
  const members = service.presence.memberCount(APP);
  const taking = performance.now();
  for (const taken of [service.presence.snapshot(), service.channels.snapshot()]) encode(taken.state, { ignoreUndefined: true });
  const takeMs = performance.now() - taking;
  const closing = performance.now();
  await service.close();
  return { ms, members, takeMs, closeMs: performance.now() - closing, presenceRead: counted.handed.get('presence')?.length ?? 0, connectionsRead: counted.handed.get('channels-connections')?.length ?? 0 };
}

const sizeOf = (dir: string): number => {
  let bytes = 0;
  for (const name of ['presence', 'channels']) {
    const files = readdirSync(join(dir, name)).filter((f) => f.endsWith('.snap')).sort().reverse();
    if (files[0]) bytes += statSync(join(dir, name, files[0])).size;
  }
  return bytes;
};

async function measure(label: string, presence: number, connections: number, env: Record<string, string>, adapters: (config: Config) => Promise<Adapters>): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cm-restart-bench-'));
  try {
    const config = (more: Record<string, string>): Config =>
      parseConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', INSTANCE_ID: `restart-bench-${randomBytes(3).toString('hex')}`, SNAPSHOT_INTERVAL_MS: '60000', ...env, ...more });
    const writer = await adapters(config({}));
    const filling = performance.now();
    await fill(writer.log, presence, connections);
    const fillMs = performance.now() - filling;
    await writer.log.close();
    await writer.close?.();
    // Full replay, as before snapshots; then one more start that writes the snapshots at its close.
    const whole = await timedStart(config({ SNAPSHOT_INTERVAL_MS: '0' }), () => adapters(config({})));
    const first = await timedStart(config({}), () => adapters(config({})));
    const bytes = sizeOf(join(dataDir, 'snapshots'));
    const restored = await timedStart(config({}), () => adapters(config({})));
    if (restored.members !== whole.members) throw new Error(`members differ: ${restored.members} restored, ${whole.members} replayed`);
    if (whole.presenceRead < presence) console.log(`[restart-bench] ${label}: the log kept only ${whole.presenceRead} of ${presence} presence events (the mock broker keeps ~5 MiB per partition): use fewer`);
    const s = (ms: number): string => (ms / 1000).toFixed(2);
    console.log(`[restart-bench] ${label}: filled in ${s(fillMs)} s; members present ${whole.members}; snapshots ${(bytes / 1024).toFixed(0)} KiB (the stop that wrote them took ${s(first.closeMs)} s; taking and encoding one holds the event loop ${restored.takeMs.toFixed(0)} ms)`);
    return `| ${label} | ${presence.toLocaleString('en')} / ${connections.toLocaleString('en')} | ${s(whole.ms)} (${whole.presenceRead.toLocaleString('en')} / ${whole.connectionsRead.toLocaleString('en')} read) | ${s(first.ms)} | ${s(restored.ms)} (${restored.presenceRead.toLocaleString('en')} / ${restored.connectionsRead.toLocaleString('en')} read) | ${whole.members.toLocaleString('en')} | ${(bytes / 1024).toFixed(0)} KiB |`;
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const HEADER = '| restart after churn | presence / connection events | full replay s (records read: presence / connections) | full replay, writing snapshots at close s | from snapshots s (records read) | members present | snapshot size |\n|---|---:|---:|---:|---:|---:|---:|';
const rows: string[] = [];
const printed = (row: string): string => {
  console.log(`${HEADER}\n${row}`); // at once: a failure of the next mode keeps this one's figures
  return row;
};
if (PRESENCE > 0) rows.push(printed(await measure('embedded (SQLite)', PRESENCE, CONNECTIONS, {}, async (config) => embeddedAdapters(config, { lock: false }))));

const productionPresence = Number(process.env.BENCH_PRODUCTION_PRESENCE ?? 60_000);
const productionConnections = Number(process.env.BENCH_PRODUCTION_CONNECTIONS ?? 20_000);
const found = productionPresence > 0 ? await productionEnv(process.env, ROOT) : { skipped: 'BENCH_PRODUCTION_PRESENCE=0' };
if ('skipped' in found) {
  console.log(`[restart-bench] production: skipped: ${found.skipped}`);
} else {
  const tag = randomBytes(4).toString('hex');
  const isolation = { topicPrefix: `restart-${tag}-`, tablePrefix: `restart_${tag}_` };
  const { productionAdapters } = await import('../../src/production-adapters.js');
  try {
    rows.push(printed(await measure(`production (Kafka${found.kafkaMock ? ' mock' : ''} + ClickHouse)`, productionPresence, productionConnections, found.env, (config) => productionAdapters(config, logger, isolation))));
  } finally {
    await dropTables(found.env.CLICKHOUSE_URL, isolation.tablePrefix);
  }
}

console.log(`\n${HEADER}`);
for (const row of rows) console.log(row);
