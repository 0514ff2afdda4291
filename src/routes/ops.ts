import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../errors.js';
import { sendError, sendResult } from '../http/reply.js';
import type { Metrics } from '../metrics/metrics.js';
import { resource } from './route-table.js';

/** One readiness check: its name, whether it passes, and what it saw. */
export interface ReadinessCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface OpsDeps {
  /** The checks GET /ready runs (src/service.ts: log writable, consumers caught up, not shutting down). */
  readiness: () => ReadinessCheck[];
  metrics: Metrics;
}

/**
 * Operations routes, open like GET /time (no credentials; keep them off the public internet at the
 * reverse proxy, README: Deploying):
 * - GET /health: the process is alive and its event loop answers (200 always).
 * - GET /ready: 200 when this instance should take traffic, 503 (code 50005) with the failed checks
 *   otherwise, for load balancers and container health checks.
 * - GET /metrics: Prometheus text format (README: Metrics).
 */
export async function opsRoutes(app: FastifyInstance, deps: OpsDeps): Promise<void> {
  const open = { config: { auth: 'none' as const } };
  resource(app, '/health', {
    GET: { options: open, handler: async (request, reply) => sendResult(request, reply, 200, { status: 'ok' }) },
  });
  resource(app, '/ready', {
    GET: {
      options: open,
      handler: async (request, reply) => {
        const checks = deps.readiness();
        const failed = checks.filter((c) => !c.ok);
        if (failed.length === 0) return sendResult(request, reply, 200, { status: 'ready', checks });
        const error = new ServiceError('unavailable', `not ready: ${failed.map((c) => `${c.name} (${c.detail})`).join('; ')}`);
        reply.header('Retry-After', '1');
        return sendError(request, reply, error.toJSON(), { status: 'not ready', checks });
      },
    },
  });
  resource(app, '/metrics', {
    GET: {
      options: open,
      handler: async (_request, reply) => {
        const text = await deps.metrics.text();
        return reply.code(200).header('content-type', deps.metrics.contentType).send(text);
      },
    },
  });
}
