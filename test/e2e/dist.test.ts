// The build (issue 13): `npm run build` gives a dist/ that runs with plain node (no tsx), the
// embedded log writer thread's worker included, and the Dockerfile's HEALTHCHECK passes against it.
// Built here into a temporary directory (the repository's dist/ is left alone).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runToEnd, spawnService } from '../helpers/spawn-service.js';

const run = promisify(execFile);
let work: string;
let dist: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'cm-dist-'));
  dist = join(work, 'dist');
  await run(process.execPath, [join(ROOT, 'infra/build.mjs'), '--out-dir', dist], { cwd: ROOT });
  // Where an installed package's node_modules would be: beside the build.
  symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'), 'dir');
}, 180_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The HEALTHCHECK command of the Dockerfile, as an argument list. */
function dockerHealthcheck(): string[] {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const m = /^HEALTHCHECK .*?CMD (\[.*\])\s*$/m.exec(dockerfile);
  if (!m) throw new Error('the Dockerfile has no HEALTHCHECK ... CMD [...]');
  return JSON.parse(m[1]) as string[];
}

describe('npm run build: a dist/ that runs with plain node', () => {
  it('holds the compiled service, the writer thread worker and an ES-module package.json, and nothing of the tests', () => {
    expect(readdirSync(join(dist, 'src/log/embedded'))).toContain('sqlite-writer.worker.mjs');
    expect(readdirSync(join(dist, 'src/dashboard')).sort()).toEqual(['charts.js', 'dashboard.css', 'dashboard.js', 'figures.js', 'index.html', 'stats-client.js']);
    // The scripts both pages share (src/routes/static-page.ts serves them to each).
    expect(readdirSync(join(dist, 'src/page-common')).sort()).toEqual(['service-client.js']);
    expect(readdirSync(join(dist, 'src/console')).sort()).toEqual(['console-history.js', 'console-presence.js', 'console-rest.js', 'console.css', 'console.js', 'index.html', 'vendor']);
    // The SDK's browser build the console serves, copied from the ably package with its licence.
    expect(readdirSync(join(dist, 'src/console/vendor')).sort()).toEqual(['ably.LICENSE', 'ably.json', 'ably.min.js']);
    expect(readFileSync(join(dist, 'src/console/vendor/ably.min.js')).equals(readFileSync(join(ROOT, 'node_modules/ably/build/ably.min.js')))).toBe(true);
    expect(JSON.parse(readFileSync(join(dist, 'package.json'), 'utf8'))).toEqual({ type: 'module' });
    expect(readdirSync(dist).sort()).toEqual(['package.json', 'projections', 'src']);
    expect(readFileSync(join(dist, 'src/main.js'), 'utf8').startsWith('#!/usr/bin/env node')).toBe(true);
  });

  it('`node dist/src/main.js` starts, answers /health and /ready, publishes (the writer thread), prints the root key on stderr only, passes the Dockerfile HEALTHCHECK and shuts down on SIGTERM', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-dist-data-'));
    const s = spawnService({ dist, env: { DATA_DIR: dataDir } });
    try {
      const port = await s.listening;
      expect((await fetch(await s.url('/health'))).status).toBe(200);
      expect((await fetch(await s.url('/ready'))).status).toBe(200);
      // The dashboard's page, from the build's own copy (this dist/ has no src/ beside it).
      expect((await fetch(await s.url('/dashboard'))).status).toBe(200);
      // The console's page, and the SDK's browser build it serves from the installed ably package.
      const consolePage = await (await fetch(await s.url('/console'))).text();
      const sdk = /\/console\/assets\/ably\.[0-9a-f]+\.js/.exec(consolePage)?.[0];
      expect((await fetch(await s.url(sdk ?? '/console/assets/missing'))).status).toBe(200);

      const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { appId: string; keys: { keyName: string; keySecret: string }[] };
      const key = `${app.keys[0].keyName}:${app.keys[0].keySecret}`;
      const auth = `Basic ${Buffer.from(key).toString('base64')}`;
      const publish = await fetch(await s.url('/channels/dist-test/messages'), {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'built', data: 'runs' }),
      });
      expect(publish.status).toBe(201);
      const history = (await (await fetch(await s.url('/channels/dist-test/messages'), { headers: { authorization: auth } })).json()) as { name: string }[];
      expect(history.map((m) => m.name)).toEqual(['built']);

      // The root key: on stderr (the terminal) and in the file, never in the JSON log on stdout.
      expect(s.stderr()).toContain(key);
      expect(s.stdout()).not.toContain(app.keys[0].keySecret);
      for (const line of s.stdout().trim().split('\n')) expect(() => JSON.parse(line), line).not.toThrow();

      const [command, ...args] = dockerHealthcheck();
      expect(command).toBe('node');
      const check = await runToEnd(args, { PORT: String(port) });
      expect(check.code).toBe(0);

      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      expect(s.stdout()).toContain('"msg":"shut down"');
    } finally {
      s.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('the Dockerfile HEALTHCHECK fails when nothing answers', async () => {
    const [, ...args] = dockerHealthcheck();
    const check = await runToEnd(args, { PORT: '9' });
    expect(check.code).toBe(1);
  });

  it('`node dist/src/main.js --help` prints the flags, naming the command as typed, and exits 0', async () => {
    const r = await runToEnd([join(dist, 'src/main.js'), '--help']);
    expect(r.code).toBe(0);
    // The command as typed: this dist/ is outside the working directory, so its full path.
    expect(r.stdout.startsWith(`Usage: node ${join(dist, 'src/main.js')} [flags]`)).toBe(true);
    expect(r.stdout).toMatch(/--data-dir <value>\s+DATA_DIR/);
    expect(r.stdout).toMatch(/--cors-origins <value>\s+CORS_ORIGINS/);
  });

  it('`node dist/src/cli/replay.js` writes the channel as NDJSON on stdout, nothing else', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cm-dist-replay-'));
    const s = spawnService({ dist, env: { DATA_DIR: dataDir } });
    let appId: string;
    try {
      await s.listening;
      const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { appId: string; keys: { keyName: string; keySecret: string }[] };
      appId = app.appId;
      const auth = `Basic ${Buffer.from(`${app.keys[0].keyName}:${app.keys[0].keySecret}`).toString('base64')}`;
      for (const name of ['one', 'two']) {
        const res = await fetch(await s.url('/channels/audit/messages'), { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
        expect(res.status).toBe(201);
      }
    } finally {
      s.child.kill('SIGTERM');
      await s.exited;
    }
    const r = await runToEnd([join(dist, 'src/cli/replay.js'), '--app', appId, '--channel', 'audit', '--data-dir', dataDir]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).event.messages[0].name)).toEqual(['one', 'two']);
    // The chain and its checkpoint (taken at the graceful stop) verify from the built files too.
    const verified = await runToEnd([join(dist, 'src/cli/replay.js'), '--app', appId, '--channel', 'audit', '--verify', '--data-dir', dataDir]);
    expect(verified.code, verified.stdout).toBe(0);
    rmSync(dataDir, { recursive: true, force: true });
  });
});
