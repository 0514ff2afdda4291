// The stats reader's bounded start (issue 23, items 5 and 6): with the rollups written by one
// instance (the roller, projections/stats/stats-reader.ts), a start reads each stats topic from
// the samples' checkpoint, never from the rollups' one when that is behind or missing: the records
// in between are rolled up by time range by the roller. Here the rollups' checkpoint of presence is
// set back to 0 and the minute rollups are deleted while the instance is down; the restart reads no
// presence record from before the log's end (the member set and channels start from their
// snapshots, the stats reader from the samples), and its GET /stats comes back to what it answered
// before. A graceful stop's last roll-up leaves the rollups' checkpoint at the samples'.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import pino from 'pino';
import type { AddressInfo } from 'node:net';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown, type ProductionInfra, clickhouse } from '../helpers/production.js';
import { countingAdapters, handedBefore } from '../helpers/counting-log.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { channelKey } from '../../src/log/partitioner.js';
import { Topics } from '../../src/log/port.js';
import { rolledTopic, type StatsCheckpoint } from '../../projections/stats/stats-store.js';
import type { ClickHouseStatsStore } from '../../projections/stats/clickhouse-stats-store.js';
import { basic } from '../helpers/service.js';

const infra = await findProductionInfra();
const KEY = 'statsgap.k1:stats-gap-secret';
const EVENTS = 400;
const CHANNELS = 16;
const { services, until } = productionTeardown();

const applied = (c: StatsCheckpoint): Map<number, number> => new Map([...c].map(([p, v]) => [p, v.applied ?? v.from]));

describeWithInfra('production mode: a stats reader whose rollups checkpoint is behind starts from the samples', 'Kafka and ClickHouse', infra, (found) => {
  it('a restart with the rollups checkpoint of presence set back to 0 reads no presence record before the end, and its roller rolls the gap up by time range', async () => {
    const tag = randomBytes(3).toString('hex');
    const isolation = { topicPrefix: `sgap-${tag}-`, tablePrefix: `sgap_${tag}_` };
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-stats-gap-'));
    const instanceId = `sgap-${tag}`;
    const start = async () => {
      const { config } = productionConfig(found, [{ appId: 'statsgap', keys: [{ key: KEY }] }], { INSTANCE_ID: instanceId, DATA_DIR: dataDir, SNAPSHOT_INTERVAL_MS: '3600000' });
      const logger = pino({ level: 'silent' });
      const raw = await productionAdapters(config, logger, isolation);
      const { adapters, handed } = countingAdapters(raw, instanceId);
      const service = await startService(config, logger, adapters);
      services.push(service);
      await service.app.listen({ port: 0, host: '127.0.0.1' });
      return { service, handed, store: raw.statsStore as ClickHouseStatsStore, port: (service.app.server.address() as AddressInfo).port };
    };
    const minutes = async (port: number): Promise<unknown> => {
      const res = await fetch(`http://127.0.0.1:${port}/stats?unit=minute&direction=forwards&limit=100&start=${Date.now() - 3_600_000}`, { headers: { authorization: basic(KEY), 'x-ably-version': '6' } });
      expect(res.status, await res.clone().text()).toBe(200);
      // Presence's figures only: the instance's own API requests (these reads) are counted too.
      const presenceOf = (entries: Record<string, number> = {}) => Object.fromEntries(Object.entries(entries).filter(([name]) => name.includes('presence')));
      return ((await res.json()) as { intervalId: string; entries?: Record<string, number> }[]).map((r) => ({ intervalId: r.intervalId, entries: presenceOf(r.entries) })).filter((r) => Object.keys(r.entries).length > 0);
    };
    const caughtUpIn = async (store: ClickHouseStatsStore, topic: string, ends: Map<number, number>): Promise<boolean> => {
      const at = applied(await store.loadCheckpoint(topic));
      return [...ends].every(([p, end]) => (at.get(p) ?? 0) >= end);
    };
    const close = async (s: Service) => {
      await s.close();
      services.splice(services.indexOf(s), 1);
    };
    try {
      // 1. Presence churn on an instance that is the roller (its only instance).
      const first = await start();
      // Older than presence history's window (HISTORY_TAIL_MS): the restart's member set may start from its snapshot.
      const now = Date.now() - 10 * 60_000;
      const events = [...Array(EVENTS).keys()].map((i) => {
        const channel = `ch-${i % CHANNELS}`;
        const action = Math.floor(i / CHANNELS) % 3 === 2 ? 'leave' : 'enter';
        return { key: channelKey('statsgap', channel), value: encodeEvent({ type: 'presence.changed', appId: 'statsgap', channel, event: { action, id: `p${i}`, timestamp: now, clientId: `c${i % 9}`, connectionId: `conn-${i % 5}` } }), timestamp: now };
      });
      await first.service.log.append(Topics.presence, events);
      const ends = await first.service.log.endOffsets(Topics.presence);
      // And presence history's writer (the member set's snapshot serves only if its store holds what the snapshot covers).
      const presenceWriterAt = () => first.service.runner.consumer('presence-writer').positions();
      await until(
        'the samples, rollups and presence history of every presence record',
        async () => [...ends].every(([p, end]) => (presenceWriterAt().get(p) ?? 0) >= end) && (await caughtUpIn(first.store, Topics.presence, ends)) && (await caughtUpIn(first.store, rolledTopic(Topics.presence), ends)),
        60_000,
      );
      const before = await minutes(first.port);
      expect(JSON.stringify(before)).toContain('presence');
      await close(first.service);
      // The graceful stop's last roll-up: the rollups' checkpoint is at the samples'.
      expect(applied(await first.store.loadCheckpoint(rolledTopic(Topics.presence)))).toEqual(applied(await first.store.loadCheckpoint(Topics.presence)));

      // 2. While it is down: the rollups' checkpoint of presence back to 0, the minute rollups gone.
      const checkpoints = `${isolation.tablePrefix}stats_checkpoints`;
      const rollups = `${isolation.tablePrefix}stats_rollups`;
      const version = Number(await clickhouse(found, `SELECT max(version) + 1 FROM ${checkpoints}`));
      const rows = [...ends.keys()].map((p) => `('${rolledTopic(Topics.presence)}', ${p}, 0, -1, ${version}, 0)`).join(', ');
      await clickhouse(found, `INSERT INTO ${checkpoints} (topic, partition, from_offset, finalized, version, applied_offset) VALUES ${rows}`);
      await clickhouse(found, `ALTER TABLE ${rollups} DELETE WHERE unit = 1`);
      await until('the minute rollups deleted', async () => Number(await clickhouse(found, `SELECT count() FROM ${rollups} WHERE unit = 1`)) === 0, 30_000);

      // 3. The restart reads no presence record from before the end: the member set and channels
      // from their snapshots, the stats reader from the samples' checkpoint.
      const restarted = await start();
      expect(handedBefore(restarted.handed.get('presence-feed'), ends)).toBe(0);
      // Its roller (once the messages writers' group gives it partition 0) rolls the gap up by time range.
      await until('the rollups checkpoint of presence back at the samples\'', () => caughtUpIn(restarted.store, rolledTopic(Topics.presence), ends), 60_000);
      expect(await minutes(restarted.port)).toEqual(before);
      await close(restarted.service);
    } finally {
      for (const s of services.splice(0)) await s.close().catch(() => undefined);
      const names = await clickhouse(found, `SELECT name FROM system.tables WHERE database = currentDatabase() AND startsWith(name, '${isolation.tablePrefix}')`);
      for (const name of names.split('\n').filter((n) => n !== '')) await clickhouse(found, `DROP TABLE IF EXISTS \`${name}\``);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
