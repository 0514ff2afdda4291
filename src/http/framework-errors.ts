import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { errorHref, ServiceError, type ErrorBody } from '../errors.js';
import { resolveContext } from './request-context.js';
import { sendError } from './reply.js';

/**
 * Errors fastify's router finds before any route runs (a path that does not decode, a name in the
 * path longer than the router takes), answered in the spec's error format like every other error.
 */
export function frameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const refusal =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new ServiceError('invalidChannelName', 'a name in the path is too long (a channel name may have at most 2048 bytes)')
      : error.code === 'FST_ERR_BAD_URL'
        ? new ServiceError('badRequest', 'the path is not valid: a percent-encoded sequence in it does not decode to UTF-8')
        : new ServiceError('badRequest', `the request was refused (${error.code})`);
  try {
    resolveContext(request);
  } catch {
    // A bad format parameter as well: the error goes out in the JSON context already set.
  }
  sendError(request, reply, refusal.toJSON());
}

/**
 * Errors Node's HTTP parser finds (malformed requests, headers too large, a request not received
 * within the timeouts): there is no request to reply to, so the answer is written on the socket,
 * in the spec's error format (JSON), and the connection closed.
 */
export function clientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const error: ErrorBody =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new ServiceError('requestTimeout', 'the request was not received in time; the connection is closed').toJSON()
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new ServiceError('headersTooLarge', 'the request headers are too large').toJSON()
        : new ServiceError('badRequest', 'malformed HTTP request').toJSON();
  const body = JSON.stringify({ error: { ...error, href: errorHref(error.code) } });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${error.statusCode} ${error.statusCode === 408 ? 'Request Timeout' : error.statusCode === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n` +
        `X-Service-ErrorCode: ${error.code}\r\nX-Service-ErrorMessage: ${error.message}\r\n` +
        `X-Ably-ErrorCode: ${error.code}\r\nX-Ably-ErrorMessage: ${error.message}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
