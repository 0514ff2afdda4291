import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import { secretsEqual } from '../auth/authenticate.js';
import { tokenRequestMac, type TokenService } from '../auth/tokens.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { headerOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import type { Clock } from '../clock.js';
import { parseCapability } from '../auth/capability.js';
import { resource } from './route-table.js';

export interface RequestTokenOptions {
  tokens: TokenService;
  authenticator: Authenticator;
  apps: AppRegistry;
  clock: Clock;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * POST /keys/<key_name>/requestToken (spec: Request an access token). A signed request (nonce and
 * mac) authenticates itself; an unsigned one needs basic or token credentials of the same key.
 */
export async function requestTokenRoutes(app: FastifyInstance, opts: RequestTokenOptions): Promise<void> {
  resource(app, '/keys/:keyName/requestToken', {
    POST: {
      options: { config: { auth: 'none', formFields: ['keyName', 'ttl', 'capability', 'clientId', 'timestamp', 'nonce', 'mac', 'revocationKey'] } },
      handler: async (request, reply) => {
        const { keyName } = request.params as { keyName: string };
        const now = opts.clock.now();
        const body = request.body;
        if (!isObject(body)) throw new ServiceError('invalidRequestBody', 'the body must be a token request object');
        if (body.keyName !== undefined && body.keyName !== keyName) {
          throw new ServiceError('invalidRequestBody', `keyName "${String(body.keyName)}" does not match the key in the path "${keyName}"`);
        }
        // Number() of another value may throw (`{"valueOf": 1, "toString": 1}`) or take `true` as 1.
        const timestamp = typeof body.timestamp === 'number' || typeof body.timestamp === 'string' ? Number(body.timestamp) : NaN;
        if (!Number.isInteger(timestamp)) {
          throw new ServiceError('invalidRequestBody', 'timestamp (ms since the epoch) is required');
        }
        if (body.clientId !== undefined && (typeof body.clientId !== 'string' || body.clientId.length === 0)) {
          throw new ServiceError('invalidClientId', 'clientId must be a non-empty string');
        }
        if (body.capability !== undefined && typeof body.capability !== 'string' && !isObject(body.capability)) {
          throw new ServiceError('invalidRequestBody', 'capability must be a JSON string');
        }
        if (body.revocationKey !== undefined && (typeof body.revocationKey !== 'string' || body.revocationKey.length === 0 || body.revocationKey.length > 256)) {
          throw new ServiceError('invalidParameterValue', 'revocationKey must be a string of 1 to 256 characters');
        }
        let ttl: number;
        let clientId = body.clientId as string | undefined;
        let revocationKey = body.revocationKey as string | undefined;
        let held;
        let secret: string;
        let askerIssued: number | undefined;
        if (body.mac !== undefined || body.nonce !== undefined) {
          // Signed: the mac proves the key holder made this request.
          if (typeof body.nonce !== 'string' || body.nonce.length < 16) {
            throw new ServiceError('invalidRequestBody', 'nonce must be a string of at least 16 characters');
          }
          if (typeof body.mac !== 'string') throw new ServiceError('invalidRequestBody', 'mac must be a string');
          // The mac does not cover it, so whoever holds the signed request could take it out.
          if (revocationKey !== undefined) {
            throw new ServiceError('invalidParameterValue', 'a signed token request cannot carry a revocationKey (its mac does not cover it); ask with credentials, in an unsigned token request');
          }
          // A key made through another instance a moment ago: once this one applied it.
          await opts.authenticator.keyPending(keyName);
          const found = opts.apps.key(keyName);
          const capabilityText = typeof body.capability === 'string' ? body.capability : body.capability === undefined ? undefined : JSON.stringify(body.capability);
          const expected = found ? tokenRequestMac(found.key.keySecret, { ...body, capability: capabilityText, keyName }) : 'x';
          if (!found || !secretsEqual(expected, body.mac)) {
            throw new ServiceError('invalidCredentials', 'token request mac does not match: sign it with the key secret');
          }
          if (found.key.revoked) throw new ServiceError('keyRevoked', 'this key has been revoked');
          ttl = opts.tokens.ttlFor(body.ttl, now);
          opts.tokens.checkReplay(found.app.appId, keyName, timestamp, body.nonce, now);
          held = parseCapability(found.key.capability);
          secret = found.key.keySecret;
        } else {
          const authorization = headerOf(request, 'authorization');
          await opts.authenticator.pending(authorization, headerOf(request, 'x-ably-clientid'), now);
          const credentials = opts.authenticator.authenticate(authorization, headerOf(request, 'x-ably-clientid'), now);
          if (credentials.keyName !== keyName) {
            throw new ServiceError('incompatibleCredentials', `the credentials belong to key "${credentials.keyName}", not "${keyName}"`);
          }
          // Credentials authenticate each unsigned request, so it has no nonce to remember.
          opts.tokens.checkTimestamp(timestamp, now);
          // A token can only hand on what it has: no longer life (ttlFor), no wider capability
          // (capabilityFor), no other identity. A key may give any identity.
          ttl = opts.tokens.ttlFor(body.ttl, now, credentials.expires);
          if (credentials.clientId !== undefined && credentials.clientId !== '*') {
            if (clientId !== undefined && clientId !== credentials.clientId) {
              throw new ServiceError('invalidClientId', `clientId "${clientId}" does not match the credentials' clientId`);
            }
            clientId = credentials.clientId;
          } else if (credentials.clientId === undefined && credentials.method === 'token' && clientId !== undefined) {
            throw new ServiceError('invalidClientId', `the token that asks has no clientId, so the token it requests cannot have one ("${clientId}")`);
          }
          // A token hands on its revocation key: revoking it reaches the tokens it asked for.
          if (credentials.revocationKey !== undefined) {
            if (revocationKey !== undefined && revocationKey !== credentials.revocationKey) {
              throw new ServiceError('invalidParameterValue', "revocationKey differs from the asking token's; a token hands on its own");
            }
            revocationKey = credentials.revocationKey;
          }
          held = credentials.capability;
          // ...and no later issue time for revocation: revoking the asker revokes what it asked for.
          if (credentials.method === 'token') askerIssued = credentials.issued;
          secret = opts.apps.key(keyName)!.key.keySecret;
        }
        const capability = opts.tokens.capabilityFor(held, body.capability);
        return sendResult(request, reply, 200, opts.tokens.issue(keyName, secret, capability, ttl, clientId, now, revocationKey, askerIssued));
      },
    },
  });
}
