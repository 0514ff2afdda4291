// The committed WebAssembly of the replay's publish transcoder (src/audit/wasm/publish-line.wasm)
// is what its source compiles to: `npm run build:wasm` (AssemblyScript's asc, a dev dependency) run
// again into a directory of its own gives the same bytes. Skipped where asc is not installed (the
// service needs only the committed file); ASC names an asc to use instead of the dev dependency's.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const WASM = 'src/audit/wasm/publish-line.wasm';

/** The asc to run: ASC, or the dev dependency's (undefined: none installed). */
function asc(): string | undefined {
  if (process.env.ASC) return process.env.ASC;
  try {
    const pkg = createRequire(import.meta.url).resolve('assemblyscript/package.json');
    const bin = join(dirname(pkg), 'bin/asc.js');
    return existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

describe('the replay: the committed WebAssembly transcoder', () => {
  const bin = asc();
  it.skipIf(bin === undefined)('is what npm run build:wasm compiles its source to', () => {
    const script = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts['build:wasm'];
    const args = script.split(/\s+/);
    expect(args[0]).toBe('asc');
    const out = args.indexOf('-o');
    expect(args[out + 1]).toBe(WASM);
    const dir = mkdtempSync(join(tmpdir(), 'cm-wasm-build-'));
    try {
      args[out + 1] = join(dir, 'publish-line.wasm');
      const run = bin!.endsWith('.js') ? spawnSync(process.execPath, [bin!, ...args.slice(1)], { cwd: root, encoding: 'utf8' }) : spawnSync(bin!, args.slice(1), { cwd: root, encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(readFileSync(args[out + 1]).equals(readFileSync(join(root, WASM)))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
