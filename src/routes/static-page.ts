import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceError } from '../errors.js';
import { resource } from './route-table.js';

/**
 * The pages the service serves to browsers (the console, the dashboard): one HTML file whose
 * `{{name}}` placeholders become the URLs of its assets, each named by its content hash so it can
 * be cached for a year, all read once when the routes are added and served from memory. Every
 * page also gets the scripts both share (src/page-common/: REST requests, Link headers, errors,
 * the credential form) as `{{service-client}}`. The page is answered with a Content-Security-Policy
 * and `Cache-Control: no-cache` (it names its assets by hash: always ask for the newest page).
 */

/**
 * The pages' policy: their own scripts and styles only, no inline code, requests and WebSockets
 * to this origin only (CSP 3: `'self'` covers `ws:`/`wss:` to the page's host and port).
 */
export const PAGE_CSP = [
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
export const IMMUTABLE = 'public, max-age=31536000, immutable';

const JS = 'application/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

export interface PageFile {
  /** The placeholder in the page, `{{name}}`, and the start of the asset's URL name. */
  name: string;
  /** The file to serve; its ending (`.js`, `.css`) says its type. */
  file: string;
}

export interface StaticPage {
  page: Buffer;
  /** By file name under the assets path (`name.<hash>.js`). */
  assets: Map<string, { body: Buffer; type: string }>;
}

/**
 * src/<name>/, or its copy beside a build in dist/ (infra/build.mjs copies what tsc does not
 * emit): the folder of a page's files, or of the files the pages share.
 */
export function pageFilesDir(name: string, file = 'index.html'): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, '..', name), join(here, '../../../src', name)];
  const found = candidates.find((dir) => existsSync(join(dir, file)));
  if (!found) throw new Error(`the ${name} files are missing (looked for ${file} in ${candidates.join(', ')})`);
  return found;
}

/** The scripts every page gets, before its own. */
const sharedFiles = (): PageFile[] => [{ name: 'service-client', file: join(pageFilesDir('page-common', 'service-client.js'), 'service-client.js') }];

const hashOf = (body: Buffer): string => createHash('sha256').update(body).digest('hex').slice(0, 12);

/**
 * Reads `<dir>/index.html` and the files, and fills the page's placeholders: assets by their
 * hashed URL under `<path>/assets`, `texts` as given. A placeholder left unfilled is an error.
 */
export function loadStaticPage(opts: { dir: string; path: string; files: PageFile[]; texts?: Record<string, string> }): StaticPage {
  const assets = new Map<string, { body: Buffer; type: string }>();
  let out = readFileSync(join(opts.dir, 'index.html'), 'utf8');
  for (const [name, value] of Object.entries(opts.texts ?? {})) out = out.replaceAll(`{{${name}}}`, value);
  for (const f of [...sharedFiles(), ...opts.files]) {
    const css = f.file.endsWith('.css');
    const body = readFileSync(f.file);
    const file = `${f.name}.${hashOf(body)}.${css ? 'css' : 'js'}`;
    assets.set(file, { body, type: css ? CSS : JS });
    out = out.replaceAll(`{{${f.name}}}`, `${opts.path}/assets/${file}`);
  }
  const left = /\{\{[^}]*\}\}/.exec(out);
  if (left) throw new Error(`the page ${opts.path} names something that does not exist: ${left[0]}`);
  return { page: Buffer.from(out), assets };
}

const commonHeaders = (reply: FastifyReply): FastifyReply =>
  reply.header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer').header('Cross-Origin-Resource-Policy', 'same-origin');

/**
 * `GET <path>` answers the page, `GET <path>/assets/:file` its assets; both without credentials
 * (a page's requests carry the credentials typed into it, these routes never see them).
 */
export function staticPageRoutes(app: FastifyInstance, opts: { path: string; page: StaticPage; what: string }): void {
  const open = { config: { auth: 'none' as const } };
  const { page, assets } = opts.page;
  resource(app, opts.path, {
    GET: {
      options: open,
      handler: async (_request, reply) =>
        commonHeaders(reply)
          .code(200)
          .header('Content-Type', 'text/html; charset=utf-8')
          .header('Content-Security-Policy', PAGE_CSP)
          .header('Cache-Control', 'no-cache')
          .send(page),
    },
  });
  resource(app, `${opts.path}/assets/:file`, {
    GET: {
      options: open,
      handler: async (request, reply) => {
        const file = (request.params as { file: string }).file;
        const asset = assets.get(file);
        if (!asset) throw new ServiceError('notFound', `no ${opts.what} asset ${file}`);
        return commonHeaders(reply).code(200).header('Content-Type', asset.type).header('Cache-Control', IMMUTABLE).send(asset.body);
      },
    },
  });
}
