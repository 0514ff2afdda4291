import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadStaticPage, pageFilesDir, staticPageRoutes, type StaticPage } from './static-page.js';

/**
 * The developer console (README: Console): a static page to watch and poke one app's channels
 * with the key or token the user types in. It speaks only the service's public interfaces: REST
 * from the page's own `fetch` (`GET /channels`, `GET /channels/<id>`, history), realtime through
 * the SDK's browser build (`ably/build/ably.min.js`, Apache-2.0, its licence header kept), served
 * by the service itself so the page needs no CDN and works offline. The SDK rather than
 * a hand-written client: it already holds the protocol's state machines (connection, resume,
 * attach, presence SYNC, message decoding), and it is the client this service is tested against.
 * Served as every page is (src/routes/static-page.ts: one policy, hashed assets, the shared scripts).
 */

/**
 * The SDK's browser build (UMD: `window.Ably`) and its version: in a build, the copy
 * infra/build.mjs put beside the page (src/console/vendor/, so a production install needs no
 * ably package); from the sources, the installed package (a dev dependency).
 */
export function ablyBrowserBuild(consoleDir = pageFilesDir('console')): { version: string; file: string } {
  const vendor = join(consoleDir, 'vendor');
  if (existsSync(join(vendor, 'ably.json'))) {
    const copy = JSON.parse(readFileSync(join(vendor, 'ably.json'), 'utf8')) as { version: string; file: string };
    return { version: copy.version, file: join(vendor, copy.file) };
  }
  // The package exports no ./package.json: its node entry (build/ably-node.js) finds the build directory.
  const build = dirname(createRequire(import.meta.url).resolve('ably'));
  const pkg = JSON.parse(readFileSync(join(build, '..', 'package.json'), 'utf8')) as { name: string; version: string };
  if (pkg.name !== 'ably') throw new Error(`expected the ably package beside ${build}, found ${pkg.name}`);
  return { version: pkg.version, file: join(build, 'ably.min.js') };
}

/** The page and its assets, read from disk once (src/console/, or its copy beside a build in dist/). */
export function loadConsole(): StaticPage {
  const dir = pageFilesDir('console');
  const ably = ablyBrowserBuild(dir);
  return loadStaticPage({
    dir,
    path: '/console',
    files: [
      { name: 'ably', file: ably.file },
      ...['console-rest', 'console-history', 'console-presence', 'console'].map((name) => ({ name, file: join(dir, `${name}.js`) })),
      { name: 'console-css', file: join(dir, 'console.css') },
    ],
    texts: { ablyVersion: ably.version },
  });
}

export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  staticPageRoutes(app, { path: '/console', page: loadConsole(), what: 'console' });
}
