import type { FastifyRequest } from 'fastify';
import { headerOf } from './request-context.js';

/**
 * The platform's query forms of credentials, `?key=<keyName:keySecret>` and `?access_token=<token>`,
 * read only when no Authorization header comes (the header wins): the one a request authenticated
 * with, or undefined.
 */
export type QueryCredential = { param: 'key' | 'access_token'; value: string };

export function queryCredentialOf(request: FastifyRequest): QueryCredential | undefined {
  if (headerOf(request, 'authorization') !== undefined) return undefined;
  const query = request.query as Record<string, unknown> | undefined;
  if (query === undefined || query === null) return undefined;
  if (typeof query.key === 'string' && query.key.length > 0) return { param: 'key', value: query.key };
  if (typeof query.access_token === 'string' && query.access_token.length > 0) return { param: 'access_token', value: query.access_token };
  return undefined;
}

/**
 * The longest credential a link carries, percent-encoded. A reply has up to three links, each with
 * at most 2048 characters of parameters (src/http/pagination.ts), and HTTP clients refuse response
 * headers over 16 KiB: a longer credential (a very large JWT) is left out of the links, which then
 * need the credential sent again, as a header-authenticated client sends it.
 */
export const MAX_LINK_CREDENTIAL = 2048;

/**
 * Links (spec: Pagination) for a request authenticated by its query: each carries that credential,
 * as sent, so a client that can only put credentials in the URL (a JSONP script, a plain link) can
 * follow `next`, `first` and `current` (without it, 40106). A request authenticated by its
 * Authorization header gets the links unchanged: a `key` or `access_token` it also put in its query
 * (unused, the header wins) is never copied into them.
 */
export function linksForCredentials(request: FastifyRequest, links: Record<string, string>): Record<string, string> {
  if (request.ctx?.credentials === undefined) return links;
  const credential = queryCredentialOf(request);
  if (credential === undefined) return links;
  const param = `${credential.param}=${encodeURIComponent(credential.value)}`;
  if (param.length > MAX_LINK_CREDENTIAL) return links;
  const carried: Record<string, string> = {};
  for (const [rel, url] of Object.entries(links)) carried[rel] = url.endsWith('?') ? `${url}${param}` : `${url}&${param}`;
  return carried;
}
