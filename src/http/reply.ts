import type { FastifyReply, FastifyRequest } from 'fastify';
import { CONTENT_TYPES, jsonpCallback, serializeJson, serializeMsgpack, type Format } from './format.js';
import { renderHtml } from './html.js';
import { linkHeader } from './pagination.js';
import { linksForCredentials } from './query-credentials.js';
import { errorHref, type ErrorBody } from '../errors.js';
import { applyResponseControl } from './response-control.js';
import type { ResponseBudget } from './response-budget.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The bytes of large replies not yet read by their clients, bounded (src/http/response-budget.ts); set by buildApp. */
    responseBudget?: ResponseBudget;
  }
}

/**
 * Sends a result in the request's format (spec: Common behaviour), with Link headers for paged
 * results and the `envelope` form when asked for (status 200, real status inside). Every reply
 * of a route goes through here, and is counted here in the app's stats (with the status sent).
 */
export function sendResult(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  body: unknown,
  links?: Record<string, string>,
): FastifyReply {
  const format = request.ctx?.format ?? 'json';
  if (links && Object.keys(links).length > 0) {
    links = linksForCredentials(request, links);
    reply.header('Link', linkHeader(links));
  }
  // A reply without a body (a publish of protocol 0.8, a 204) in an envelope is still an envelope
  // (spec: Envelope response 2, status always 200): its statusCode says what happened, with no response.
  if (body === undefined && !request.ctx?.envelope) {
    request.ctx?.countReply?.(request, status);
    return reply.code(status).send();
  }
  if (body !== undefined && request.ctx?.control && status < 300) body = applyResponseControl(body, request.ctx.control);
  if (request.ctx?.envelope) {
    const envelope: Record<string, unknown> = { statusCode: status };
    if (body !== undefined) envelope.response = body;
    envelope.headers = envelopeHeaders(reply);
    if (links) envelope.rel = links;
    body = envelope;
    status = 200;
  }
  const payload = serialize(request, format, body, links);
  // A large reply waits for its client to read it: the bytes all such replies hold are bounded.
  const budget = request.server.responseBudget;
  if (budget !== undefined && !budget.hold(reply, payload.byteLength, request.ctx?.credentials?.app.appId)) {
    reply.removeHeader('Link');
    return sendError(request, reply, budget.refusal().toJSON());
  }
  request.ctx?.countReply?.(request, status);
  // A page of what clients published, on the origin of the console (which keeps its credentials in
  // the tab): escaped, and besides no script runs in it nor is it read as anything but HTML.
  if (format === 'html') reply.header('Content-Security-Policy', HTML_CSP).header('X-Content-Type-Options', 'nosniff');
  return reply.code(status).header('content-type', CONTENT_TYPES[format]).send(payload);
}

/**
 * Headers a transport cannot show its reader are what an envelope is for (the SDK asks for one
 * where it cannot read Link, and reads `headers.link` from it to page: ably-js unenvelope and
 * PaginatedResource): the reply's own headers (Link, the error headers, WWW-Authenticate, Allow,
 * Retry-After), by lower-case name; not those of the envelope's own transport, nor CORS's.
 */
function envelopeHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    const lower = name.toLowerCase();
    if (value === undefined || TRANSPORT_HEADERS.has(lower) || lower.startsWith('access-control-')) continue;
    headers[lower] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}

const TRANSPORT_HEADERS = new Set(['connection', 'content-length', 'content-type', 'transfer-encoding', 'vary', 'keep-alive']);

/** The html format's pages: their inline style only (html.ts), nothing loaded, not framed. */
const HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function serialize(request: FastifyRequest, format: Format, body: unknown, links: Record<string, string> | undefined): Buffer {
  switch (format) {
    case 'msgpack':
      return serializeMsgpack(body);
    case 'html':
      return Buffer.from(renderHtml(`${request.method} ${request.url.split('?')[0]}`, body, links));
    case 'jsonp':
      return Buffer.from(`${request.ctx?.callback ?? 'callback'}(${serializeJson(body)});`);
    default:
      // A Buffer, because fastify appends a charset to JSON strings and the SDKs want the exact type.
      return Buffer.from(serializeJson(body));
  }
}

/** A header-safe copy of a message: printable ASCII only, bounded length. */
const headerSafe = (s: string): string => s.replace(/[^\x20-\x7e]/g, '?').slice(0, 512);

/** Every failure (spec: Errors): `{error}` body plus the error headers, and their SDK aliases. */
export function sendError(request: FastifyRequest, reply: FastifyReply, error: ErrorBody, extra?: Record<string, unknown>): FastifyReply {
  const message = headerSafe(error.message);
  // A reply refused after its Link headers were set (a page too large for its format) pages nothing.
  reply.removeHeader('Link');
  reply
    .header('X-Service-ErrorCode', String(error.code))
    .header('X-Service-ErrorMessage', message)
    .header('X-Ably-ErrorCode', String(error.code))
    .header('X-Ably-ErrorMessage', message);
  if (error.statusCode === 401) reply.header('WWW-Authenticate', 'Basic realm="service", Bearer');
  const body = { error: { ...error, href: error.href ?? errorHref(error.code) }, ...extra };
  return sendResult(request, reply, error.statusCode, body);
}

export { jsonpCallback };
