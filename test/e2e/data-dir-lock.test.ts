// Issue 10, item 5: a second service on the same DATA_DIR started, and the first then failed with
// "UNIQUE constraint failed" (both assigned the same log offsets). The second must refuse to start
// with a one-line message, leave the first unharmed, and the lock must die with its holder.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basic, removeDir, startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { DataDirLockedError } from '../../src/log/embedded/data-dir-lock.js';
import { freePort, sleep, spawnServer, startServer, type ServerProcess } from '../helpers/server-process.js';

const KEY = 'lockapp.k1:lock-secret';

describe('one service per DATA_DIR', () => {
  const dirs: string[] = [];
  const services: TestService[] = [];
  const servers: ServerProcess[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.stop();
    for (const s of services.splice(0)) await s.close();
    for (const d of dirs.splice(0)) removeDir(d);
  });

  it('in one process: a second service on the directory is refused (DataDirLockedError) while the first serves; after close, it starts', async () => {
    const first = await startTestService();
    services.push(first);
    dirs.push(first.dataDir);
    await expect(startTestService({}, { dataDir: first.dataDir })).rejects.toThrow(DataDirLockedError);
    const channel = uniqueChannel();
    const res = await first.service.app.inject({
      method: 'POST',
      url: `/channels/${channel}/messages`,
      headers: { authorization: first.auth, 'content-type': 'application/json' },
      payload: { data: 'still mine' },
    });
    expect(res.statusCode).toBe(201);
    await first.close();
    services.pop();
    const again = await startTestService({}, { dataDir: first.dataDir });
    services.push(again);
  });

  it('two processes: the second exits non-zero with one line, the first keeps publishing; after SIGKILL of the first, a new start succeeds', { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-lock-'));
    dirs.push(dataDir);
    const appsFile = join(dataDir, 'apps.json');
    writeFileSync(appsFile, JSON.stringify({ apps: [{ appId: 'lockapp', keys: [{ key: KEY }] }] }));
    const env = { DATA_DIR: dataDir, APPS_FILE: appsFile };
    const first = await startServer(env);
    servers.push(first);

    const second = spawnServer(env, await freePort());
    servers.push(second);
    const { code } = await Promise.race([second.exited, sleep(30_000).then(() => ({ code: 'still running after 30 s' }))]);
    const stderr = second.output.join('').trim();
    expect(code).not.toBe(0);
    expect(stderr.split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/^failed to start: another process is using the data directory .* \(it holds .*lock\.db\)/);

    const url = `http://127.0.0.1:${first.port}/channels/locked/messages`;
    const headers = { authorization: basic(KEY), 'content-type': 'application/json' };
    for (let i = 0; i < 20; i++) {
      const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ data: `m${i}` }) });
      expect(res.status).toBe(201);
    }
    const history = await fetch(url, { headers });
    expect(((await history.json()) as unknown[]).length).toBe(20);
    expect(first.output.join('')).not.toMatch(/UNIQUE|error/i);

    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const third = await startServer(env);
    servers.push(third);
    const after = await fetch(url.replace(`:${first.port}/`, `:${third.port}/`), { headers });
    expect(((await after.json()) as unknown[]).length).toBe(20);
  });
});
