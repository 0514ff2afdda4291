// A bounded start of a NEW instance (README: A bounded start, issue 23 item 6): in production mode
// the in-memory projections' snapshots are also kept in ClickHouse, so an instance with an empty
// DATA_DIR (scaled out, replaced) starts from the newest one there and is handed only the records
// after it, ending in the state a full replay makes; a corrupt shared snapshot falls back to the
// full replay with a warning saying why. Asserted on the offsets each consumer was handed, never on
// time. Needs Kafka and ClickHouse (required under REQUIRE_INFRA=1).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
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

const CHANNELS = 40;
const PRESENCE_EVENTS = 3000;
const CONNECTION_EVENTS = 300;
const LATE = 23;

describe.skipIf(!found && !requireInfra)('shared snapshots: a new instance starts from the newest one in ClickHouse', () => {
  it('an instance with an empty DATA_DIR is handed only the records after the shared snapshot and answers presence as a full replay does; a corrupt shared snapshot falls back to the full replay with a warning', async () => {
    if (!found) throw new Error('Kafka and ClickHouse not found and REQUIRE_INFRA=1 (run `bash infra/local/start.sh`)');
    const tag = randomBytes(4).toString('hex');
    const isolation = { topicPrefix: `ssnap-${tag}-`, tablePrefix: `ssnap_${tag}_` };
    const env = { KAFKA_BROKERS: found.brokers.join(','), CLICKHOUSE_URL: found.clickhouseUrl, KAFKA_IDEMPOTENT: '0', SANDBOX: '1', SNAPSHOT_INTERVAL_MS: '3600000' };
    // The instances' clock: a start long after the churn (past HISTORY_TAIL_MS) needs no member
    // set as it was at the window's start, which only a snapshot older than the window gives
    // (projections/presence: PresenceProjection.start).
    let now = Date.now();
    const clock = { now: () => now };
    const dirs: string[] = [];
    const services: Service[] = [];
    const query = async (statement: string): Promise<string> => {
      const res = await fetch(found.clickhouseUrl, { method: 'POST', body: statement });
      const text = await res.text();
      if (!res.ok) throw new Error(`ClickHouse: ${text}`);
      return text;
    };
    // Each instance with a DATA_DIR of its own, new and empty.
    const start = async (instanceId: string, more: Record<string, string> = {}) => {
      const dataDir = mkdtempSync(join(tmpdir(), `cm-shared-snap-${instanceId}-`));
      dirs.push(dataDir);
      const warnings: { msg: string; reason?: string; projection?: string; shared?: boolean }[] = [];
      const logger = pino({ level: 'warn' }, { write: (l: string) => warnings.push(JSON.parse(l)) });
      const config = parseConfig({ DATA_DIR: dataDir, INSTANCE_ID: instanceId, ...env, ...more });
      const { adapters, handed } = countingAdapters(await productionAdapters(config, pino({ level: 'silent' }), isolation), instanceId);
      const service = await startService(config, logger, adapters, clock);
      services.push(service);
      return { service, handed, warnings };
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
    const channels = [...Array(CHANNELS).keys()].map((i) => `ch-${i}`).concat('late');
    const stateOf = async (s: Service, appId: string) => {
      for (const topic of [Topics.presence, Topics.connections]) expect(await s.channels.progress.until(topic, await s.log.endOffsets(topic), 30_000)).toBe(true);
      expect(await s.presence.progress.until(Topics.presence, await s.log.endOffsets(Topics.presence), 30_000)).toBe(true);
      return channels.map((channel) => ({ channel, members: s.presence.query({ appId, channel, limit: 1000 }).members, details: s.channels.details(appId, channel, now) }));
    };
    try {
      // 1. The first instance: presence churn (members enter and leave) and attachments.
      const first = await start(`a-${tag}`);
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
      // Applied, and written by the shared writers (presence history's store must not be behind the snapshot).
      const ready = () =>
        before(readBy(first.handed, 'presence'), presenceEnd) >= PRESENCE_EVENTS &&
        before(readBy(first.handed, 'channels-connections'), connectionsEnd) >= CONNECTION_EVENTS &&
        writersCaughtUp(first.service, [[Topics.presence, presenceEnd], [Topics.connections, connectionsEnd]]);
      for (let i = 0; i < 3000 && !ready(); i++) await new Promise((r) => setTimeout(r, 20));
      expect(ready()).toBe(true);
      expect(first.service.presence.memberCount(appId)).toBeGreaterThan(0);
      // Its graceful stop shares its snapshots.
      await close(first.service);
      const shared = await query(`SELECT name, count() FROM ${isolation.tablePrefix}projection_snapshots GROUP BY name ORDER BY name FORMAT TSV`);
      expect(shared).toBe('apps\t1\nchannels\t1\npresence\t1\n');

      // 2. More changes meanwhile; the new instance starts long after them.
      now += 10 * 60_000;
      const late: [string, LogEvent][] = [...Array(LATE).keys()].map((i) => [channelKey(appId, 'late'), { type: 'presence.changed', appId, channel: 'late', event: { action: 'enter', id: `late${i}`, timestamp: now, clientId: `late-${i}`, connectionId: 'late-conn' } }]);
      const writerDir = mkdtempSync(join(tmpdir(), 'cm-shared-snap-w-'));
      dirs.push(writerDir);
      const writer = await productionAdapters(parseConfig({ DATA_DIR: writerDir, ...env }), pino({ level: 'silent' }), isolation);
      await append(writer.log, Topics.presence, late);
      const presenceEnds = await writer.log.endOffsets(Topics.presence);
      const connectionEnds = await writer.log.endOffsets(Topics.connections);
      const connectionRecords = [...connectionEnds.values()].reduce((a, b) => a + b, 0);
      await writer.log.close();
      await writer.close?.();

      // 3. A new instance, empty DATA_DIR: from the shared snapshots, only the records after them.
      const second = await start(`b-${tag}`);
      expect(before(readBy(second.handed, 'presence'), presenceEnds)).toBe(LATE);
      expect(before(readBy(second.handed, 'channels-presence'), presenceEnds)).toBe(LATE);
      expect(before(readBy(second.handed, 'channels-connections'), connectionEnds)).toBe(0);
      expect(second.warnings.filter((w) => w.projection !== undefined)).toEqual([]);
      const fromShared = await stateOf(second.service, appId);
      expect(fromShared.find((c) => c.channel === 'late')!.members).toHaveLength(LATE);
      expect(fromShared.reduce((n, c) => n + c.members.length, 0)).toBeGreaterThan(LATE);
      await close(second.service);

      // 4. A full replay (snapshots off) reads everything and answers the same.
      const replayed = await start(`c-${tag}`, { SNAPSHOT_INTERVAL_MS: '0' });
      expect(before(readBy(replayed.handed, 'presence'), presenceEnds)).toBe(PRESENCE_EVENTS + LATE);
      expect(await stateOf(replayed.service, appId)).toEqual(fromShared);
      await close(replayed.service);

      // 5. Every shared presence snapshot corrupt (a byte of its state flipped), none of its own: a
      // new instance replays the presence topic whole, with a warning naming the shared snapshot.
      const rows = (await query(`SELECT * FROM ${isolation.tablePrefix}projection_snapshots FORMAT JSONEachRow`)).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { name: string; blob: string });
      expect(rows.filter((r) => r.name === 'presence').length).toBeGreaterThan(0);
      for (const row of rows.filter((r) => r.name === 'presence')) {
        const bytes = Buffer.from(row.blob, 'base64');
        bytes[bytes.length - 1] ^= 0xff;
        row.blob = bytes.toString('base64');
      }
      await query(`TRUNCATE TABLE ${isolation.tablePrefix}projection_snapshots`);
      await query(`INSERT INTO ${isolation.tablePrefix}projection_snapshots FORMAT JSONEachRow\n${rows.map((r) => JSON.stringify(r)).join('\n')}`);
      const fallback = await start(`d-${tag}`);
      expect(before(readBy(fallback.handed, 'presence'), presenceEnds)).toBe(PRESENCE_EVENTS + LATE);
      const presenceWarnings = fallback.warnings.filter((w) => w.projection === 'presence');
      expect(presenceWarnings[0]).toMatchObject({ msg: 'snapshot not used', reason: 'its checksum does not match: corrupt', shared: true });
      expect(presenceWarnings.map((w) => w.msg)).toContain('no usable snapshot: the projection replays its topics whole');
      expect(await stateOf(fallback.service, appId)).toEqual(fromShared);
      await close(fallback.service);
    } finally {
      for (const s of services) await s.close().catch(() => undefined);
      const names = await query(`SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${isolation.tablePrefix}')`).catch(() => '');
      for (const name of names.split('\n').filter((n) => n !== '')) await query(`DROP TABLE IF EXISTS \`${name}\``).catch(() => undefined);
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  }, 180_000);
});
