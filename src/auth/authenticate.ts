import { createHmac, timingSafeEqual } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { parseCapability } from './capability.js';
import type { Credentials, TokenVerifier } from './credentials.js';
import type { RevocationRegistry } from '../../projections/revocations/revocation-registry.js';

/** Compares secrets in constant time (over fixed-length digests, so lengths do not leak either). */
export function secretsEqual(a: string, b: string): boolean {
  const da = createHmac('sha256', 'compare').update(a).digest();
  const db = createHmac('sha256', 'compare').update(b).digest();
  return timingSafeEqual(da, db);
}

const decodeBase64 = (value: string): string | undefined => {
  if (!/^[A-Za-z0-9+/=_-]+$/.test(value)) return undefined;
  return Buffer.from(value, 'base64').toString('utf8');
};

/**
 * The verified-credentials cache's key: the Authorization value itself when no clientId header
 * comes with it (a header value holds no NUL, so it cannot equal a key with one), and no string
 * built per request for the common case.
 */
/** Credentials kept verified at the most (the oldest goes first). */
export const CREDENTIALS_CACHE_SIZE = 10_000;
/**
 * The longest Authorization (+ clientId) header kept: what one client can make the cache hold is
 * bounded in bytes too (10,000 × 2,048 characters), not only in entries. Longer ones (padded
 * headers, very large JWTs) are verified every time.
 */
export const CREDENTIALS_CACHE_KEY_CHARS = 2_048;

const cacheKeyOf = (authorization: string, clientIdHeader: string | undefined): string =>
  clientIdHeader === undefined ? authorization : `${authorization}\u0000${clientIdHeader}`;

/**
 * Authentication (spec: Authentication): `Basic base64(key)` or `Bearer base64(token)`, the token
 * a native one (src/auth/tokens.ts) or a JWT (src/auth/jwt.ts).
 * No credentials: 40106; credentials that do not check out: 40101. Never a 4014x for a key,
 * because the SDKs answer those by requesting a token.
 */
export class Authenticator {
  /**
   * Credentials already verified, by Authorization (+ clientId) header, while the registry is
   * unchanged: a server publishing at high volume sends the same header every time.
   */
  private readonly verified = new Map<string, { credentials: Credentials; version: number; expires: number }>();

  constructor(
    private readonly apps: AppRegistry,
    private readonly tokens?: TokenVerifier,
    private readonly revocations?: RevocationRegistry,
    /** Waits until this instance applied what the apps topic holds now (a key made elsewhere); never rejects. */
    private readonly catchUp?: () => Promise<void>,
  ) {}

  /**
   * For a bearer token whose check is asynchronous (a JWT not seen yet), or credentials of a key
   * this instance does not know yet (keyPending), a promise that settles once `authenticate` can
   * answer for them; undefined, as for every other credential, when it can now. Never rejects.
   * Callers await it, when there is one, before `authenticate`.
   */
  pending(authorization: string | undefined, clientIdHeader: string | undefined, now: number): Promise<void> | undefined {
    if (authorization === undefined || authorization.length < 8) return undefined;
    if (authorization.charCodeAt(0) !== 66 && authorization.charCodeAt(0) !== 98) return undefined; // B, b
    // Verified already (the common case: the same header on every request): nothing to wait for.
    const hit = this.verified.get(cacheKeyOf(authorization, clientIdHeader));
    if (hit && hit.version === this.apps.version && hit.expires > now) return undefined;
    if (authorization.slice(0, 6).toLowerCase() === 'basic ') {
      const decoded = decodeBase64(authorization.slice(6).trim());
      const colon = decoded?.indexOf(':') ?? -1;
      return colon < 0 ? undefined : this.keyPending(decoded!.slice(0, colon));
    }
    if (!this.tokens || authorization.slice(0, 7).toLowerCase() !== 'bearer ') return undefined;
    const token = decodeBase64(authorization.slice(7).trim());
    if (token === undefined) return undefined;
    const prepared = this.tokens.prepare?.(token, now);
    if (prepared !== undefined) return prepared;
    const keyName = this.tokens.keyNameOf?.(token);
    return keyName === undefined ? undefined : this.keyPending(keyName);
  }

  /**
   * For a key this instance does not know (yet: made through another instance, its event not
   * applied here), a promise that settles once this instance applied what the apps topic held now
   * (src/apps/keys-catch-up.ts); undefined for a known key, or with no catch-up. Never rejects.
   */
  keyPending(keyName: string): Promise<void> | undefined {
    if (this.catchUp === undefined || this.apps.key(keyName) !== undefined) return undefined;
    return this.catchUp();
  }

  authenticate(authorization: string | undefined, clientIdHeader: string | undefined, now: number): Credentials {
    const cacheKey = authorization === undefined ? undefined : cacheKeyOf(authorization, clientIdHeader);
    const hit = cacheKey === undefined ? undefined : this.verified.get(cacheKey);
    if (hit && hit.version === this.apps.version && hit.expires > now) return this.notRevoked(hit.credentials, now);
    const credentials = this.notRevoked(this.check(authorization, clientIdHeader, now), now);
    if (cacheKey !== undefined && cacheKey.length <= CREDENTIALS_CACHE_KEY_CHARS) {
      // Full: the oldest entry goes (a Map keeps insertion order), not every client's.
      if (this.verified.size >= CREDENTIALS_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(cacheKey, { credentials, version: this.apps.version, expires: credentials.expires ?? Infinity });
    }
    return credentials;
  }

  /**
   * A revoked token is refused (40141) from the moment its revocation applies, cached or not: a
   * revocation may apply later than it arrived (allowReauthMargin), so it is looked up every time.
   */
  private notRevoked(credentials: Credentials, now: number): Credentials {
    if (credentials.method === 'token' && this.revocations?.isRevoked(credentials, now)) {
      throw new ServiceError('tokenRevoked', 'this token has been revoked (token revocation); request a new one');
    }
    return credentials;
  }

  private check(authorization: string | undefined, clientIdHeader: string | undefined, now: number): Credentials {
    if (!authorization) {
      throw new ServiceError('noAuthentication', 'no credentials: send Authorization: Basic base64(key) or Bearer base64(token)');
    }
    const space = authorization.indexOf(' ');
    const scheme = authorization.slice(0, space).toLowerCase();
    const value = authorization.slice(space + 1).trim();
    if (scheme === 'basic') return this.basic(value, clientIdHeader);
    if (scheme === 'bearer') {
      if (!this.tokens) throw new ServiceError('invalidCredentials', 'token authentication is not enabled on this service');
      const token = decodeBase64(value);
      if (!token) throw new ServiceError('tokenUnrecognized', 'the bearer value is not base64 of a token');
      return this.tokens.verify(token, now);
    }
    throw new ServiceError('invalidCredentials', `unsupported authorization scheme "${authorization.slice(0, Math.max(space, 0))}"; use Basic or Bearer`);
  }

  private basic(value: string, clientIdHeader: string | undefined): Credentials {
    const decoded = decodeBase64(value);
    const colon = decoded?.indexOf(':') ?? -1;
    if (!decoded || colon < 0) throw new ServiceError('invalidCredentials', 'basic credentials must be base64 of "keyName:keySecret"');
    const keyName = decoded.slice(0, colon);
    const secret = decoded.slice(colon + 1);
    const found = this.apps.key(keyName);
    // Compare even when the key is unknown, so the answer takes the same time.
    const ok = secretsEqual(secret, found?.key.keySecret ?? '\u0000no-such-key');
    if (!found || !ok) {
      // A key of an app this service does not have is 40400, as the platform answers it (the
      // SDK's failure tests expect it, and go `failed` on it); a key the app does not have, or a
      // wrong secret, 40101.
      // A key name without an appId (no dot) is 40101, as the platform answers it now.
      const appId = keyName.slice(0, Math.max(keyName.indexOf('.'), 0));
      if (!found && appId !== '' && !this.apps.app(appId)) throw new ServiceError('notFound', `invalid key: no app "${appId.slice(0, 64)}" on this service`);
      throw new ServiceError('invalidCredentials', 'invalid key: unknown key name or wrong secret');
    }
    if (found.key.revoked) throw new ServiceError('keyRevoked', 'this key has been revoked');
    let clientId: string | undefined;
    if (clientIdHeader !== undefined) {
      clientId = decodeBase64(clientIdHeader);
      if (!clientId) throw new ServiceError('invalidClientId', 'X-Ably-ClientId must be base64 of a non-empty clientId');
    }
    return { app: found.app, keyName, capability: parseCapability(found.key.capability), clientId, method: 'basic' };
  }
}
