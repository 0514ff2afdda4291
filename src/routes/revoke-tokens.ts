import type { FastifyInstance } from 'fastify';
import { appendFailure, ServiceError, type ErrorBody } from '../errors.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { TokensRevoked } from '../domain/events.js';
import { credentialsOf } from '../http/request-context.js';
import { sendError, sendResult } from '../http/reply.js';
import { toErrorBody } from '../http/error-body.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import { resource } from './route-table.js';
import type { TokenRevoker } from '../apps/app-writers.js';

export type RevocationLimits = Pick<Limits, 'maxRevocationTargets' | 'maxRevocations' | 'maxRevocationsPerApp'>;

/** The platform's: `allowReauthMargin` postpones a revocation by 30 seconds. */
export const REAUTH_MARGIN_MS = 30_000;
/** The platform's: `issuedBefore` at most an hour back. */
const ISSUED_BEFORE_WINDOW_MS = 3600_000;
const TARGET_TYPES = ['clientId', 'revocationKey'];

type TargetResult = { target: string; issuedBefore: number; appliesAt: number } | { target: string; error: ErrorBody };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A target's length: clientIds and revocation keys are short names; each held one costs memory on every instance. */
const MAX_TARGET_LENGTH = 256;

/** A target's error: with its `href`, as every other error carries one (a batch call's per-channel errors too). */
function checkTarget(target: string): ErrorBody | undefined {
  const problem = targetProblem(target);
  return problem === undefined ? undefined : toErrorBody(problem);
}

/** What is wrong with a target, if anything: valid is `type:value` of a type tokens carry. */
function targetProblem(target: string): ServiceError | undefined {
  if (target.length > MAX_TARGET_LENGTH) {
    return new ServiceError('badRequest', `a target is at most ${MAX_TARGET_LENGTH} characters long; this one is ${target.length}`);
  }
  const colon = target.indexOf(':');
  const type = colon < 0 ? target : target.slice(0, colon);
  if (colon > 0 && colon < target.length - 1 && TARGET_TYPES.includes(type)) return undefined;
  if (type === 'channel' && colon < target.length - 1) {
    return new ServiceError('tokenRevocationNotEnabled', 'revocation by channel is not enabled on this service; revoke by clientId or revocationKey');
  }
  return new ServiceError('badRequest', `invalid target "${target}": give "clientId:<clientId>" or "revocationKey:<revocationKey>"`);
}

/**
 * POST /keys/<keyName>/revokeTokens, as the SDK's `auth.revokeTokens(specifiers, {issuedBefore,
 * allowReauthMargin})` calls it: basic credentials of that key (a token: 40162), a key made with
 * `revocableTokens` (otherwise 40163), `targets` of `clientId:` and `revocationKey:`. Each target
 * succeeds or fails on its own; from protocol 3 the answer is the SDK's BatchResult, up to 2 the
 * spec's batch form. A revocation is an event on the log (TokensRevoked), so every instance
 * refuses the tokens it reaches (40141) from `appliesAt`, and so does a restart.
 */
export async function revokeTokensRoutes(
  app: FastifyInstance,
  opts: { apps: AppRegistry; revoker: TokenRevoker; clock: Clock; limits: RevocationLimits },
): Promise<void> {
  resource(app, '/keys/:keyName/revokeTokens', {
    POST: {
      handler: async (request, reply) => {
        const { keyName } = request.params as { keyName: string };
        const credentials = credentialsOf(request);
        if (credentials.method !== 'basic') {
          throw new ServiceError('basicAuthenticationRequired', 'token revocation needs basic authentication with the key that issued the tokens, not a token');
        }
        if (credentials.keyName !== keyName) {
          throw new ServiceError('incompatibleCredentials', `the credentials belong to key "${credentials.keyName}", not "${keyName}"; revoke with the key that issued the tokens`);
        }
        if (!opts.apps.key(keyName)?.key.revocableTokens) {
          throw new ServiceError('keyTokensNotRevocable', `key "${keyName}" was not made with revocableTokens, so its tokens cannot be revoked`);
        }
        const body = request.body;
        if (!isObject(body)) throw new ServiceError('invalidRequestBody', 'the body must be an object with targets (["clientId:<id>", ...])');
        const { targets, issuedBefore: askedBefore, allowReauthMargin } = body;
        if (!Array.isArray(targets) || targets.length === 0 || targets.some((t) => typeof t !== 'string')) {
          throw new ServiceError('invalidRequestBody', 'targets must be a non-empty array of "type:value" strings');
        }
        if (targets.length > opts.limits.maxRevocationTargets) {
          throw new ServiceError('invalidParameterValue', `a revocation may name at most ${opts.limits.maxRevocationTargets} targets; this one names ${targets.length}`);
        }
        if (allowReauthMargin !== undefined && typeof allowReauthMargin !== 'boolean') {
          throw new ServiceError('invalidParameterValue', 'allowReauthMargin must be true or false');
        }
        const now = opts.clock.now();
        const issuedBefore = askedBefore === undefined ? now : Number(askedBefore);
        if (!Number.isInteger(issuedBefore) || issuedBefore > now || issuedBefore < now - ISSUED_BEFORE_WINDOW_MS) {
          throw new ServiceError('invalidParameterValue', 'issuedBefore must be a time in ms since the epoch, not in the future and at most an hour ago');
        }
        const appliesAt = allowReauthMargin === true ? now + REAUTH_MARGIN_MS : now;

        const results: TargetResult[] = (targets as string[]).map((target) => {
          const error = checkTarget(target);
          return error ? { target, error } : { target, issuedBefore, appliesAt };
        });
        const valid = [...new Set(results.filter((r) => !('error' in r)).map((r) => r.target))];
        if (valid.length > 0) {
          const appId = credentials.app.appId;
          const event: TokensRevoked = { type: 'tokens.revoked', appId, keyName, targets: valid, issuedBefore, appliesAt };
          // A repeat, or a revocation one already held covers, is in force already: answered as
          // such, with nothing appended (the apps topic is replayed whole at every start).
          const growth = opts.revoker.changes(event) ? opts.revoker.growth(event) : undefined;
          if (growth !== undefined && growth > 0 && (opts.revoker.held() + growth > opts.limits.maxRevocations || opts.revoker.held(appId) + growth > opts.limits.maxRevocationsPerApp)) {
            throw new ServiceError(
              'rateLimited',
              `the service holds its maximum of token revocations (${opts.limits.maxRevocationsPerApp} per app, ${opts.limits.maxRevocations} in all); each lapses once the tokens it reaches have expired (24 hours after its issuedBefore); retry later`,
            );
          }
          try {
            if (growth !== undefined) await opts.revoker.revoke(event);
          } catch (err) {
            throw appendFailure(err, 'the log did not acknowledge the revocation, so it may not hold; retry');
          }
        }
        const failureCount = results.filter((r) => 'error' in r).length;
        if (request.ctx?.version.batchResults) {
          return sendResult(request, reply, 201, { successCount: results.length - failureCount, failureCount, results });
        }
        if (failureCount === 0) return sendResult(request, reply, 201, results);
        const error = new ServiceError('batchError', 'the revocation includes errors; see batchResponse').toJSON();
        return sendError(request, reply, error, { batchResponse: results });
      },
    },
  });
}
