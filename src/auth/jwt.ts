import { createHash } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { ServiceError } from '../errors.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { intersectCapabilities, parseCapability } from './capability.js';
import type { Credentials } from './credentials.js';
import { stringsWellFormed } from '../codec/well-formed-text.js';

/**
 * The platform's JWTs (its docs: "JSON Web Tokens"): a JWS signed HS256 with the secret of the key
 * its header's `kid` names (`appId.keyId`), with the claims `iat` and `exp` (seconds),
 * `x-ably-capability` (a capability as a JSON string; the key's when absent), `x-ably-clientId`,
 * and, as this service's own, `x-ably-revocationKey` (a token revocation target, like a native
 * token's revocationKey).
 *
 * A JWT of the app's own scheme may instead embed a token of this service (the platform's
 * "embedded token"): `x-ably-token` in its header, or in its claims. It is signed with a secret of
 * the app's own, which the service does not know: the embedded token (a native token, or a JWT as
 * above) carries the credentials, and the outer JWT's `exp`, when it has one, ends them earlier.
 *
 * jose checks them. Its checks are asynchronous (WebCrypto), while authentication answers
 * synchronously on its fast path (src/app.ts: no promise per request); so a JWT is checked once,
 * by `prepare`, and its outcome kept: `verify` then answers from it, with the time checks made
 * against the time of use.
 */

/** A JWT is three base64url parts; a native token is two (src/auth/tokens.ts). */
export const isJwt = (token: string): boolean => {
  const first = token.indexOf('.');
  if (first <= 0) return false;
  const second = token.indexOf('.', first + 1);
  return second > first + 1 && token.indexOf('.', second + 1) < 0;
};

export interface JwtLimits {
  /** Longest JWT taken, in characters (the platform's fit an HTTP header: about 8 KB). */
  maxJwtLength: number;
  /** The longest a JWT may live (exp - iat), as native tokens (TokenPolicy.maxTtlMs): revocations are kept that long. */
  maxTtlMs: number;
  /** How far ahead of the service's time a JWT's iat may be (the signer's clock may be ahead). */
  maxIssuedAheadMs: number;
  /** JWT outcomes kept; the oldest goes first. */
  cacheSize: number;
}

export const DEFAULT_JWT_LIMITS: JwtLimits = { maxJwtLength: 8192, maxTtlMs: 24 * 3600_000, maxIssuedAheadMs: 10 * 60_000, cacheSize: 10_000 };

/**
 * A JWT's place in the outcome cache: a fixed-size digest, so that what the cache holds is bounded
 * in bytes (cacheSize × 44 characters) whatever the JWTs' length. Kept whole, 10,000 junk JWTs of
 * 8 KB from clients with no credentials held 64 MB of heap (130 MB more RSS in a running service).
 */
const idOf = (token: string): string => createHash('sha256').update(token).digest('base64');

/** What checking a JWT found: its credentials (less the time checks), or the error to answer. */
type Outcome = { version: number; credentials: Credentials } | { version: number; error: ServiceError; retryAt?: number };

const invalid = (why: string): ServiceError => new ServiceError('invalidJwt', `invalid JWT: ${why}`);
const tooLong = (max: number): ServiceError => invalid(`it is longer than ${max} characters`);

/** The platform's claim names. */
const CAPABILITY_CLAIM = 'x-ably-capability';
const CLIENT_ID_CLAIM = 'x-ably-clientId';
const REVOCATION_KEY_CLAIM = 'x-ably-revocationKey';
/** Where a JWT of the app's own scheme carries a token of this service (header first, then claims). */
const EMBEDDED_TOKEN = 'x-ably-token';

/** Checks a native token (src/auth/tokens.ts), for one embedded in a JWT. */
export type NativeTokenCheck = (token: string, now: number) => Credentials;

export class JwtVerifier {
  private readonly outcomes = new Map<string, Outcome>();
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    private readonly apps: AppRegistry,
    private readonly limits: JwtLimits = DEFAULT_JWT_LIMITS,
    /** For a native token embedded in a JWT; without it, such a JWT is refused. */
    private readonly native?: NativeTokenCheck,
    /** Waits until this instance applied what the apps topic holds now (a key made elsewhere: src/apps/keys-catch-up.ts). */
    private readonly catchUp?: () => Promise<void>,
  ) {}

  /**
   * Checks a JWT not checked yet (or checked before the apps last changed): a promise that settles
   * once `verify` can answer for it; undefined when it can now. Never rejects.
   */
  prepare(token: string, now: number): Promise<void> | undefined {
    // Refused as it is (verify): its outcome is not kept, so that a client sending megabyte
    // tokens (an AUTH frame may hold 1 MiB) neither fills the cache with them nor pushes out others'.
    if (token.length > this.limits.maxJwtLength) return undefined;
    const id = idOf(token);
    const known = this.outcomes.get(id);
    const due = known !== undefined && 'retryAt' in known && known.retryAt !== undefined && known.retryAt <= now;
    if (known && known.version === this.apps.version && !due) return undefined;
    const running = this.inFlight.get(id);
    if (running) return running;
    const waiting = this.kidPending(token);
    const done = waiting === undefined ? this.checkAndKeep(id, token, now) : waiting.then(() => this.checkAndKeep(id, token, now));
    const settled = done.finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, settled);
    return settled;
  }

  /**
   * Checks a JWT and keeps the outcome. A method, not a closure: an error's stack keeps the
   * functions it passed through, and a closure's would keep the JWT it was made for.
   */
  private checkAndKeep(id: string, token: string, now: number): Promise<void> {
    const version = this.apps.version;
    return this.check(token, now).then(
      (credentials) => this.keep(id, { version, credentials }),
      (err: unknown) => {
        const error = err instanceof ServiceError ? err : invalid('it could not be verified');
        // A copy: a message quoting part of the JWT (its kid, cut to 64 characters) may be a slice
        // of a string of the JWT, and would keep all of it (V8 slices strings without copying).
        error.message = Buffer.from(error.message).toString();
        // Its stack, as text (a copy likewise): the frames V8 keeps until it is read hold the
        // functions the error passed through, and a closure's scope (the wait for a kid not
        // known yet) holds the JWT.
        error.stack = Buffer.from(error.stack ?? '').toString();
        this.keep(id, { version, error, retryAt: this.validFrom(token, now) });
      },
    );
  }

  /** For a JWT whose kid names a key not known here (made elsewhere a moment ago): the wait for it (src/apps/keys-catch-up.ts). */
  private kidPending(token: string): Promise<void> | undefined {
    if (!this.catchUp) return undefined;
    let kid: unknown;
    try {
      kid = (decodeProtectedHeader(token) as Record<string, unknown>).kid;
    } catch {
      return undefined; // check() says what is wrong with it
    }
    return typeof kid === 'string' && kid.length > 0 && !this.apps.key(kid) ? this.catchUp() : undefined;
  }

  /** The credentials of a JWT `prepare` checked, if it is still valid at `now`; throws otherwise. */
  verify(token: string, now: number): Credentials {
    if (token.length > this.limits.maxJwtLength) throw tooLong(this.limits.maxJwtLength);
    const known = this.outcomes.get(idOf(token));
    if (!known || known.version !== this.apps.version) {
      // Only when more JWTs than the cache holds arrived between prepare and verify.
      throw new ServiceError('tokenError', 'the JWT could not be checked in time; retry');
    }
    if ('error' in known) throw known.error;
    const { credentials } = known;
    if (credentials.expires! <= now) throw new ServiceError('tokenExpired', 'JWT expired (exp has passed); request a new one');
    return credentials;
  }

  /**
   * For a JWT refused before the time it claims to be valid from (nbf, or iat less the
   * maxIssuedAheadMs it may be ahead), that time: the refusal may not hold then, so it is checked
   * once more (else a JWT sent a little early stayed refused for as long as its outcome was kept).
   */
  private validFrom(token: string, now: number): number | undefined {
    let claims: Record<string, unknown>;
    try {
      claims = decodeJwt(token) as Record<string, unknown>;
    } catch {
      return undefined;
    }
    const { nbf, iat } = claims;
    const from = Math.max(typeof nbf === 'number' ? nbf * 1000 : 0, typeof iat === 'number' ? iat * 1000 - this.limits.maxIssuedAheadMs : 0);
    return Number.isFinite(from) && from > now ? from : undefined;
  }

  private keep(id: string, outcome: Outcome): void {
    if (this.outcomes.size >= this.limits.cacheSize && !this.outcomes.has(id)) {
      this.outcomes.delete(this.outcomes.keys().next().value!);
    }
    this.outcomes.set(id, outcome);
  }

  private async check(token: string, now: number): Promise<Credentials> {
    if (token.length > this.limits.maxJwtLength) throw tooLong(this.limits.maxJwtLength);
    let kid: unknown;
    let alg: unknown;
    let header: Record<string, unknown>;
    try {
      header = decodeProtectedHeader(token) as Record<string, unknown>;
      ({ kid, alg } = header);
    } catch {
      throw invalid('its header is not base64url JSON');
    }
    const embedded = this.embeddedIn(token, header);
    if (embedded) return this.checkEmbedded(embedded, now);
    if (alg !== 'HS256') throw invalid(`alg must be HS256, not ${JSON.stringify(alg)}`);
    if (typeof kid !== 'string' || kid.length === 0) throw invalid('its header has no kid (the key name, appId.keyId, whose secret signed it)');
    const found = this.apps.key(kid);
    if (!found) {
      const appId = kid.split('.')[0];
      // At most 64 characters of each: the outcome (and its message) is kept.
      if (!this.apps.app(appId)) throw new ServiceError('notFound', `invalid JWT: no app "${appId.slice(0, 64)}" (from the kid "${kid.slice(0, 64)}")`);
      throw new ServiceError('invalidCredentials', `invalid JWT: no key "${kid.slice(0, 64)}" in app "${appId.slice(0, 64)}"`);
    }
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, new TextEncoder().encode(found.key.keySecret), {
        algorithms: ['HS256'],
        requiredClaims: ['iat', 'exp'],
        currentDate: new Date(now),
      }));
    } catch (err) {
      throw this.joseError(err);
    }
    if (found.key.revoked) throw new ServiceError('tokenRevoked', 'the key that signed this JWT has been revoked');
    const iat = payload.iat as number;
    const exp = payload.exp as number;
    const issued = Math.round(iat * 1000);
    const expires = Math.round(exp * 1000);
    if (issued > now + this.limits.maxIssuedAheadMs) throw invalid('iat is in the future (check the clock of the signer: GET /time)');
    if (expires <= issued) throw invalid('exp is not after iat');
    if (expires - issued > this.limits.maxTtlMs) throw invalid(`exp is more than ${this.limits.maxTtlMs / 3600_000} hours after iat, the longest a token may live`);
    const held = parseCapability(found.key.capability);
    let capability = held;
    const asked = payload[CAPABILITY_CLAIM];
    if (asked !== undefined) {
      if (typeof asked !== 'string') throw invalid(`${CAPABILITY_CLAIM} must be a capability as a JSON string`);
      let parsed;
      try {
        parsed = parseCapability(asked);
      } catch (err) {
        throw invalid(`${CAPABILITY_CLAIM}: ${(err as Error).message}`);
      }
      capability = intersectCapabilities(held, parsed);
      if (capability.size === 0) throw new ServiceError('capabilityDenied', `the JWT's ${CAPABILITY_CLAIM} is not within the capability of the key "${kid}"`);
    }
    const credentials: Credentials = { app: found.app, keyName: kid, capability, method: 'token', issued, expires };
    const clientId = payload[CLIENT_ID_CLAIM];
    if (clientId !== undefined && clientId !== null) {
      if (typeof clientId !== 'string' || clientId.length === 0) throw invalid(`${CLIENT_ID_CLAIM} must be a non-empty string`);
      // The claims are JSON, which may spell a lone surrogate: such a clientId has no UTF-8 form, and
      // the messages and presence members it would sign could never be stored (ClickHouse refuses them).
      if (!stringsWellFormed(clientId)) throw invalid(`${CLIENT_ID_CLAIM} holds a lone surrogate (\\uD800 to \\uDFFF unpaired): it is not valid Unicode text`);
      credentials.clientId = clientId;
    }
    const revocationKey = payload[REVOCATION_KEY_CLAIM];
    if (revocationKey !== undefined) {
      if (typeof revocationKey !== 'string' || revocationKey.length === 0 || revocationKey.length > 256) {
        throw invalid(`${REVOCATION_KEY_CLAIM} must be a string of 1 to 256 characters`);
      }
      if (!stringsWellFormed(revocationKey)) throw invalid(`${REVOCATION_KEY_CLAIM} holds a lone surrogate (\\uD800 to \\uDFFF unpaired): it is not valid Unicode text`);
      credentials.revocationKey = revocationKey;
    }
    return credentials;
  }

  /** The token a JWT of the app's own scheme embeds (x-ably-token), with the JWT's own exp; undefined if none. */
  private embeddedIn(token: string, header: Record<string, unknown>): { inner: string; exp: unknown } | undefined {
    let claims: Record<string, unknown> | undefined;
    try {
      claims = decodeJwt(token) as Record<string, unknown>;
    } catch {
      claims = undefined;
    }
    const inner = header[EMBEDDED_TOKEN] ?? claims?.[EMBEDDED_TOKEN];
    if (inner === undefined) return undefined;
    if (typeof inner !== 'string' || inner.length === 0) throw invalid(`${EMBEDDED_TOKEN} must be a token (a string)`);
    return { inner, exp: claims?.exp };
  }

  /** The credentials of an embedded token, ending no later than the outer JWT's exp. */
  private async checkEmbedded({ inner, exp }: { inner: string; exp: unknown }, now: number): Promise<Credentials> {
    if (exp !== undefined && (typeof exp !== 'number' || !Number.isFinite(exp))) throw invalid('exp must be a number of seconds');
    let credentials: Credentials;
    if (isJwt(inner)) {
      // One level: a JWT embedded in a JWT is checked as one, and may embed nothing more.
      const header = (() => {
        try {
          return decodeProtectedHeader(inner) as Record<string, unknown>;
        } catch {
          throw invalid(`the embedded ${EMBEDDED_TOKEN}'s header is not base64url JSON`);
        }
      })();
      if (this.embeddedIn(inner, header)) throw invalid(`the embedded ${EMBEDDED_TOKEN} embeds another token`);
      credentials = await this.check(inner, now);
    } else {
      if (!this.native) throw invalid(`a native token in ${EMBEDDED_TOKEN} is not taken here`);
      credentials = this.native(inner, now);
    }
    if (typeof exp === 'number') {
      const outer = Math.round(exp * 1000);
      if (outer <= now) throw new ServiceError('tokenExpired', 'JWT expired (exp has passed); request a new one');
      if (credentials.expires === undefined || outer < credentials.expires) credentials = { ...credentials, expires: outer };
    }
    return credentials;
  }

  /** jose's refusals in the platform's codes: an expired JWT 40142, any other 40144. */
  private joseError(err: unknown): ServiceError {
    const code = (err as { code?: unknown }).code;
    const message = (err as Error).message;
    switch (code) {
      case 'ERR_JWT_EXPIRED':
        return new ServiceError('tokenExpired', 'JWT expired (exp has passed); request a new one');
      case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
        return invalid('signature verification failed: sign it (HS256) with the secret of the key its kid names');
      case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
        return invalid(`claim ${JSON.stringify((err as { claim?: string }).claim)}: ${message}`);
      default:
        return invalid(typeof message === 'string' ? message : 'it could not be verified');
    }
  }
}
