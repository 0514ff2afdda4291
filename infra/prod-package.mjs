#!/usr/bin/env node
// For an install without dev dependencies (the Docker image, `npm ci --omit=dev` beside a built
// dist/): rewrites package.json so that every npm script with a `:prod` twin runs the twin, the
// compiled code under plain node, instead of the sources under tsx (a dev dependency, so
// `tsx: not found`): `npm start`, `npm run replay`, `npm run rebuild` then work there as the README
// names them. Scripts that need the dev dependencies (test, bench, build) are left as they are.
//
//   node infra/prod-package.mjs [--dir .]     (after npm run build; the Dockerfile runs it)
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { dir: { type: 'string', default: '.' }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  process.stdout.write('Usage: node infra/prod-package.mjs [--dir <package directory>]\n');
  process.exit(0);
}
const file = join(resolve(values.dir), 'package.json');
const pkg = JSON.parse(readFileSync(file, 'utf8'));
const changed = [];
for (const [name, command] of Object.entries(pkg.scripts ?? {})) {
  const twin = pkg.scripts[`${name}:prod`];
  if (twin === undefined || command === twin) continue;
  pkg.scripts[name] = twin;
  changed.push(name);
}
writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
process.stdout.write(`${file}: ${changed.length ? changed.map((n) => `${n} -> ${n}:prod`).join(', ') : 'nothing to change'}\n`);
