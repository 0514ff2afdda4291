import { createHmac, randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { intersectCapabilities, parseCapability, stringifyCapability, type Capability } from './capability.js';
import { secretsEqual } from './authenticate.js';
import type { Credentials, TokenVerifier } from './credentials.js';
import { NonceCache, type NonceLimits } from './nonce-cache.js';
import { DEFAULT_LIMITS } from '../limits.js';
import { DEFAULT_JWT_LIMITS, isJwt, JwtVerifier } from './jwt.js';

export interface TokenPolicy {
  defaultTtlMs: number;
  maxTtlMs: number;
  /** How far a token request's timestamp may be from the service time, either way. */
  requestWindowMs: number;
}

export const DEFAULT_TOKEN_POLICY: TokenPolicy = {
  defaultTtlMs: 60 * 60_000,
  maxTtlMs: 24 * 3600_000,
  requestWindowMs: 10 * 60_000,
};

export interface TokenDetails {
  token: string;
  keyName: string;
  issued: number;
  expires: number;
  capability: string;
  clientId?: string;
  revocationKey?: string;
}

/** The signed part of a token. */
interface TokenClaims {
  k: string; // keyName
  i: number; // issued
  x: number; // expires
  c: string; // capability (canonical JSON)
  u?: string; // clientId
  r?: string; // revocationKey
  o?: number; // issued, as revocation reads it: the asking token's, for a token a token asked for
  n: string; // nonce, so two tokens issued in the same millisecond differ
}

const b64url = (b: Buffer | string): string => Buffer.from(b).toString('base64url');
const sign = (secret: string, payload: string): string => createHmac('sha256', secret).update(payload).digest('base64url');

/**
 * Token request mac (as the SDKs compute it): base64 HMAC-SHA256 with the key secret over
 * `keyName\nttl\ncapability\nclientId\ntimestamp\nnonce\n`, absent fields as empty strings.
 */
export function tokenRequestMac(secret: string, r: Partial<Record<'keyName' | 'ttl' | 'capability' | 'clientId' | 'timestamp' | 'nonce', unknown>>): string {
  // Only text and numbers have a text to sign: String() of another value may throw (`{"toString": 1}`).
  const field = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  const text = `${field(r.keyName)}\n${field(r.ttl)}\n${field(r.capability)}\n${field(r.clientId)}\n${field(r.timestamp)}\n${field(r.nonce)}\n`;
  return createHmac('sha256', secret).update(text).digest('base64');
}

/**
 * Self-verifying tokens: `<claims>.<signature>`, both base64url, signed with the issuing key's
 * secret. Any instance that knows the key can check one with no shared state; revoking or
 * deleting the key invalidates all its tokens.
 */
export class TokenService implements TokenVerifier {
  readonly nonces: NonceCache;
  /** The platform's JWTs, signed by the app's own servers with a key's secret. */
  readonly jwt: JwtVerifier;

  constructor(
    private readonly apps: AppRegistry,
    readonly policy: TokenPolicy = DEFAULT_TOKEN_POLICY,
    limits: NonceLimits = DEFAULT_LIMITS,
    /** Waits for a key made through another instance (src/apps/keys-catch-up.ts), for a JWT's kid. */
    catchUp?: () => Promise<void>,
  ) {
    this.nonces = new NonceCache(limits);
    // A native token embedded in a JWT is checked as one given alone.
    this.jwt = new JwtVerifier(apps, { ...DEFAULT_JWT_LIMITS, maxTtlMs: policy.maxTtlMs }, (token, now) => this.verifyNative(token, now), catchUp);
  }

  prepare(token: string, now: number): Promise<void> | undefined {
    return isJwt(token) ? this.jwt.prepare(token, now) : undefined;
  }

  /**
   * `askerIssued`: for a token a token asks for, the asking token's issue time (as revocation reads
   * it), which the new token keeps for revocation: a revocation reaching the asker reaches it too,
   * so a token cannot outlive its revocation by asking for a fresh one within allowReauthMargin.
   */
  issue(keyName: string, keySecret: string, capability: Capability, ttlMs: number, clientId: string | undefined, now: number, revocationKey?: string, askerIssued?: number): TokenDetails {
    const claims: TokenClaims = { k: keyName, i: now, x: now + ttlMs, c: stringifyCapability(capability), n: randomBytes(6).toString('base64url') };
    if (clientId !== undefined) claims.u = clientId;
    if (revocationKey !== undefined) claims.r = revocationKey;
    if (askerIssued !== undefined && askerIssued < now) claims.o = askerIssued;
    const payload = b64url(JSON.stringify(claims));
    const token = `${payload}.${sign(keySecret, payload)}`;
    const details: TokenDetails = { token, keyName, issued: claims.i, expires: claims.x, capability: claims.c };
    if (clientId !== undefined) details.clientId = clientId;
    if (revocationKey !== undefined) details.revocationKey = revocationKey;
    return details;
  }

  keyNameOf(token: string): string | undefined {
    if (isJwt(token)) return undefined;
    const dot = token.lastIndexOf('.');
    if (dot <= 0) return undefined;
    try {
      const k = (JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as Partial<TokenClaims>).k;
      return typeof k === 'string' ? k : undefined;
    } catch {
      return undefined;
    }
  }

  verify(token: string, now: number): Credentials {
    return isJwt(token) ? this.jwt.verify(token, now) : this.verifyNative(token, now);
  }

  private verifyNative(token: string, now: number): Credentials {
    const dot = token.lastIndexOf('.');
    let claims: TokenClaims;
    try {
      if (dot <= 0) throw new Error('no signature');
      claims = JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as TokenClaims;
      if (typeof claims.k !== 'string' || typeof claims.x !== 'number' || typeof claims.c !== 'string') throw new Error('claims');
    } catch {
      throw new ServiceError('tokenUnrecognized', 'token not recognized');
    }
    const found = this.apps.key(claims.k);
    const expected = found ? sign(found.key.keySecret, token.slice(0, dot)) : 'x';
    if (!secretsEqual(expected, token.slice(dot + 1)) || !found) throw new ServiceError('tokenUnrecognized', 'token not recognized');
    if (found.key.revoked) throw new ServiceError('tokenRevoked', 'the key that issued this token has been revoked');
    if (claims.x <= now) throw new ServiceError('tokenError', 'token expired');
    const issued = typeof claims.o === 'number' ? claims.o : claims.i;
    const credentials: Credentials = { app: found.app, keyName: claims.k, capability: parseCapability(claims.c), clientId: claims.u, method: 'token', expires: claims.x, issued };
    if (typeof claims.r === 'string') credentials.revocationKey = claims.r;
    return credentials;
  }

  /** Refuses a timestamp outside the window. */
  checkTimestamp(timestamp: number, now: number): void {
    if (Math.abs(now - timestamp) > this.policy.requestWindowMs) {
      throw new ServiceError(
        'tokenRequestTimestampOutsideWindow',
        `token request timestamp is more than ${this.policy.requestWindowMs / 60_000} minutes from the service time; use GET /time`,
      );
    }
  }

  /** Refuses a timestamp outside the window and a nonce already used within it. */
  checkReplay(appId: string, keyName: string, timestamp: number, nonce: string, now: number): void {
    this.checkTimestamp(timestamp, now);
    // The request is acceptable until its timestamp leaves the window, so its nonce is kept that long.
    if (!this.nonces.remember(appId, keyName, nonce, timestamp + this.policy.requestWindowMs + 1, now)) {
      throw new ServiceError('nonceReplayed', 'this token request nonce has been used already');
    }
  }

  /** The token capability: what was asked for, within what the key (or token) may do. */
  capabilityFor(held: Capability, requested: unknown): Capability {
    if (requested === undefined || requested === null || requested === '') return held;
    const result = intersectCapabilities(held, parseCapability(requested));
    if (result.size === 0) throw new ServiceError('capabilityDenied', 'the requested capability is not within the key capability');
    return result;
  }

  /**
   * The token's ttl. A token that asks for a token (`askerExpires`) cannot outlive itself: without
   * a ttl the new token gets the default or what the asker has left, whichever is shorter (a
   * client asking without a ttl expects a usable token, not a refusal it cannot act on); a ttl
   * asked for explicitly beyond the asker's expiry is refused, because capping it would hand back
   * less than was asked without saying so.
   */
  ttlFor(ttl: unknown, now: number, askerExpires?: number): number {
    const left = askerExpires === undefined ? Infinity : askerExpires - now;
    if (ttl === undefined || ttl === null || ttl === '') return Math.min(this.policy.defaultTtlMs, left);
    // A number, or its digits as text (as a form sends it); not `true` nor `[1000]`, which Number() takes.
    const n = typeof ttl === 'number' ? ttl : typeof ttl === 'string' && /^\d+$/.test(ttl) ? Number(ttl) : NaN;
    if (!Number.isInteger(n) || n <= 0) throw new ServiceError('invalidParameterValue', 'ttl must be a positive whole number of milliseconds');
    if (n > this.policy.maxTtlMs) throw new ServiceError('invalidParameterValue', `ttl is above the maximum of ${this.policy.maxTtlMs} ms (24 hours)`);
    if (n > left) {
      throw new ServiceError(
        'invalidParameterValue',
        `ttl ${n} ms goes past the expiry of the token that asks (${left} ms left): ask for at most that, or leave ttl out to get it`,
      );
    }
    return n;
  }
}
