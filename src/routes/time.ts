import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import { sendResult } from '../http/reply.js';
import { resource } from './route-table.js';

/** GET /time (spec: Get the service time): `[ms since epoch]`, no authentication. */
export async function timeRoutes(app: FastifyInstance, opts: { clock: Clock }): Promise<void> {
  resource(app, '/time', {
    GET: {
      options: { config: { auth: 'none' } },
      handler: async (request, reply) => sendResult(request, reply, 200, [opts.clock.now()]),
    },
  });
}
