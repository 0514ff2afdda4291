// APPS_FILE is the operator's: what would silently do something else than it says is refused at
// start, naming the file and the place. Before, an appId given twice kept only the last app (the
// first's keys answered 40101), and a key given twice in one app (another secret) kept two entries
// for one key name: the last secret authenticated, key management showed and changed the first.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAppsFile } from '../../src/apps/apps-file.js';

const dir = mkdtempSync(join(tmpdir(), 'apps-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const load = (apps: unknown[]) => {
  const file = join(dir, `apps-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ apps }));
  return () => loadAppsFile(file, 0);
};

describe('loadAppsFile', () => {
  it('refuses an appId given twice, naming both places', () => {
    expect(load([{ appId: 'a', keys: [{ key: 'a.k1:s1' }] }, { appId: 'a', keys: [{ key: 'a.k2:s2' }] }])).toThrow(/apps\[1\]\.appId "a" is apps\[0\]'s too/);
  });

  it('refuses a key name given twice in one app', () => {
    expect(load([{ appId: 'a', keys: [{ key: 'a.k1:s1' }, { key: 'a.k1:s2' }] }])).toThrow(/apps\[0\]\.keys\[1\]: key "a\.k1" is keys\[0\]'s too/);
  });

  it('takes distinct apps and keys as before', () => {
    const apps = load([{ appId: 'a', keys: [{ key: 'a.k1:s1' }, { key: 'a.k2:s2' }] }, { appId: 'b', keys: [{ key: 'b.k1:s1' }] }])();
    expect(apps.map((a) => a.keys.map((k) => k.keyName))).toEqual([['a.k1', 'a.k2'], ['b.k1']]);
  });
});
