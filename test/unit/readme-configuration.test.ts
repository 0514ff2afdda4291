import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serviceUsage } from '../../src/config.js';

// The README's Configuration table is the one place a user learns what the service reads from its
// environment: every variable the code under src/ and projections/ reads is named there, every
// variable the table names is read, and every flag the table gives is one the service takes.

const root = resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'vendor' || entry.name === 'node_modules' ? [] : sources(path);
    return /\.(ts|mts|js|mjs|cjs)$/.test(entry.name) ? [path] : [];
  });
}

/**
 * The names the code reads: `process.env.X`, `env.X` / `e.X` (the parsed environment handed down
 * from main.ts and the commands), `env['X']`, and the readers `int(e, 'X', ...)`, `bool(e, 'X', ...)`
 * and the webhook settings' `int('X', ...)`.
 */
export function variablesRead(text: string): string[] {
  const patterns = [
    /\bprocess\.env\.([A-Z][A-Z0-9_]+)/g,
    /\bprocess\.env\[['"]([A-Z][A-Z0-9_]+)['"]\]/g,
    /\b(?:env|e)\.([A-Z][A-Z0-9_]+)\b/g,
    /\b(?:env|e)\[['"]([A-Z][A-Z0-9_]+)['"]\]/g,
    /\b(?:int|bool)\((?:env|e), ['"]([A-Z][A-Z0-9_]+)['"]/g,
    /\bint\(['"]([A-Z][A-Z0-9_]+)['"],/g,
  ];
  const names = new Set<string>();
  for (const pattern of patterns) for (const match of text.matchAll(pattern)) names.add(match[1]);
  return [...names];
}

const read = new Set([...sources(join(root, 'src')), ...sources(join(root, 'projections'))].flatMap((file) => variablesRead(readFileSync(file, 'utf8'))));

const readme = readFileSync(join(root, 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## Keys\n'));
/** The table's rows: its first column's variables, its second column's flags. */
const rows = section
  .split('\n')
  .filter((line) => line.startsWith('| `'))
  .map((line) => {
    const [variables, flags] = line.split(' | ');
    return { variables: [...variables.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]), flags: [...flags.matchAll(/`(--[a-z-]+)`/g)].map((m) => m[1]) };
  });
const documented = new Set(rows.flatMap((row) => row.variables));

describe("README: Configuration names what the code reads", () => {
  it('finds the variables the configuration reads (the scan itself works)', () => {
    expect(read.size).toBeGreaterThan(80);
    for (const name of ['PORT', 'DATA_DIR', 'WEBHOOK_TIMEOUT_MS', 'REALTIME_MAX_REPLAY_SCAN', 'LOG_RETENTION_HOURS', 'SERVICE_URL']) expect(read, name).toContain(name);
    expect(variablesRead("const a = process.env.SOME_VAR; int(e, 'OTHER_VAR', 1, 0, 2); env['THIRD']")).toEqual(['SOME_VAR', 'THIRD', 'OTHER_VAR']);
  });

  it('every variable read under src/ and projections/ has a row of the Configuration table', () => {
    expect([...read].filter((name) => !documented.has(name)).sort()).toEqual([]);
  });

  it('every variable of the table is one the code reads', () => {
    expect([...documented].filter((name) => !read.has(name)).sort()).toEqual([]);
  });

  it("every flag of the table is one `--help` lists, beside the row's variable", () => {
    const help = serviceUsage();
    for (const row of rows) {
      for (const flag of row.flags) {
        const line = help.split('\n').find((l) => l.trimStart().startsWith(`${flag} `));
        expect(line, `${flag} (README Configuration) is not a flag of the service`).toBeDefined();
        expect(row.variables.some((v) => line!.includes(` ${v} `)), `${flag} does not set ${row.variables.join(', ')}`).toBe(true);
      }
    }
  });
});
