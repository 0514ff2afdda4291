import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadStaticPage, pageFilesDir, staticPageRoutes, type StaticPage } from './static-page.js';

/**
 * The stats dashboard (README: Dashboard): a static page that charts `GET /stats` for the app
 * whose key or token the user types in, served as every page is (src/routes/static-page.ts). Its
 * script and style (src/dashboard/) and uPlot (from its npm package, never a CDN) are read once,
 * when the routes are added. The credentials never reach these routes: the page sends them with
 * its own requests to `GET /stats`, and keeps them only in the page (or the tab's sessionStorage
 * if the user asks).
 */

/** uPlot's browser build and stylesheet, from the installed package. */
function uplotDist(): { version: string; dir: string } {
  const pkgFile = createRequire(import.meta.url).resolve('uplot/package.json');
  const version = (JSON.parse(readFileSync(pkgFile, 'utf8')) as { version: string }).version;
  return { version, dir: join(dirname(pkgFile), 'dist') };
}

/** The page and its assets, read from disk once. */
export function loadDashboard(): StaticPage {
  const dir = pageFilesDir('dashboard');
  const uplot = uplotDist();
  return loadStaticPage({
    dir,
    path: '/dashboard',
    files: [
      { name: 'uplot', file: join(uplot.dir, 'uPlot.iife.min.js') },
      { name: 'uplot-css', file: join(uplot.dir, 'uPlot.min.css') },
      ...['stats-client', 'figures', 'charts', 'dashboard'].map((name) => ({ name, file: join(dir, `${name}.js`) })),
      { name: 'dashboard-css', file: join(dir, 'dashboard.css') },
    ],
    texts: { uplotVersion: uplot.version },
  });
}

export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  staticPageRoutes(app, { path: '/dashboard', page: loadDashboard(), what: 'dashboard' });
}
