// A bounded start for the apps topic (issue 23 item 6): after many key changes, sandbox apps and
// token revocations, a restart restores the apps registry and the revocations from their snapshot
// and reads only the apps topic after it; with a changed apps file the result equals a full
// replay's over that file; a corrupt snapshot falls back to the full replay with a warning.
// Asserted on the offsets the apps consumer was handed after each restart, never on time.
// Embedded always; production mode (Kafka + ClickHouse) where the infrastructure is found,
// required under REQUIRE_INFRA=1.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig, type Config } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters, type Service } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics, type Log } from '../../src/log/port.js';
import { findProductionInfra } from '../helpers/production.js';
import { requireInfra } from '../helpers/infra.js';
import { countingAdapters, handedBefore as before } from '../helpers/counting-log.js';

const found = await findProductionInfra();
afterAll(() => found?.stop());

interface Mode {
  name: string;
  env: () => Record<string, string>;
  adapters: (config: Config, isolation: { topicPrefix: string; tablePrefix: string }) => Promise<Adapters>;
  cleanUp?: (isolation: { tablePrefix: string }) => Promise<void>;
}

const embedded: Mode = { name: 'embedded', env: () => ({}), adapters: async (config) => embeddedAdapters(config) };
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

const APP = 'snapapp';
const KEYS = 40;
const UPDATES = 1200;
const SANDBOX_APPS = 30;
const REVOCATIONS = 600;
const LATE = 9;

for (const mode of [embedded, production]) {
  if (!mode) {
    describe.skipIf(!requireInfra)('apps topic bounded start in production mode', () => {
      it('needs Kafka and ClickHouse', () => {
        throw new Error('Kafka and ClickHouse not found and REQUIRE_INFRA=1 (run `bash infra/local/start.sh`)');
      });
    });
    continue;
  }
  describe(`apps topic bounded start: ${mode.name}`, () => {
    it('a restart after many key changes and revocations reads only the apps topic after the snapshot, equals a full replay over a changed apps file, and falls back to one on a corrupt snapshot', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'cm-apps-snapshot-'));
      const tag = randomBytes(4).toString('hex');
      const isolation = { topicPrefix: `appsnap-${tag}-`, tablePrefix: `appsnap_${tag}_` };
      const instanceId = `appsnap-${tag}`;
      const appsFile = join(dataDir, 'apps.json');
      const writeApps = (persisted: boolean) =>
        writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: APP, keys: [{ key: `${APP}.root:root-secret-root-secret` }], namespaces: persisted ? [{ id: 'kept', persisted: true }] : [] }] }));
      writeApps(false);
      const now = Date.now();
      const services: Service[] = [];
      const start = async (env: Record<string, string> = {}) => {
        const warnings: { msg: string; reason?: string; projection?: string }[] = [];
        const logger = pino({ level: 'warn' }, { write: (l: string) => warnings.push(JSON.parse(l)) });
        const config = parseConfig({ DATA_DIR: dataDir, APPS_FILE: appsFile, INSTANCE_ID: instanceId, SNAPSHOT_INTERVAL_MS: '3600000', LOG_LEVEL: 'silent', ...mode.env(), ...env });
        const { adapters, handed } = countingAdapters(await mode.adapters(config, isolation), instanceId);
        const service = await startService(config, logger, adapters);
        services.push(service);
        return { service, handed, warnings };
      };
      const close = async (s: Service) => {
        await s.close();
        services.splice(services.indexOf(s), 1);
      };
      const append = async (log: Log, events: LogEvent[]) => {
        for (let i = 0; i < events.length; i += 500) {
          await log.append(Topics.apps, events.slice(i, i + 500).map((event) => ({ key: 'appId' in event ? event.appId : event.type === 'app.created' ? event.app.appId : APP, value: encodeEvent(event), timestamp: now })));
        }
      };
      const sorted = <T>(items: T[]): T[] => items.map((i) => JSON.stringify(i)).sort().map((s) => JSON.parse(s) as T);
      // An apps file's app is made at each start (its createdAt is the start's time).
      const stateOf = (s: Service) => ({
        apps: sorted(s.registry.all().map((a) => (a.source === 'file' ? { ...a, createdAt: 0 } : a))),
        revocations: sorted(s.revocations.snapshot()),
        held: s.revocations.held(),
      });
      try {
        // 1. Keys made and changed, sandbox apps made and some deleted, tokens revoked.
        const first = await start();
        const events: LogEvent[] = [];
        for (let k = 0; k < KEYS; k++) events.push({ type: 'key.created', appId: APP, key: { keyName: `${APP}.k${k}`, keySecret: `secret-${k}`, capability: '{"*":["*"]}', created: now } });
        for (let i = 0; i < UPDATES; i++) events.push({ type: 'key.updated', appId: APP, keyName: `${APP}.k${i % KEYS}`, modified: now + i, ...(i % 3 ? { name: `name ${i}` } : { capability: `{"ch-${i}":["publish"]}` }) });
        for (let k = 0; k < KEYS; k += 4) events.push({ type: 'key.revoked', appId: APP, keyName: `${APP}.k${k}`, modified: now });
        for (let a = 0; a < SANDBOX_APPS; a++) events.push({ type: 'app.created', app: { appId: `sandbox-${a}`, accountId: 'acct', keys: [{ keyName: `sandbox-${a}.k`, keySecret: 's', capability: '{"*":["*"]}' }], namespaces: [], source: 'sandbox', createdAt: now } });
        for (let a = 0; a < SANDBOX_APPS; a += 3) events.push({ type: 'app.deleted', appId: `sandbox-${a}` });
        for (let r = 0; r < REVOCATIONS; r++) {
          events.push({ type: 'tokens.revoked', appId: APP, keyName: `${APP}.k${r % KEYS}`, targets: [`clientId:c${r % 97}`], issuedBefore: now - (r % 50) * 1000, appliesAt: now + (r % 7) * 1000 });
        }
        await append(first.service.log, events);
        const ends = await first.service.log.endOffsets(Topics.apps);
        for (let i = 0; i < 3000 && before(first.handed.get('apps'), ends) < events.length; i++) await new Promise((r) => setTimeout(r, 20));
        expect(before(first.handed.get('apps'), ends)).toBe(events.length);
        await close(first.service);
        expect(readdirSync(join(dataDir, 'snapshots', 'apps')).filter((f) => f.endsWith('.snap'))).toHaveLength(1);

        // 2. More while it is down; and the apps file changes (a namespace rule for the app whose keys the topic changed).
        const writer = await mode.adapters(parseConfig({ DATA_DIR: dataDir, ...mode.env() }), isolation);
        if (writer.log.kind === 'embedded') await writer.close?.();
        const late: LogEvent[] = [
          ...Array.from({ length: LATE - 2 }, (_, i): LogEvent => ({ type: 'key.updated', appId: APP, keyName: `${APP}.k${i}`, modified: now + UPDATES + i, name: `late ${i}` })),
          { type: 'tokens.revoked', appId: APP, keyName: `${APP}.k1`, targets: ['clientId:late'], issuedBefore: now, appliesAt: now },
          { type: 'app.deleted', appId: 'sandbox-1' },
        ];
        await append(writer.log, late);
        const lateEnds = await writer.log.endOffsets(Topics.apps);
        await writer.log.close();
        if (writer.log.kind === 'kafka') await writer.close?.();
        writeApps(true);

        // 3. From the snapshot: only the records after it.
        const restored = await start();
        expect(before(restored.handed.get('apps'), lateEnds)).toBe(LATE);
        expect(restored.warnings.filter((w) => w.projection !== undefined)).toEqual([]);
        const fromSnapshot = stateOf(restored.service);
        expect(restored.service.registry.rule(APP, 'kept:x')?.persisted).toBe(true);
        expect(restored.service.registry.key(`${APP}.k3`)?.key.name).toBe('late 3');
        expect(restored.service.registry.app('sandbox-1')).toBeUndefined();
        expect(restored.service.revocations.isRevoked({ keyName: `${APP}.k1`, method: 'token', issued: now - 1, clientId: 'late' }, now)).toBe(true);
        await close(restored.service);

        // 4. A full replay (snapshots off) over the same apps file reads everything and ends in the same state.
        const replayed = await start({ SNAPSHOT_INTERVAL_MS: '0' });
        expect(before(replayed.handed.get('apps'), lateEnds)).toBe(events.length + LATE);
        expect(stateOf(replayed.service)).toEqual(fromSnapshot);
        await close(replayed.service);

        // 5. Every apps snapshot corrupt: a full replay with a warning saying why, the same state again.
        const files = readdirSync(join(dataDir, 'snapshots', 'apps')).filter((f) => f.endsWith('.snap')).map((f) => join(dataDir, 'snapshots', 'apps', f));
        for (const file of files) {
          const bytes = readFileSync(file);
          bytes[bytes.length - 1] ^= 0xff;
          writeFileSync(file, bytes);
        }
        const fallback = await start();
        expect(before(fallback.handed.get('apps'), lateEnds)).toBe(events.length + LATE);
        expect(fallback.warnings.filter((w) => w.projection === 'apps').map((w) => w.reason ?? w.msg)).toEqual([
          ...files.map(() => 'its checksum does not match: corrupt'),
          'no usable snapshot: the projection replays its topics whole',
        ]);
        expect(stateOf(fallback.service)).toEqual(fromSnapshot);
        await close(fallback.service);
      } finally {
        for (const s of services) await s.close().catch(() => undefined);
        await mode.cleanUp?.(isolation);
        rmSync(dataDir, { recursive: true, force: true });
      }
    }, 180_000);
  });
}
