// A graceful stop in production mode drains the writers shared among the instances (presence
// history, stats: projections/runner.ts, stop) before its snapshots are saved, so that the next
// start uses the stop's presence snapshot (README: A bounded start). The instance is closed as soon
// as the projections it reads have applied the churn, while the writers' consumer groups may not
// have been handed their partitions yet: without the drain, presence history's store lags the
// member set, the snapshot is refused and the restart replays the topic. Asserted on the records
// the restart's consumers were handed, never on time. Kafka + ClickHouse only (the embedded mode
// has no shared writers); required under REQUIRE_INFRA=1.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig, type Config } from '../../src/config.js';
import { startService, type Adapters, type Service } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics } from '../../src/log/port.js';
import { findProductionInfra } from '../helpers/production.js';
import { requireInfra } from '../helpers/infra.js';
import { countingAdapters, handedBefore as before } from '../helpers/counting-log.js';

const found = await findProductionInfra();
afterAll(() => found?.stop());

const CHANNELS = 20;
const PRESENCE_EVENTS = 1500;
const LATE = 23;

describe.skipIf(!found && !requireInfra)('graceful stop in production mode', () => {
  it('drains the shared writers, so that a start right after a close uses the stop snapshot and reads only the presence records after it', async () => {
    if (!found) throw new Error('Kafka and ClickHouse not found and REQUIRE_INFRA=1 (run `bash infra/local/start.sh`)');
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-stop-drain-'));
    const tag = randomBytes(4).toString('hex');
    const isolation = { topicPrefix: `drain-${tag}-`, tablePrefix: `drain_${tag}_` };
    const instanceId = `drain-${tag}`;
    const env = { KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: '0' };
    const adaptersFor = async (config: Config): Promise<Adapters> => (await import('../../src/production-adapters.js')).productionAdapters(config, pino({ level: 'silent' }), isolation);
    // A start right after a stop joins writer groups the stopped instance's members were in: on the
    // local mock broker they are handed partitions once those members' sessions time out, so the
    // shortest session timeout, and a shutdown whose drain (half of it) outlasts it.
    // DATA_DIR's snapshots alone (the shared ones' writes and reads, some ClickHouse round trips at
    // each stop and start, let the groups form before the close on a loaded machine; they are
    // test/e2e/production-shared-snapshot.test.ts's).
    const stopEnv = { KAFKA_SESSION_TIMEOUT_MS: '6000', SHUTDOWN_TIMEOUT_MS: '30000', SHARED_SNAPSHOT_INTERVAL_MS: '0' };
    const services: Service[] = [];
    let now = Date.now();
    const clock = { now: () => now };
    const start = async () => {
      const lines: { level: number; msg: string; projection?: string; reason?: string; writers?: unknown[] }[] = [];
      const logger = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
      const config = parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', INSTANCE_ID: instanceId, SNAPSHOT_INTERVAL_MS: '3600000', ...stopEnv, ...env });
      const { adapters, handed } = countingAdapters(await adaptersFor(config), instanceId);
      const service = await startService(config, logger, adapters, clock);
      services.push(service);
      return { service, handed, lines };
    };
    const close = async (s: Service) => {
      await s.close();
      services.splice(services.indexOf(s), 1);
    };
    /** Appends to the presence topic through a log of its own (no instance running), returning the log's ends after. */
    const appendAlone = async (events: [string, LogEvent][]): Promise<Map<number, number>> => {
      const writer = await adaptersFor(parseConfig({ DATA_DIR: dataDir, ...env }));
      for (let i = 0; i < events.length; i += 500) {
        await writer.log.append(Topics.presence, events.slice(i, i + 500).map(([key, event]) => ({ key, value: encodeEvent(event), timestamp: now })));
      }
      const ends = await writer.log.endOffsets(Topics.presence);
      await writer.log.close();
      await writer.close?.();
      return ends;
    };
    const membersOf = (s: Service, appId: string) => [...Array(CHANNELS).keys()].map((i) => s.presence.query({ appId, channel: `ch-${i}`, limit: 1000 }).members);
    try {
      // 1. A first start makes the sandbox app.
      const made = await start();
      const appId = made.service.registry.all()[0].appId;
      await close(made.service);

      // 2. Churn while no instance runs; a start applies it before it resolves (the projections
      // it reads) and is closed at once: its writers' consumer groups are still forming.
      const churn: [string, LogEvent][] = [...Array(PRESENCE_EVENTS).keys()].map((i) => {
        const channel = `ch-${i % CHANNELS}`;
        const action = Math.floor(i / CHANNELS) % 3 === 2 ? 'leave' : 'enter';
        return [channelKey(appId, channel), { type: 'presence.changed', appId, channel, event: { action, id: `p${i}`, timestamp: now, clientId: `client-${(i * 7) % 25}`, connectionId: `conn-${i % 13}`, data: `d${i}` } }];
      });
      const churnEnd = await appendAlone(churn);
      const first = await start();
      expect(before(first.handed.get('presence-feed'), churnEnd)).toBe(PRESENCE_EVENTS);
      const members = membersOf(first.service, appId);
      expect(members.flat().length).toBeGreaterThan(0);
      await close(first.service);
      // It said what it waited for, and gave up on nothing.
      expect(first.lines.filter((l) => l.msg.startsWith('stop: gave up'))).toEqual([]);
      expect(first.lines.find((l) => l.msg.startsWith('stop: waiting for the shared writers'))?.writers).toContainEqual({ consumer: 'presence-writer', topic: Topics.presence, waitingForPartitions: true });

      // 3. Presence changes while it is down; the restart is long after them (past the history window).
      now += 10 * 60_000;
      const late: [string, LogEvent][] = [...Array(LATE).keys()].map((i) => [channelKey(appId, 'late'), { type: 'presence.changed', appId, channel: 'late', event: { action: 'enter', id: `late${i}`, timestamp: now, clientId: `late-${i}`, connectionId: 'late-conn' } }]);
      const ends = await appendAlone(late);

      // 4. The restart restores the stop's presence snapshot: its presence consumer (shared by the
      // member set, channels and the stats reader, which resumes at the stats store's checkpoint)
      // is handed only the records appended after it, and no snapshot was passed over.
      const restored = await start();
      // (The presence writer, handed its partitions, restores its member set from it as well.)
      expect(new Set(restored.lines.filter((l) => l.projection === 'presence').map((l) => l.reason ?? l.msg))).toEqual(new Set(['projection restored from its snapshot; reading the log after it']));
      expect(before(restored.handed.get('presence-feed'), ends)).toBe(LATE);
      expect(membersOf(restored.service, appId)).toEqual(members);
      expect(restored.service.presence.query({ appId, channel: 'late', limit: 1000 }).members).toHaveLength(LATE);
      await close(restored.service);
    } finally {
      for (const s of services) await s.close().catch(() => undefined);
      const query = async (sql: string): Promise<string> => (await fetch(found!.clickhouseUrl, { method: 'POST', body: sql })).text();
      const names = await query(`SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${isolation.tablePrefix}')`).catch(() => '');
      for (const name of names.split('\n').filter((n) => n !== '')) await query(`DROP TABLE IF EXISTS \`${name}\``);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
