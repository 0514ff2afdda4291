#!/usr/bin/env node
// `npm run build`: compiles src/ and projections/ to plain JavaScript that runs with `node` alone
// (no tsx), and copies the files tsc does not emit, beside their compiled neighbours: the embedded
// log writer thread's worker (src/log/embedded/sqlite-writer.worker.mjs, plain JavaScript on
// purpose), the dashboard and console pages (src/dashboard/, src/console/: HTML, browser JS, CSS;
// src/page-common/: the browser JS both share)
// and the SDK's browser build the console serves (src/console/vendor/). The output directory
// gets a package.json saying its .js files are ES modules, so it runs wherever it is put.
//
//   node infra/build.mjs [--out-dir dist]
//
// Start the result with `node dist/src/main.js` (or `npm run start:prod`); replay with
// `node dist/src/cli/replay.js`.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { 'out-dir': { type: 'string', default: 'dist' }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  process.stdout.write('Usage: node infra/build.mjs [--out-dir dist]\n');
  process.exit(0);
}
const out = resolve(root, values['out-dir']);
rmSync(out, { recursive: true, force: true });

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', out], { stdio: 'inherit', cwd: root });
if (result.status !== 0) process.exit(result.status ?? 1);

/** Files tsc leaves out that the service loads at run time. */
const copied = [];
const copyAssets = (dir) => {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) copyAssets(path);
    else if (!entry.name.endsWith('.ts')) {
      const target = join(out, relative(root, path));
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(path, target);
      copied.push(relative(root, path));
    }
  }
};
for (const dir of ['src', 'projections']) copyAssets(join(root, dir));

// The console's realtime client (README: Console): the SDK's browser build, its version and its
// licence, from the ably package (a dev dependency: 211 KB copied here instead of its 30-odd
// packages in every production install). src/routes/console.ts reads this copy in dist/.
const ablyBuild = dirname(createRequire(import.meta.url).resolve('ably'));
const ablyDir = dirname(ablyBuild);
const vendor = join(out, 'src/console/vendor');
mkdirSync(vendor, { recursive: true });
copyFileSync(join(ablyBuild, 'ably.min.js'), join(vendor, 'ably.min.js'));
copyFileSync(join(ablyDir, 'LICENSE'), join(vendor, 'ably.LICENSE'));
const ablyVersion = JSON.parse(readFileSync(join(ablyDir, 'package.json'), 'utf8')).version;
writeFileSync(join(vendor, 'ably.json'), `${JSON.stringify({ name: 'ably', version: ablyVersion, file: 'ably.min.js', license: 'Apache-2.0' }, null, 2)}\n`);
copied.push(`ably ${ablyVersion} build/ably.min.js (to src/console/vendor/)`);
writeFileSync(join(out, 'package.json'), `${JSON.stringify({ type: 'module' }, null, 2)}\n`);
process.stdout.write(`built ${relative(process.cwd(), out) || '.'}: node ${relative(process.cwd(), join(out, 'src/main.js'))} (copied ${copied.join(', ')})\n`);
