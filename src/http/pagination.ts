import { ServiceError } from '../errors.js';

/**
 * Link headers (spec: Pagination). URLs are relative, `./<last path segment>?<params>`, values
 * percent-encoded (a raw comma would split the header), relations quoted.
 */
export type LinkParams = Record<string, string | number | undefined>;

/**
 * The longest query a link may carry, percent-encoded. A response has up to three links, and HTTP
 * clients refuse response headers over 16 KiB (Node's among them): a longer parameter would make
 * the reply unreadable, so the request is refused instead.
 */
const MAX_LINK_QUERY = 2048;

export function relativeUrl(resource: string, params: LinkParams): string {
  const query = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  if (query.length > MAX_LINK_QUERY) {
    throw new ServiceError('invalidParameterValue', `the query parameters are too long to page through (over ${MAX_LINK_QUERY} characters, percent-encoded)`);
  }
  return `./${resource}?${query}`;
}

export function linkHeader(links: Record<string, string>): string {
  return Object.entries(links)
    .map(([rel, url]) => `<${url}>; rel="${rel}"`)
    .join(', ');
}

/**
 * Request parameters a link keeps, so following it answers in the same format, version and shape:
 * the response-control parameters (fields, flatten, select) shape every query route's reply, so a
 * `current` or `next` without them would answer another content than the page asked for.
 */
const FORMAT_PARAMS = ['format', 'callback', 'envelope', 'v', 'fields', 'flatten', 'select'];

export function keptParams(query: Record<string, unknown>, extra: string[] = []): LinkParams {
  const kept: LinkParams = {};
  for (const k of [...FORMAT_PARAMS, ...extra]) if (typeof query[k] === 'string') kept[k] = query[k] as string;
  return kept;
}

/** The last path segment of a route, for `./messages?...` style links. */
export const resourceOf = (path: string): string => path.split('?')[0].split('/').filter(Boolean).pop() ?? '';
