import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * This build's version, from the package.json of the project that holds this file (src/ when run
 * with tsx, dist/src/ when built): the nearest one upwards named channel-messaging.
 */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (pkg.name === 'channel-messaging' && typeof pkg.version === 'string') return pkg.version;
      } catch {
        // not readable: look further up
      }
    }
    dir = dirname(dir);
  }
  return 'unknown';
}
