// A snapshot of a log that was replaced since (README: A bounded start): log.db restored from a
// backup older than the snapshot, or lost, and the new log grown past the snapshot's positions
// before the next restart (the instance that replayed it crashed before its own snapshot). The
// restart must not take the old snapshot: it held the old log's revocations and would have read
// the new log only after the old positions, so a token revoked in the new log was accepted again.
// Embedded (a Kafka cluster made again behind the same KAFKA_BROKERS is the same case: the local
// mock broker cannot delete a topic, so it was reproduced by hand, see the README).
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters, startService, type Service } from '../../src/service.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import type { LogEvent } from '../../src/domain/events.js';
import { Topics } from '../../src/log/port.js';

const APP = 'resetapp';
const KEY = `${APP}.root`;

describe('a snapshot of a replaced log', () => {
  it('a restart after log.db was replaced and grew past the snapshot replays the new log whole: a token revoked there stays revoked, the old log\'s revocations are gone', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-snapshot-reset-'));
    const appsFile = join(dataDir, 'apps.json');
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: APP, keys: [{ key: `${KEY}:root-secret-root-secret`, revocableTokens: true }] }] }));
    const now = Date.now();
    const services: Service[] = [];
    const start = async () => {
      const warnings: { msg: string; reason?: string; projection?: string }[] = [];
      const logger = pino({ level: 'warn' }, { write: (l: string) => warnings.push(JSON.parse(l)) });
      const config = parseConfig({ DATA_DIR: dataDir, APPS_FILE: appsFile, SNAPSHOT_INTERVAL_MS: '3600000', LOG_LEVEL: 'silent' });
      const service = await startService(config, logger, embeddedAdapters(config));
      services.push(service);
      return { service, warnings };
    };
    const close = async (s: Service) => {
      await s.close();
      services.splice(services.indexOf(s), 1);
    };
    const revoke = (clientId: string): LogEvent => ({ type: 'tokens.revoked', appId: APP, keyName: KEY, targets: [`clientId:${clientId}`], issuedBefore: now, appliesAt: now });
    const append = (s: Service, events: LogEvent[]) => s.log.append(Topics.apps, events.map((event) => ({ key: APP, value: encodeEvent(event), timestamp: now })));
    const revoked = (s: Service, clientId: string) => s.revocations.isRevoked({ keyName: KEY, method: 'token', issued: now - 1, clientId }, now);
    const until = async (what: string, check: () => boolean) => {
      for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 20));
      if (!check()) throw new Error(`not so within 10 s: ${what}`);
    };
    const snapshotFiles = () => readdirSync(join(dataDir, 'snapshots', 'apps')).filter((f) => f.endsWith('.snap'));
    try {
      // 1. The old log: five revocations; the graceful stop saves the apps snapshot after them.
      const first = await start();
      await append(first.service, [0, 1, 2, 3, 4].map((i) => revoke(`old-${i}`)));
      await until('the old revocations applied', () => revoked(first.service, 'old-4'));
      await close(first.service);
      const oldSnapshots = snapshotFiles();
      expect(oldSnapshots).toHaveLength(1);

      // 2. log.db replaced (here: lost; a backup older than the snapshot is the same), the snapshots kept.
      // The folder moved aside whole and made again with the snapshots and the apps file only (not
      // log.db deleted in place: a closed service's SQLite handles may linger for a moment in this process).
      renameSync(dataDir, `${dataDir}-old`);
      mkdirSync(dataDir);
      renameSync(join(`${dataDir}-old`, 'snapshots'), join(dataDir, 'snapshots'));
      renameSync(join(`${dataDir}-old`, 'apps.json'), appsFile);
      const second = await start();
      expect(second.warnings.some((w) => w.projection === 'apps' && /past the log's end/.test(w.reason ?? ''))).toBe(true);
      // The new log: mallory's token revoked first, then enough records to pass the old snapshot's position.
      await append(second.service, [revoke('mallory'), ...[0, 1, 2, 3, 4, 5, 6].map((i) => revoke(`new-${i}`))]);
      await until('the new revocations applied', () => revoked(second.service, 'mallory') && revoked(second.service, 'new-6'));
      await close(second.service);
      // It crashed instead (kill -9): no snapshot of its own, the old one the newest there is.
      for (const f of snapshotFiles()) if (!oldSnapshots.includes(f)) rmSync(join(dataDir, 'snapshots', 'apps', f));

      // 3. The restart: the old snapshot is refused, the new log read whole.
      const third = await start();
      await until('the new log applied', () => revoked(third.service, 'new-6'));
      expect(revoked(third.service, 'mallory')).toBe(true);
      expect(revoked(third.service, 'old-0')).toBe(false);
      expect(third.warnings.filter((w) => w.projection === 'apps').map((w) => w.reason ?? w.msg)).toEqual([
        'the apps record it was taken after (0:4) is another one in this log: the log was reset or replaced since',
        'no usable snapshot: the projection replays its topics whole',
      ]);
    } finally {
      for (const s of services) await s.close().catch(() => undefined);
      for (const dir of [dataDir, `${dataDir}-old`]) rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
