import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { buildStaticPage, findDir, staticPageRoutes, type StaticPage } from './static-page.js';

/**
 * The developer console (README: Console): a static page to watch and poke one app's channels
 * with the key or token the user types in. It speaks only the service's public interfaces: REST
 * from the page's own `fetch` (`GET /channels`, `GET /channels/<id>`, history), realtime through
 * the SDK's browser build (`ably/build/ably.min.js`, Apache-2.0, its licence header kept), served
 * by the service itself so the page needs no CDN and works offline. The SDK rather than
 * a hand-written client: it already holds the protocol's state machines (connection, resume,
 * attach, presence SYNC, message decoding), and it is the client this service is tested against.
 */

/**
 * The page's policy: its own script and style only, no inline code, requests and WebSockets to
 * this origin only (CSP 3: `'self'` covers `ws:`/`wss:` to the page's host and port).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The SDK's browser build (UMD: `window.Ably`) and its version: in a build, the copy
 * infra/build.mjs put beside the page (src/console/vendor/, so a production install needs no
 * ably package); from the sources, the installed package (a dev dependency).
 */
export function ablyBrowserBuild(consoleDir = consoleFilesDir()): { version: string; file: string } {
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

/** src/console/, or its copy beside a build in dist/ (tsc does not copy the page). */
function consoleFilesDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return findDir([join(here, '../console'), join(here, '../../../src/console')], 'index.html', "the console's files");
}

/** The page and its assets, read from disk once (src/console/, or its copy beside a build in dist/). */
export function loadConsole(): StaticPage {
  const dir = consoleFilesDir();
  const ably = ablyBrowserBuild(dir);
  const js = 'application/javascript; charset=utf-8' as const;
  return buildStaticPage(
    readFileSync(join(dir, 'index.html'), 'utf8'),
    [
      { name: 'ably', body: readFileSync(ably.file), type: js },
      { name: 'console-rest', body: readFileSync(join(dir, 'console-rest.js')), type: js },
      { name: 'console-history', body: readFileSync(join(dir, 'console-history.js')), type: js },
      { name: 'console-presence', body: readFileSync(join(dir, 'console-presence.js')), type: js },
      { name: 'console', body: readFileSync(join(dir, 'console.js')), type: js },
      { name: 'console-css', body: readFileSync(join(dir, 'console.css')), type: 'text/css; charset=utf-8' },
    ],
    '/console/assets',
    { ablyVersion: ably.version },
  );
}

export async function consoleRoutes(app: FastifyInstance): Promise<void> {
  staticPageRoutes(app, { path: '/console', csp: CONSOLE_CSP, page: loadConsole(), what: 'console' });
}
