import type { AppDefinition } from '../domain/app.js';
import type { Capability } from './capability.js';

/** Who a request is from, after authentication. */
export interface Credentials {
  app: AppDefinition;
  keyName: string;
  capability: Capability;
  /** The identity the request may act as; `*` means any. */
  clientId?: string;
  method: 'basic' | 'token';
  /** When token credentials stop being valid (ms since the epoch). */
  expires?: number;
  /**
   * When token credentials were issued, as token revocation reads it (it reaches tokens issued
   * before a time): for a token a token asked for, the asking token's.
   */
  issued?: number;
  /** The token's revocation key, if it was given one (a `revocationKey:<key>` revocation target). */
  revocationKey?: string;
}

/** Verifies bearer tokens; the token issue plugs in here. */
export interface TokenVerifier {
  verify(token: string, now: number): Credentials;
  /**
   * For a token whose check is asynchronous (a JWT: src/auth/jwt.ts), a promise that settles once
   * `verify` can answer for it; undefined when it can now. Never rejects.
   */
  prepare?(token: string, now: number): Promise<void> | undefined;
  /** The key a token says it was issued by (unverified), when `prepare` has nothing to wait for. */
  keyNameOf?(token: string): string | undefined;
}
