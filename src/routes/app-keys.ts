import type { FastifyInstance, FastifyRequest } from 'fastify';
import { appendFailure, ServiceError } from '../errors.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import { ruleView } from '../webhooks/rules.js';
import { keyView, parseKeyChanges, type KeyAdmin, type KeyLimits } from '../apps/key-admin.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { resource } from './route-table.js';

/**
 * Key management, in the shape of the platform's Control API (`/apps/<appId>/keys`):
 *   GET    /apps/<appId>/keys                 the app's keys, without their secrets
 *   POST   /apps/<appId>/keys                 a new key {name, capability, revocableTokens, management}: 201, with its secret once
 *   PATCH  /apps/<appId>/keys/<keyId>         changes a key's name, capability, revocableTokens or management
 *   POST   /apps/<appId>/keys/<keyId>/revoke  revokes it for good
 *   GET    /apps/<appId>/rules                the app's webhook rules (src/webhooks/rules.ts)
 *   POST   /apps/<appId>/rules                adds a rule, in the platform's rule JSON: 201
 *   DELETE /apps/<appId>/rules/<ruleId>       removes it: 204
 * Basic credentials of one of the app's own keys with the management right (a key attribute:
 * src/domain/app.ts): a token 40162, any other key 40160. Changes are events on the apps topic.
 */
export async function appKeysRoutes(app: FastifyInstance, opts: { keys: KeyAdmin; apps: AppRegistry; limits: KeyLimits }): Promise<void> {
  const manager = (request: FastifyRequest): string => {
    const { appId } = request.params as { appId: string };
    const credentials = credentialsOf(request);
    if (credentials.method !== 'basic') throw new ServiceError('basicAuthenticationRequired', 'key management needs basic authentication with a management key, not a token');
    if (credentials.app.appId !== appId) throw new ServiceError('capabilityDenied', `key "${credentials.keyName}" belongs to another app; a key manages its own app's keys only`);
    if (!opts.apps.key(credentials.keyName)?.key.management) {
      throw new ServiceError('capabilityDenied', `key "${credentials.keyName}" has no management right; use a key made with "management": true (the default app's root key has it)`);
    }
    return appId;
  };
  const applied = async <T>(change: () => Promise<T>): Promise<T> => {
    try {
      return await change();
    } catch (err) {
      throw appendFailure(err, 'the log did not acknowledge the key change, so it may not hold; retry');
    }
  };

  resource(app, '/apps/:appId/keys', {
    GET: {
      handler: async (request, reply) => {
        const appId = manager(request);
        return sendResult(request, reply, 200, opts.keys.list(appId).map((k) => keyView(appId, k)));
      },
    },
    POST: {
      handler: async (request, reply) => {
        const appId = manager(request);
        const changes = parseKeyChanges(request.body, opts.limits, { update: false });
        const key = await applied(() => opts.keys.create(appId, changes));
        return sendResult(request, reply, 201, keyView(appId, key, true));
      },
    },
  });
  resource(app, '/apps/:appId/keys/:keyId', {
    PATCH: {
      handler: async (request, reply) => {
        const appId = manager(request);
        const { keyId } = request.params as { keyId: string };
        const changes = parseKeyChanges(request.body, opts.limits, { update: true });
        const key = await applied(() => opts.keys.update(appId, keyId, changes));
        return sendResult(request, reply, 200, keyView(appId, key));
      },
    },
  });
  resource(app, '/apps/:appId/keys/:keyId/revoke', {
    POST: {
      handler: async (request, reply) => {
        const appId = manager(request);
        const { keyId } = request.params as { keyId: string };
        const key = await applied(() => opts.keys.revoke(appId, keyId));
        return sendResult(request, reply, 200, keyView(appId, key));
      },
    },
  });
  resource(app, '/apps/:appId/rules', {
    GET: {
      handler: async (request, reply) => {
        const appId = manager(request);
        return sendResult(request, reply, 200, opts.keys.rules(appId).map((r) => ruleView(appId, r)));
      },
    },
    POST: {
      handler: async (request, reply) => {
        const appId = manager(request);
        const rule = await applied(() => opts.keys.addRule(appId, request.body));
        return sendResult(request, reply, 201, ruleView(appId, rule));
      },
    },
  });
  resource(app, '/apps/:appId/rules/:ruleId', {
    DELETE: {
      handler: async (request, reply) => {
        const appId = manager(request);
        const { ruleId } = request.params as { ruleId: string };
        await applied(() => opts.keys.removeRule(appId, ruleId));
        return sendResult(request, reply, 204, undefined);
      },
    },
  });
}
