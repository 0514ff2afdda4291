import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceError } from '../errors.js';
import { resource } from './route-table.js';

/**
 * A page the service serves to browsers (the console; the dashboard has the same shape in
 * src/routes/dashboard.ts): one HTML file whose `{{name}}` placeholders become the URLs of its
 * assets, each named by its content hash so it can be cached for a year, all read once when the
 * routes are added and served from memory. The page is answered with a Content-Security-Policy
 * and `Cache-Control: no-cache` (it names its assets by hash: always ask for the newest page).
 */

/** Assets are named by their content hash, so they can be cached for a year. */
export const IMMUTABLE = 'public, max-age=31536000, immutable';

export interface PageFile {
  /** The placeholder in the page, `{{name}}`, and the start of the asset's URL name. */
  name: string;
  body: Buffer;
  type: 'application/javascript; charset=utf-8' | 'text/css; charset=utf-8';
}

export interface StaticPage {
  page: Buffer;
  /** By file name under the assets path (`name.<hash>.js`). */
  assets: Map<string, { body: Buffer; type: string }>;
}

/** The first of the directories that holds `file` (src/, or the build's copy in dist/). */
export function findDir(candidates: string[], file: string, what: string): string {
  const found = candidates.find((dir) => existsSync(join(dir, file)));
  if (!found) throw new Error(`${what} is missing (looked for ${file} in ${candidates.join(', ')})`);
  return found;
}

const hashOf = (body: Buffer): string => createHash('sha256').update(body).digest('hex').slice(0, 12);

/** Fills the page's placeholders: assets by their hashed URL under `assetsPath`, `texts` as given. */
export function buildStaticPage(html: string, files: PageFile[], assetsPath: string, texts: Record<string, string> = {}): StaticPage {
  const assets = new Map<string, { body: Buffer; type: string }>();
  let out = html;
  for (const [name, value] of Object.entries(texts)) out = out.replaceAll(`{{${name}}}`, value);
  for (const f of files) {
    const file = `${f.name}.${hashOf(f.body)}.${f.type.startsWith('text/css') ? 'css' : 'js'}`;
    assets.set(file, { body: f.body, type: f.type });
    out = out.replaceAll(`{{${f.name}}}`, `${assetsPath}/${file}`);
  }
  const left = /\{\{[^}]*\}\}/.exec(out);
  if (left) throw new Error(`the page names something that does not exist: ${left[0]}`);
  return { page: Buffer.from(out), assets };
}

const commonHeaders = (reply: FastifyReply): FastifyReply =>
  reply.header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'no-referrer').header('Cross-Origin-Resource-Policy', 'same-origin');

/** `GET <path>` answers the page, `GET <path>/assets/:file` its assets; both without credentials. */
export function staticPageRoutes(app: FastifyInstance, opts: { path: string; csp: string; page: StaticPage; what: string }): void {
  const open = { config: { auth: 'none' as const } };
  const { page, assets } = opts.page;
  resource(app, opts.path, {
    GET: {
      options: open,
      handler: async (_request, reply) =>
        commonHeaders(reply)
          .code(200)
          .header('Content-Type', 'text/html; charset=utf-8')
          .header('Content-Security-Policy', opts.csp)
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
