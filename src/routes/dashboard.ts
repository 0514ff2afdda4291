import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceError } from '../errors.js';
import { resource } from './route-table.js';

/**
 * The stats dashboard (README: Dashboard): a static page that charts `GET /stats` for the app
 * whose key or token the user types in. The page, its script and style (src/dashboard/) and uPlot
 * (from its npm package, never a CDN) are read once, when the routes are added, and served from
 * memory. The credentials never reach these routes: the page sends them with its own requests
 * to `GET /stats`, and keeps them only in the page (or the tab's sessionStorage if the user asks).
 */

/** The page's policy: its own script and style only, no inline code, requests to this origin only. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Assets are named by their content hash, so they can be cached for a year. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

interface Asset {
  body: Buffer;
  type: string;
}

/** src/dashboard/, also when run from a build in dist/ (tsc does not copy the page). */
function dashboardDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, '../dashboard'), join(here, '../../../src/dashboard')];
  const found = candidates.find((dir) => existsSync(join(dir, 'index.html')));
  if (!found) throw new Error(`the dashboard's files are missing (looked in ${candidates.join(', ')})`);
  return found;
}

/** uPlot's browser build and stylesheet, from the installed package. */
function uplotDist(): { version: string; dir: string } {
  const require = createRequire(import.meta.url);
  const pkgFile = require.resolve('uplot/package.json');
  const version = (JSON.parse(readFileSync(pkgFile, 'utf8')) as { version: string }).version;
  return { version, dir: join(dirname(pkgFile), 'dist') };
}

const hashOf = (body: Buffer): string => createHash('sha256').update(body).digest('hex').slice(0, 12);

/** The page and its assets by URL path, read from disk once. */
export function loadDashboard(): { page: Buffer; assets: Map<string, Asset> } {
  const dir = dashboardDir();
  const uplot = uplotDist();
  const files: { name: string; body: Buffer; type: string }[] = [
    { name: 'uplot', body: readFileSync(join(uplot.dir, 'uPlot.iife.min.js')), type: 'application/javascript; charset=utf-8' },
    { name: 'uplot-css', body: readFileSync(join(uplot.dir, 'uPlot.min.css')), type: 'text/css; charset=utf-8' },
    ...['stats-client', 'figures', 'charts'].map((name) => ({ name, body: readFileSync(join(dir, `${name}.js`)), type: 'application/javascript; charset=utf-8' })),
    { name: 'dashboard', body: readFileSync(join(dir, 'dashboard.js')), type: 'application/javascript; charset=utf-8' },
    { name: 'dashboard-css', body: readFileSync(join(dir, 'dashboard.css')), type: 'text/css; charset=utf-8' },
  ];
  const assets = new Map<string, Asset>();
  let html = readFileSync(join(dir, 'index.html'), 'utf8').replaceAll('{{uplotVersion}}', uplot.version);
  for (const f of files) {
    const ext = f.type.startsWith('text/css') ? 'css' : 'js';
    const path = `${f.name}.${hashOf(f.body)}.${ext}`;
    assets.set(path, { body: f.body, type: f.type });
    html = html.replaceAll(`{{${f.name}}}`, `/dashboard/assets/${path}`);
  }
  const left = /\{\{[^}]*\}\}/.exec(html);
  if (left) throw new Error(`the dashboard page names an asset that does not exist: ${left[0]}`);
  return { page: Buffer.from(html), assets };
}

const commonHeaders = (reply: FastifyReply): FastifyReply =>
  reply.header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer').header('Cross-Origin-Resource-Policy', 'same-origin');

export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  const { page, assets } = loadDashboard();
  const open = { config: { auth: 'none' as const } };
  resource(app, '/dashboard', {
    GET: {
      options: open,
      handler: async (_request, reply) =>
        commonHeaders(reply)
          .code(200)
          .header('Content-Type', 'text/html; charset=utf-8')
          .header('Content-Security-Policy', DASHBOARD_CSP)
          // The page names its assets by hash: always ask for the newest page.
          .header('Cache-Control', 'no-cache')
          .send(page),
    },
  });
  resource(app, '/dashboard/assets/:file', {
    GET: {
      options: open,
      handler: async (request, reply) => {
        const file = (request.params as { file: string }).file;
        const asset = assets.get(file);
        if (!asset) throw new ServiceError('notFound', `no dashboard asset ${file}`);
        return commonHeaders(reply).code(200).header('Content-Type', asset.type).header('Cache-Control', IMMUTABLE).send(asset.body);
      },
    },
  });
}
