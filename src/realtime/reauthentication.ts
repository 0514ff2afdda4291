import type { Credentials } from '../auth/credentials.js';
import { serviceError, type WireError } from './protocol.js';

/** Credentials, and the clientId they are used as (a wildcard token's may name one: RSA15b). */
export interface Identity {
  readonly credentials: Credentials;
  readonly clientId: string | undefined;
}

/** Whom a connection may act for: `*` (anyone: a wildcard token, or a key without a clientId), a clientId, or nobody. */
function actsFor(clientId: string | undefined, method: Credentials['method']): string | undefined {
  return clientId === '*' || (clientId === undefined && method === 'basic') ? '*' : clientId;
}

/**
 * Why an AUTH's new credentials may not replace a connection's (REALTIME-PROTOCOL.md §7.3: ERROR
 * 40102, the connection fails), or undefined when they may. A connection belongs to its app and
 * key: its connectionKey is signed with the key's secret, and a resume under another key's token
 * could not prove it (80018). And it keeps whom it acts for, as the platform refuses a clientId
 * change on an established connection: a connection for anyone that took a token for one clientId
 * could no longer leave the members it entered for others (enterClient), nor could one narrowed to
 * nobody. A named connection may renew with a wildcard token and keeps its clientId (RSA15b).
 * A resume with new credentials (handshake.ts) goes by the same rule.
 */
export function reauthenticationRefusal(held: Identity, next: Identity): WireError | undefined {
  if (next.credentials.app.appId !== held.credentials.app.appId) return serviceError('incompatibleCredentials', 'the new token is for another app');
  if (next.credentials.keyName !== held.credentials.keyName) {
    return serviceError('incompatibleCredentials', `the new token was issued by another key ("${next.credentials.keyName}") than the connection's ("${held.credentials.keyName}"); connect again with it`);
  }
  const was = actsFor(held.clientId, held.credentials.method);
  const now = actsFor(next.clientId, next.credentials.method);
  if (now === was || (now === '*' && held.clientId !== undefined && held.clientId !== '*')) return undefined;
  const whom = (id: string | undefined): string => (id === '*' ? 'any clientId' : id === undefined ? 'no clientId' : `clientId "${id}"`);
  return serviceError('incompatibleCredentials', `the new credentials are for ${whom(next.clientId)}, and the connection acts for ${whom(was)}: a connection's clientId does not change; connect again with it`);
}
