// A newcomer's first and second start (issue 24, item 6): default settings warn about nothing, the
// first start prints the root key, every later start says where the key file is (never the key),
// and a REALTIME_MAX_CONNECTIONS set above what the open-file limit allows is still a warning.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnService } from '../helpers/spawn-service.js';
import { openFileLimit } from '../../src/realtime/settings.js';

/** Starts the service, waits for it to listen, stops it; its output and log lines. */
async function startAndStop(env: Record<string, string>): Promise<{ stderr: string; lines: { level: number; msg: string }[] }> {
  const s = spawnService({ env });
  try {
    await s.listening;
  } finally {
    s.child.kill('SIGTERM');
  }
  expect(await s.exited).toBe(0);
  return { stderr: s.stderr(), lines: s.stdout().trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string }) };
}

describe('first and second start', () => {
  it('default settings log no warning; the first start prints the key, the second says where the file is', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-first-start-'));
    try {
      const first = await startAndStop({ DATA_DIR: dataDir });
      expect(first.lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([]);
      const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { keys: { keyName: string; keySecret: string }[] };
      expect(first.stderr).toContain(`${app.keys[0].keyName}:${app.keys[0].keySecret}`);

      const second = await startAndStop({ DATA_DIR: dataDir });
      expect(second.lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([]);
      expect(second.stderr).toContain(`The default application's root key is in ${dataDir}/default-app.json`);
      expect(second.stderr).not.toContain(app.keys[0].keySecret);
      expect(second.lines.map((l) => l.msg)).toContain("the default application's root key is in the file");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it.runIf(openFileLimit() !== undefined)('REALTIME_MAX_CONNECTIONS set above what the open-file limit allows: a warning with both figures', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-first-start-'));
    try {
      const { lines } = await startAndStop({ DATA_DIR: dataDir, REALTIME_MAX_CONNECTIONS: '10000000' });
      const warning = lines.find((l) => l.level === 40 && l.msg.startsWith('REALTIME_MAX_CONNECTIONS lowered')) as { configured?: number; effective?: number } | undefined;
      expect(warning?.configured).toBe(10_000_000);
      expect(warning?.effective).toBeLessThan(openFileLimit()!);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
