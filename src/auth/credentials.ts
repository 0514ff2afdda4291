import type { AppDefinition } from '../apps/app.js';
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
}

/** Verifies bearer tokens; the token issue plugs in here. */
export interface TokenVerifier {
  verify(token: string, now: number): Credentials;
}
