// LOG_RETENTION_HOURS reaches the embedded log the service builds (issue 27, item 2).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { embeddedAdapters } from '../../src/service.js';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics } from '../../src/log/port.js';

const HOUR = 3600_000;

describe('LOG_RETENTION_HOURS', () => {
  it.each([
    ['100', 100],
    [undefined, 96],
  ])('LOG_RETENTION_HOURS=%s: the service\'s embedded log deletes what is older than %i hours, and keeps the rest', async (value, hours) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-retention-'));
    const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, ...(value ? { LOG_RETENTION_HOURS: value } : {}) }), { lock: false });
    const log = adapters.log as EmbeddedLog;
    const now = Date.UTC(2030, 0, 10);
    for (const age of [hours + 1, hours - 1, 0]) await log.append(Topics.messages, [{ key: 'a:c', timestamp: now - age * HOUR, value: Buffer.from(`${age}h`) }]);
    expect(await log.enforceRetention(now)).toBe(1);
    await log.close();
    await adapters.close?.();
    const reopened = new EmbeddedLog({ path: join(dataDir, 'log.db') });
    expect((await reopened.read(Topics.messages, 0, 0, 10)).map((r) => Buffer.from(r.value).toString())).toEqual([`${hours - 1}h`, '0h']);
    await reopened.close();
  });
});
