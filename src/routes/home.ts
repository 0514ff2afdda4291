import type { FastifyInstance } from 'fastify';
import { packageVersion } from '../build-info.js';
import { errorList } from '../error-list.js';
import { escapeHtml } from '../http/html.js';
import { sendResult } from '../http/reply.js';
import { resource } from './route-table.js';

/**
 * GET /: what this service is and where to go next (the dashboard, the console, the operations
 * routes, the error list), so that a newcomer who opens the service's address sees more than a 404.
 * GET /errors: every error code with what it means (src/error-list.ts); each error's `href`
 * points at its entry, `/errors#error-<code>`. Both open, in any of the spec's formats; in a
 * browser (HTML) the error list is a page with an anchor per code.
 */
export async function homeRoutes(app: FastifyInstance): Promise<void> {
  const open = { config: { auth: 'none' as const } };
  const version = packageVersion();
  resource(app, '/', {
    GET: {
      options: open,
      handler: async (request, reply) =>
        sendResult(request, reply, 200, {
          service: 'channel-messaging',
          version,
          what: 'A self-hostable, event-sourced channel messaging service with the REST and realtime interface of a commercial pub/sub platform: its SDKs (npm ably) work against it unmodified.',
          links: {
            dashboard: '/dashboard',
            console: '/console',
            errors: '/errors',
            time: '/time',
            health: '/health',
            ready: '/ready',
            metrics: '/metrics',
          },
          realtime: 'WebSocket on this address (the SDK: new Ably.Realtime({ key, endpoint }))',
          docs: "the project's README.md: quick start, configuration, the interfaces, deploying, limits",
        }),
    },
  });
  resource(app, '/errors', {
    GET: {
      options: open,
      handler: async (request, reply) => {
        const list = errorList();
        if (request.ctx?.format !== 'html' || request.ctx.envelope) return sendResult(request, reply, 200, list);
        const rows = list
          .map((e) => `<tr id="error-${e.code}"><td><a href="#error-${e.code}">${e.code}</a></td><td>${e.statusCodes.join(', ')}</td><td>${escapeHtml(e.title)}</td><td>${escapeHtml(e.what)}</td></tr>`)
          .join('');
        request.ctx.countReply?.(request, 200);
        return reply
          .code(200)
          .header('content-type', 'text/html; charset=utf-8')
          .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
          .send(`<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Errors: channel-messaging</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}tr:target{background:#ffc}</style>
</head><body><h1>Errors</h1><p>Every error is answered as <code>{"error": {"code", "statusCode", "message", "href"}}</code> with the headers <code>X-Service-ErrorCode</code> and <code>X-Service-ErrorMessage</code>; the message says what was wrong in this request.</p>
<table><thead><tr><th>code</th><th>HTTP status</th><th>title</th><th>what it means, what to do</th></tr></thead><tbody>${rows}</tbody></table></body></html>`);
      },
    },
  });
}
