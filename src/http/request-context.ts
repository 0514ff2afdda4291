import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { jsonpCallback, negotiateFormat, type Format } from './format.js';
import { DEFAULT_VERSION, resolveVersion, type ApiVersion } from './version.js';
import type { Credentials } from '../auth/credentials.js';
import { parseResponseControl, type ResponseControl } from './response-control.js';

export interface RequestContext {
  format: Format;
  version: ApiVersion;
  envelope: boolean;
  callback?: string;
  credentials?: Credentials;
  /** fields / flatten / select, on query (GET) routes */
  control?: ResponseControl;
  /** Counts the reply in the app's stats, called with the status it is sent with (src/http/reply.ts). */
  countReply?: ReplyCounter;
  /** performance.now() when the request's context was made (its latency, src/metrics). */
  startedAt: number;
}

export type ReplyCounter = (request: FastifyRequest, status: number) => void;

declare module 'fastify' {
  interface FastifyRequest {
    ctx?: RequestContext;
  }
  interface FastifyContextConfig {
    /** 'none' for routes the spec leaves open (time, signed token requests, sandbox app creation). */
    auth?: 'none' | 'required';
    /** The fields a form body may hold on this route; without it the route takes no form bodies (src/http/form-body.ts). */
    formFields?: readonly string[];
  }
}

const header = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/**
 * Format, version and envelope of a request; errors here still answer in a usable format (and
 * are counted by `countReply`, the route's).
 */
export function resolveContext(request: FastifyRequest, countReply?: ReplyCounter): RequestContext {
  const query = (request.query ?? {}) as Record<string, unknown>;
  // Set a JSON context first, so that an error below is itself answered. Every field is there
  // from the start, so that all contexts share one shape.
  const ctx: RequestContext = {
    format: 'json',
    version: DEFAULT_VERSION,
    envelope: false,
    callback: undefined,
    credentials: undefined,
    control: undefined,
    countReply,
    startedAt: performance.now(),
  };
  request.ctx = ctx;
  const format = negotiateFormat(header(request, 'accept'), query.format);
  // A bad callback is answered in JSON: there is no safe callback to wrap the error in.
  if (format === 'jsonp') ctx.callback = jsonpCallback(query.callback);
  ctx.format = format;
  ctx.version = resolveVersion(header(request, 'x-service-version') ?? header(request, 'x-ably-version'), query.v);
  if (query.envelope !== undefined) {
    // The envelope is written in the response's format: `msgpack` with MessagePack (the SDK's
    // channel.status() asks for it so), `json` with the others.
    if (query.envelope !== 'json' && query.envelope !== 'true' && query.envelope !== 'msgpack') {
      throw new ServiceError('invalidParameterValue', 'envelope must be "json" or "msgpack"');
    }
    if ((ctx.format === 'msgpack') !== (query.envelope === 'msgpack')) {
      throw new ServiceError('invalidParameterValue', 'envelope=msgpack goes with the msgpack format, envelope=json with the json, jsonp and html formats');
    }
    ctx.envelope = true;
  }
  if (request.method === 'GET') ctx.control = parseResponseControl(query);
  return ctx;
}

export const credentialsOf = (request: FastifyRequest): Credentials => {
  const credentials = request.ctx?.credentials;
  if (!credentials) throw new ServiceError('unauthorized', 'this route needs credentials');
  return credentials;
};

export const headerOf = header;
