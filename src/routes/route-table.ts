import type { FastifyInstance, RouteHandlerMethod, RouteShorthandOptions } from 'fastify';
import { ServiceError } from '../errors.js';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
const ALL: Method[] = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'];

export interface MethodRoute {
  handler: RouteHandlerMethod;
  options?: RouteShorthandOptions;
}

/**
 * Registers a resource's methods. The other methods on the same path answer 404 with code 40400,
 * as the platform does (the SDKs check it), in the error format; the message and an `Allow`
 * header name the methods the path serves.
 */
export function resource(app: FastifyInstance, url: string, methods: Partial<Record<Method, MethodRoute>>): void {
  for (const method of ALL) {
    const route = methods[method];
    if (route) {
      app.route({ ...route.options, method, url, handler: route.handler });
    } else {
      const allowed = Object.keys(methods).join(', ');
      // Answered before the body is read, so no body (an empty JSON one, say) changes the answer.
      app.route({
        method,
        url,
        config: { auth: 'none' },
        onRequest: (_request, reply, done) => {
          reply.header('Allow', allowed);
          done(new ServiceError('notFound', `${method} is not served on ${url}; it serves ${allowed}`));
        },
        handler: async () => undefined,
      });
    }
  }
}
