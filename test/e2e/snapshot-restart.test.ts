// A bounded start (README: A bounded start, issue 23 item 6): after churn, a restart restores the
// presence member set and the channels projection from their snapshots and its consumers read
// only the records after them; the state equals a full replay's; a corrupt snapshot, or one of an
// older version, falls back to the full replay with a warning saying why. Asserted on the offsets
// each consumer was handed after the restart, never on time. Embedded always; production mode
// (Kafka + ClickHouse) where the infrastructure is found, required under REQUIRE_INFRA=1.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig, type Config } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters, type Service } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Log, type Topic } from '../../src/log/port.js';
import { Flag } from '../../src/realtime/protocol.js';
import { findProductionInfra } from '../helpers/production.js';
import { requireInfra } from '../helpers/infra.js';
import { countingAdapters, handedBefore as before } from '../helpers/counting-log.js';
import { readBy, writersCaughtUp } from '../helpers/snapshot-start.js';

const found = await findProductionInfra();
afterAll(() => found?.stop());

interface Mode {
  name: string;
  env: () => Record<string, string>;
  adapters: (config: Config, isolation: { topicPrefix: string; tablePrefix: string }) => Promise<Adapters>;
  cleanUp?: (isolation: { tablePrefix: string }) => Promise<void>;
}

const embedded: Mode = {
  name: 'embedded',
  env: () => ({}),
  adapters: async (config) => embeddedAdapters(config),
};

const production: Mode | undefined = found && {
  name: 'production (Kafka + ClickHouse)',
  // DATA_DIR's snapshots alone: the shared ones (ClickHouse) are test/e2e/production-shared-snapshot.test.ts's.
  env: () => ({ KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: '0', SHARED_SNAPSHOT_INTERVAL_MS: '0' }),
  adapters: async (config, isolation) => (await import('../../src/production-adapters.js')).productionAdapters(config, pino({ level: 'silent' }), isolation),
  cleanUp: async ({ tablePrefix }) => {
    const query = async (sql: string): Promise<string> => (await fetch(found.clickhouseUrl, { method: 'POST', body: sql })).text();
    const names = await query(`SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${tablePrefix}')`);
    for (const name of names.split('\n').filter((n) => n !== '')) await query(`DROP TABLE IF EXISTS \`${name}\``);
  },
};

const CHANNELS = 40;
const PRESENCE_EVENTS = 2000;
const CONNECTION_EVENTS = 400;
const LATE = 37;

for (const mode of [embedded, production]) {
  if (!mode) {
    describe.skipIf(!requireInfra)('bounded start in production mode', () => {
      it('needs Kafka and ClickHouse', () => {
        throw new Error('Kafka and ClickHouse not found and REQUIRE_INFRA=1 (run `bash infra/local/start.sh`)');
      });
    });
    continue;
  }
  describe(`bounded start: ${mode.name}`, () => {
    it('a restart after churn reads only the log after the snapshots, equals a full replay, and falls back to one with a warning on a corrupt or older snapshot', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'cm-snapshot-restart-'));
      const tag = randomBytes(4).toString('hex');
      const isolation = { topicPrefix: `snap-${tag}-`, tablePrefix: `snap_${tag}_` };
      const instanceId = `snap-${tag}`;
      let now = Date.now();
      const clock = { now: () => now };
      const services: Service[] = [];
      const start = async (env: Record<string, string> = {}) => {
        const warnings: { msg: string; reason?: string; projection?: string }[] = [];
        const logger = pino({ level: 'warn' }, { write: (l: string) => warnings.push(JSON.parse(l)) });
        const config = parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', INSTANCE_ID: instanceId, SNAPSHOT_INTERVAL_MS: '3600000', ...mode.env(), ...env });
        const { adapters, handed } = countingAdapters(await mode.adapters(config, isolation), instanceId);
        const service = await startService(config, logger, adapters, clock);
        services.push(service);
        return { service, handed, warnings, config };
      };
      const close = async (s: Service) => {
        await s.close();
        services.splice(services.indexOf(s), 1);
      };
      const append = async (log: Log, topic: Topic, events: [string, LogEvent][]) => {
        for (let i = 0; i < events.length; i += 500) {
          await log.append(topic, events.slice(i, i + 500).map(([key, event]) => ({ key, value: encodeEvent(event), timestamp: now })));
        }
      };
      const stateOf = async (s: Service, appId: string) => {
        // What the start itself appended (its instance.started ends earlier attachments) applied
        // first: an append under the same key lands after it.
        await s.batcher.append(Topics.connections, [{ key: instanceId, build: () => encodeEvent({ type: 'instance.alive', instanceId }) }]);
        for (const topic of [Topics.presence, Topics.connections]) expect(await s.channels.progress.until(topic, await s.log.endOffsets(topic), 30_000)).toBe(true);
        expect(await s.presence.progress.until(Topics.presence, await s.log.endOffsets(Topics.presence), 30_000)).toBe(true);
        const channels = [...Array(CHANNELS).keys()].map((i) => `ch-${i}`).concat('late');
        return channels.map((channel) => ({ channel, members: s.presence.query({ appId, channel, limit: 1000 }).members, details: s.channels.details(appId, channel, now) }));
      };
      try {
        // 1. Churn: members enter and leave, connections attach and detach.
        const first = await start();
        const appId = first.service.registry.all()[0].appId;
        const presence: [string, LogEvent][] = [...Array(PRESENCE_EVENTS).keys()].map((i) => {
          const channel = `ch-${i % CHANNELS}`;
          const action = Math.floor(i / CHANNELS) % 3 === 2 ? 'leave' : 'enter';
          return [channelKey(appId, channel), { type: 'presence.changed', appId, channel, event: { action, id: `p${i}`, timestamp: now, clientId: `client-${(i * 7) % 25}`, connectionId: `conn-${i % 13}`, data: `d${i}` } }];
        });
        const connections: [string, LogEvent][] = [...Array(CONNECTION_EVENTS).keys()].map((i) => {
          const channel = `ch-${i % CHANNELS}`;
          const connectionId = `rt-${i % 17}`;
          const event: LogEvent = i % 3 === 2 ? { type: 'channel.detached', appId, channel, connectionId } : { type: 'channel.attached', appId, channel, connectionId, instanceId: 'elsewhere', modes: Flag.SUBSCRIBE | Flag.PRESENCE };
          return [channelKey(appId, channel), event];
        });
        await append(first.service.log, Topics.presence, presence);
        await append(first.service.log, Topics.connections, connections);
        const presenceEnd = await first.service.log.endOffsets(Topics.presence);
        const connectionsEnd = await first.service.log.endOffsets(Topics.connections);
        const caughtUp = () => writersCaughtUp(first.service, [[Topics.presence, presenceEnd], [Topics.connections, connectionsEnd]]);
        // And, in production mode, the writers of both topics (writersCaughtUp): a start that
        // answered at once (one consumer group fewer to join) is closed before they are handed
        // their partitions otherwise, and the restart reads from their stores' checkpoints.
        for (let i = 0; i < 3000 && (before(readBy(first.handed, 'presence'), presenceEnd) < PRESENCE_EVENTS || before(readBy(first.handed, 'channels-connections'), connectionsEnd) < CONNECTION_EVENTS || !caughtUp()); i++) await new Promise((r) => setTimeout(r, 20));
        expect(caughtUp()).toBe(true);
        expect(first.service.presence.memberCount(appId)).toBeGreaterThan(0);
        // The graceful close saves both snapshots.
        await close(first.service);
        expect(readdirSync(join(dataDir, 'snapshots')).sort()).toEqual(['apps', 'channels', 'presence']);

        // 2. More changes while it is down; the restart is long after them (no history window to refill).
        now += 10 * 60_000;
        const writer = await mode.adapters(parseConfig({ DATA_DIR: dataDir, ...mode.env() }), isolation);
        if (writer.log.kind === 'embedded') await writer.close?.(); // only its log is used: the DATA_DIR lock goes
        const late: [string, LogEvent][] = [...Array(LATE).keys()].map((i) => [channelKey(appId, 'late'), { type: 'presence.changed', appId, channel: 'late', event: { action: 'enter', id: `late${i}`, timestamp: now, clientId: `late-${i}`, connectionId: 'late-conn' } }]);
        await append(writer.log, Topics.presence, late);
        const presenceEnds = await writer.log.endOffsets(Topics.presence);
        const connectionEnds = await writer.log.endOffsets(Topics.connections);
        // The churn and what the first start appended itself (its instance.started).
        const connectionRecords = [...connectionEnds.values()].reduce((a, b) => a + b, 0);
        expect(connectionRecords).toBeGreaterThanOrEqual(CONNECTION_EVENTS);
        await writer.log.close();
        if (writer.log.kind === 'kafka') await writer.close?.();

        // 3. From the snapshots: only the records after them.
        const restored = await start();
        expect(before(readBy(restored.handed, 'presence'), presenceEnds)).toBe(LATE);
        expect(before(readBy(restored.handed, 'channels-presence'), presenceEnds)).toBe(LATE);
        expect(before(readBy(restored.handed, 'channels-connections'), connectionEnds)).toBe(0);
        expect(restored.warnings.filter((w) => w.projection !== undefined)).toEqual([]);
        const fromSnapshot = await stateOf(restored.service, appId);
        expect(fromSnapshot.find((c) => c.channel === 'late')!.members).toHaveLength(LATE);
        await close(restored.service);

        // 4. A full replay (snapshots off) reads everything and ends in the same state.
        const replayed = await start({ SNAPSHOT_INTERVAL_MS: '0' });
        expect(before(readBy(replayed.handed, 'presence'), presenceEnds)).toBe(PRESENCE_EVENTS + LATE);
        expect(before(readBy(replayed.handed, 'channels-connections'), connectionEnds)).toBe(connectionRecords);
        expect(await stateOf(replayed.service, appId)).toEqual(fromSnapshot);
        await close(replayed.service);

        // 5. Every presence snapshot corrupt, every channels snapshot of an older version: full
        // replays, each with warnings saying why, and the same state again.
        const files = (name: string) => readdirSync(join(dataDir, 'snapshots', name)).filter((f) => f.endsWith('.snap')).map((f) => join(dataDir, 'snapshots', name, f));
        for (const file of files('presence')) {
          const bytes = readFileSync(file);
          bytes[bytes.length - 1] ^= 0xff;
          writeFileSync(file, bytes);
        }
        for (const file of files('channels')) {
          const bytes = readFileSync(file);
          const eol = bytes.indexOf(10);
          const header = JSON.parse(bytes.subarray(0, eol).toString()) as { version: number };
          writeFileSync(file, Buffer.concat([Buffer.from(JSON.stringify({ ...header, version: 0 })), bytes.subarray(eol)]));
        }
        const fallback = await start();
        expect(before(readBy(fallback.handed, 'presence'), presenceEnds)).toBe(PRESENCE_EVENTS + LATE);
        expect(before(readBy(fallback.handed, 'channels-connections'), connectionEnds)).toBe(connectionRecords);
        const reasons = (projection: string) => fallback.warnings.filter((w) => w.projection === projection).map((w) => w.reason ?? w.msg);
        const presenceReasons = [...files('presence').map(() => 'its checksum does not match: corrupt'), 'no usable snapshot: the projection replays its topics whole'];
        // Production mode: the presence writer, once its group hands it partitions, loads them again
        // for its member set (a stop drains it: the group may now form within the test).
        expect([presenceReasons, [...presenceReasons, ...presenceReasons]]).toContainEqual(reasons('presence'));
        expect(reasons('channels')[0]).toBe("version 0 of the projection's state, this build reads version 1 (written by an older build)");
        expect(reasons('channels').at(-1)).toBe('no usable snapshot: the projection replays its topics whole');
        expect(await stateOf(fallback.service, appId)).toEqual(fromSnapshot);
        await close(fallback.service);
      } finally {
        for (const s of services) await s.close().catch(() => undefined);
        await mode.cleanUp?.(isolation);
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 120_000);
  });
}
