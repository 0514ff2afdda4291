// The service's commands on an install without dev dependencies (issue 24, item 3: in the image,
// `npm run rebuild` answered `tsx: not found`). Built here as the Dockerfile builds it: `npm run
// build`, the dependencies pruned with `npm prune --omit=dev` (a copy of this checkout's
// node_modules, so no network), package.json rewritten by infra/prod-package.mjs, then installed
// with `npm install --global` into a private prefix for the bin links. Every bin, every npm script
// that has a `:prod` twin (and the twin), and `node <bin target>` answer --help naming the command
// as typed; every service command the README names is one of them; the installed service starts
// and answers /health, and the replay and rebuild commands run on what it wrote. About 30 s.
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/spawn-service.js';

const run = promisify(execFile);
/** Scripts that need the dev dependencies by nature (they compile, test or measure the sources). */
const DEV_ONLY_SCRIPTS = ['build', 'build:wasm', 'test', 'typecheck', 'bench', 'bench:flood'];

interface Pkg {
  bin: Record<string, string>;
  scripts: Record<string, string>;
}

let work: string;
let prefix: string;
let pkg: Pkg;
/** The environment of every command: node (the one running the tests) and the bin links first. */
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'cm-pruned-'));
  prefix = join(work, '.global');
  env = { PATH: [join(prefix, 'bin'), dirname(process.execPath), process.env.PATH].join(delimiter), HOME: process.env.HOME, KAFKA_BROKERS: '', CLICKHOUSE_URL: '' };
  await run(process.execPath, [join(ROOT, 'infra/build.mjs'), '--out-dir', join(work, 'dist')], { cwd: ROOT });
  for (const file of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, file), join(work, file));
  cpSync(realpathSync(join(ROOT, 'node_modules')), join(work, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  const npm = (...args: string[]) => run('npm', [...args, '--offline', '--no-audit', '--no-fund'], { cwd: work, env });
  await npm('prune', '--omit=dev');
  await run(process.execPath, [join(ROOT, 'infra/prod-package.mjs'), '--dir', work], { env });
  await npm('install', '--global', '--prefix', prefix, work);
  pkg = JSON.parse(readFileSync(join(work, 'package.json'), 'utf8')) as Pkg;
}, 300_000);
afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs a command in the install's directory: exit code and output. */
function command(file: string, args: string[], extra: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(file, args, { cwd: work, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (code) => done({ code: code ?? -1, stdout, stderr }));
  });
}

/** The scripts the service is run by: those with a `:prod` twin, and the twins. */
const serviceScripts = (): string[] => Object.keys(pkg.scripts).filter((s) => pkg.scripts[`${s}:prod`] !== undefined || s.endsWith(':prod'));

describe('an install without dev dependencies runs every command the README names', () => {
  it('holds none of the development tools (tsx, the compiler, the test runners, testcontainers and its ssh2, playwright)', () => {
    // Some dev dependencies are production ones' dependencies too (ajv: fastify's); these are not.
    const tools = ['tsx', 'typescript', 'vitest', 'testcontainers', '@testcontainers/kafka', '@testcontainers/clickhouse', 'ssh2', 'playwright-core', 'autocannon', 'fast-check', 'ably', 'assemblyscript'];
    for (const name of tools) expect(existsSync(join(work, 'node_modules', name)), name).toBe(false);
    expect(existsSync(join(work, 'node_modules/better-sqlite3'))).toBe(true);
  });

  it('every bin answers --help with its own name', async () => {
    expect(Object.keys(pkg.bin)).toEqual(expect.arrayContaining(['channel-messaging', 'channel-messaging-replay', 'channel-messaging-rebuild']));
    for (const name of Object.keys(pkg.bin)) {
      const r = await command(name, ['--help']);
      expect(r.code, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: ${name} `));
    }
  });

  it('`node <bin target> --help` names the file as typed', async () => {
    for (const target of Object.values(pkg.bin)) {
      const r = await command('node', [target, '--help']);
      expect(r.code, `${target}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: node ${target.replace(/[.]/g, '\\.')} `));
    }
  });

  it('every npm script with a :prod twin, and the twin, answers --help naming the npm command (no tsx)', async () => {
    const scripts = serviceScripts();
    expect(scripts).toEqual(expect.arrayContaining(['start', 'start:prod', 'replay', 'replay:prod', 'rebuild', 'rebuild:prod']));
    for (const script of scripts) {
      const r = await command('npm', ['run', '--silent', script, '--', '--help']);
      expect(r.code, `npm run ${script}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: npm ${script === 'start' ? '' : 'run '}${script} -- `));
    }
  });

  it('every npm script and `node dist/...` command the README names is one of the above, or a development command', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const named = new Set([...readme.matchAll(/\bnpm (?:run (?:-s |--silent )?)?([a-z][\w:-]*)/g)].map((m) => m[1]).filter((s) => s in pkg.scripts));
    expect(named.size).toBeGreaterThan(3);
    for (const script of named) expect([...serviceScripts(), ...DEV_ONLY_SCRIPTS], `npm run ${script}`).toContain(script);
    const nodeCommands = new Set([...readme.matchAll(/\bnode (dist\/\S+\.js)/g)].map((m) => m[1]));
    expect(nodeCommands.size).toBeGreaterThan(0);
    for (const file of nodeCommands) expect(Object.values(pkg.bin), `node ${file}`).toContain(file);
  });

  it('the installed service starts and answers /health; replay and rebuild run on what it wrote', async () => {
    const dataDir = join(work, 'data');
    const child = spawn('channel-messaging', [], { cwd: work, env: { ...env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const port = await new Promise<number>((resolvePort, reject) => {
        child.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          const line = out.split('\n').find((l) => l.includes('"service listening"'));
          if (line) resolvePort((JSON.parse(line) as { port: number }).port);
        });
        void exited.then((code) => reject(new Error(`exited (${code}) before listening: ${err}`)));
      });
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      // The console serves the SDK's browser build from the build's copy (no ably package here).
      const consolePage = await (await fetch(`http://127.0.0.1:${port}/console`)).text();
      const sdk = /\/console\/assets\/ably\.[0-9a-f]+\.js/.exec(consolePage)?.[0];
      expect(sdk).toBeDefined();
      expect((await fetch(`http://127.0.0.1:${port}${sdk}`)).status).toBe(200);
      const app = JSON.parse(readFileSync(join(dataDir, 'default-app.json'), 'utf8')) as { appId: string; keys: { keyName: string; keySecret: string }[] };
      const auth = `Basic ${Buffer.from(`${app.keys[0].keyName}:${app.keys[0].keySecret}`).toString('base64')}`;
      const res = await fetch(`http://127.0.0.1:${port}/channels/persisted:installed/messages`, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'pruned', data: 'runs' }) });
      expect(res.status).toBe(201);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);

      const replay = await command('channel-messaging-replay', ['--app', app.appId, '--channel', 'persisted:installed', '--data-dir', dataDir]);
      expect(replay.code, replay.stderr).toBe(0);
      expect(replay.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { event: { messages: { name: string }[] } }).event.messages[0].name)).toEqual(['pruned']);
      const rebuild = await command('channel-messaging-rebuild', ['--projection', 'history', '--data-dir', dataDir]);
      expect(rebuild.code, rebuild.stderr).toBe(0);
      expect(rebuild.stderr).toMatch(/rebuilt history: \d+ records/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
