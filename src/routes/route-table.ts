import type { FastifyInstance, RouteHandlerMethod, RouteShorthandOptions } from 'fastify';
import { ServiceError } from '../errors.js';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
const ALL: Method[] = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'];

export interface MethodRoute {
  handler: RouteHandlerMethod;
  options?: RouteShorthandOptions;
}

/**
 * Registers a resource's methods; the other methods on the same path answer 405 (code 40500)
 * rather than 404, so a wrong method is told apart from a wrong path.
 */
export function resource(app: FastifyInstance, url: string, methods: Partial<Record<Method, MethodRoute>>): void {
  for (const method of ALL) {
    const route = methods[method];
    if (route) {
      app.route({ ...route.options, method, url, handler: route.handler });
    } else {
      const allowed = Object.keys(methods).join(', ');
      app.route({
        method,
        url,
        config: { auth: 'none' },
        handler: async (_request, reply) => {
          reply.header('Allow', allowed);
          throw new ServiceError('methodNotAllowed', `${method} is not supported on ${url}; use ${allowed}`);
        },
      });
    }
  }
}
