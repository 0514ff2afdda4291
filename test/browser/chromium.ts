import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { requireInfra } from '../helpers/infra.js';

/** Debian's chromium, which playwright-core drives (CHROMIUM_PATH elsewhere). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where the browser tests put their screenshots (ignored by git). */
export const OUTPUT = resolve(dirname(fileURLToPath(import.meta.url)), '../output');

/**
 * A suite that needs chromium: without it, it warns loudly and skips; with REQUIRE_INFRA=1 it
 * fails instead.
 */
export function describeInChromium(name: string, body: () => void): void {
  if (existsSync(CHROMIUM)) {
    describe(name, body);
    return;
  }
  const hint = `install Debian's chromium (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH`;
  if (requireInfra) {
    describe(name, () => {
      it('needs chromium', () => {
        throw new Error(`chromium not found at ${CHROMIUM} and REQUIRE_INFRA=1 (${hint})`);
      });
    });
    return;
  }
  const line = '!'.repeat(100);
  console.warn(`\n${line}\n!!! CHROMIUM NOT FOUND at ${CHROMIUM}: "${name}" IS SKIPPED. To run it: ${hint}.\n${line}\n`);
  describe.skip(`${name} (skipped: chromium not found)`, () => {
    it('needs chromium', () => {});
  });
}
