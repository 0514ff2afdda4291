import { ServiceError } from '../errors.js';

/**
 * Protocol versions (spec: Versioning). 0.8 is the spec's form and the default. The official SDKs
 * state newer versions (ably-js v2 sends 6); from 2 on, responses take the shapes those SDKs read
 * (stats entries, a body on publish); from 3 on, batch calls answer one BatchResult
 * (`successCount`, `failureCount`, `results`), where 2 and earlier answer the spec's array.
 */
export const SPEC_VERSION = '0.8';
const KNOWN = new Set(['0.8', '0.9', '1', '1.0', '1.1', '1.2', '2', '3', '4', '5', '6']);

export interface ApiVersion {
  value: string;
  /** true when the request asked for the newer response shapes of the SDKs (version 2 and later). */
  modern: boolean;
  /** true from version 3: batch calls (batch publish, batch presence, token revocation) answer BatchResult objects. */
  batchResults: boolean;
}

/** What a request that states no version gets (shared: treat it as read-only). */
export const DEFAULT_VERSION: ApiVersion = { value: SPEC_VERSION, modern: false, batchResults: false };

export function resolveVersion(header: string | undefined, param: unknown): ApiVersion {
  // A `v` given more than once is an array: refused as a repeated format or limit is, never
  // read as no version (that answered the default's shapes to a client that stated another).
  if (param !== undefined && typeof param !== 'string') {
    throw new ServiceError('invalidParameterValue', 'v must be given once, as one version');
  }
  const raw = header ?? param;
  if (raw === undefined || raw === '') return DEFAULT_VERSION;
  const value = raw.trim();
  if (!KNOWN.has(value)) {
    throw new ServiceError(
      'unsupportedProtocolVersion',
      `version "${value}" is not supported; use one of ${[...KNOWN].join(', ')} (default ${SPEC_VERSION})`,
    );
  }
  return { value, modern: Number(value) >= 2, batchResults: Number(value) >= 3 };
}
