import type { FastifyInstance } from 'fastify';
import { appendFailure, ServiceError } from '../errors.js';
import { keyString, type AppDefinition, type NamespaceRule } from '../domain/app.js';
import { newApp } from '../apps/default-app.js';
import { parseCapability, stringifyCapability } from '../auth/capability.js';
import { restChannelName } from '../channels/channel-qualifier.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import type { Clock } from '../clock.js';
import { presenceFields } from '../presence/presence-body.js';
import type { AppAdmin, PresenceFixture } from '../apps/app-writers.js';
import { DEFAULT_LIMITS, type Limits } from '../limits.js';
import { resource } from './route-table.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export type SandboxLimits = Pick<Limits, 'maxSandboxFixtureMembers' | 'maxSandboxAppBodyBytes' | 'maxSandboxApps' | 'maxDataDepth' | 'maxMessageSize'>;

/** Keys and namespaces of one sandbox app, each; far above what the harnesses ask for. */
const MAX_KEYS = 100;
const MAX_NAMESPACES = 100;

/**
 * Reads a `post_apps` body (the SDK test harnesses' test-app-setup.json). Everything is checked
 * here, before anything is appended: what passes is an app and fixtures the log can take whole.
 */
export function parseAppSetup(body: unknown, now: number, limits: SandboxLimits = DEFAULT_LIMITS): { app: AppDefinition; presence: PresenceFixture[] } {
  const spec = isObject(body) ? body : {};
  if (body !== undefined && body !== null && !isObject(body)) throw new ServiceError('invalidRequestBody', 'the body must be an object like post_apps');
  const rawKeys = spec.keys === undefined ? [{}] : spec.keys;
  if (!Array.isArray(rawKeys) || rawKeys.length === 0 || rawKeys.length > MAX_KEYS) {
    throw new ServiceError('invalidRequestBody', `keys must be an array of 1 to ${MAX_KEYS} key objects`);
  }
  const keys = rawKeys.map((k, i) => {
    if (!isObject(k)) throw new ServiceError('invalidRequestBody', `keys[${i}] must be an object`);
    if (k.revocableTokens !== undefined && typeof k.revocableTokens !== 'boolean') {
      throw new ServiceError('invalidRequestBody', `keys[${i}].revocableTokens must be true or false`);
    }
    const revocableTokens = k.revocableTokens === true;
    if (k.capability === undefined) return { revocableTokens };
    try {
      return { capability: stringifyCapability(parseCapability(k.capability)), revocableTokens };
    } catch (err) {
      throw new ServiceError('invalidRequestBody', `keys[${i}].capability: ${(err as Error).message}`);
    }
  });
  const rawNamespaces = spec.namespaces ?? [];
  if (!Array.isArray(rawNamespaces) || rawNamespaces.length > MAX_NAMESPACES) {
    throw new ServiceError('invalidRequestBody', `namespaces must be an array of at most ${MAX_NAMESPACES}`);
  }
  const namespaces: NamespaceRule[] = rawNamespaces.map((ns, i) => {
    if (!isObject(ns) || typeof ns.id !== 'string' || ns.id.length === 0) {
      throw new ServiceError('invalidRequestBody', `namespaces[${i}] must be an object with a non-empty id`);
    }
    if (ns.retentionHours !== undefined && !(Number.isInteger(ns.retentionHours) && (ns.retentionHours as number) >= 24 && (ns.retentionHours as number) <= 72)) {
      throw new ServiceError('invalidRequestBody', `namespaces[${i}].retentionHours must be a whole number from 24 to 72`);
    }
    // Flags (persisted, pushEnabled, mutableMessages, ...) are kept as given, so only plain values.
    for (const [flag, value] of Object.entries(ns)) {
      if (!['boolean', 'number', 'string'].includes(typeof value) || (typeof value === 'string' && value.length > 256)) {
        throw new ServiceError('invalidRequestBody', `namespaces[${i}].${flag} must be a boolean, a number or a short string`);
      }
    }
    return { ...ns, id: ns.id } as NamespaceRule;
  });
  const rawChannels = spec.channels ?? [];
  if (!Array.isArray(rawChannels)) throw new ServiceError('invalidRequestBody', 'channels must be an array');
  let memberCount = 0;
  const presence: PresenceFixture[] = rawChannels.map((c, i) => {
    if (!isObject(c) || typeof c.name !== 'string') throw new ServiceError('invalidRequestBody', `channels[${i}] must have a name`);
    const channel = restChannelName(c.name);
    const members = c.presence ?? [];
    if (!Array.isArray(members)) throw new ServiceError('invalidRequestBody', `channels[${i}].presence must be an array`);
    memberCount += members.length;
    if (memberCount > limits.maxSandboxFixtureMembers) {
      throw new ServiceError('invalidRequestBody', `an app may have at most ${limits.maxSandboxFixtureMembers} presence fixture members in all`);
    }
    return {
      channel,
      members: members.map((m, j) => {
        const where = `channels[${i}].presence[${j}]`;
        if (!isObject(m)) throw new ServiceError('invalidRequestBody', `${where} needs a clientId`);
        return presenceFields(m, limits, where, (given) => {
          if (given === undefined) throw new ServiceError('invalidRequestBody', `${where} needs a clientId`);
          return given;
        });
      }),
    };
  });
  return { app: newApp({ source: 'sandbox', keys, namespaces, now }), presence };
}

/** Sandbox provisioning (SANDBOX=1), as the SDKs' test harnesses use it. */
export async function sandboxAppRoutes(app: FastifyInstance, opts: { admin: AppAdmin; clock: Clock; limits?: SandboxLimits }): Promise<void> {
  const limits = opts.limits ?? DEFAULT_LIMITS;
  /** Creations in progress: counted with the apps held, so creations racing cannot pass the limit. */
  let creating = 0;
  resource(app, '/apps', {
    POST: {
      options: { config: { auth: 'none' }, bodyLimit: limits.maxSandboxAppBodyBytes },
      handler: async (request, reply) => {
        const { app: created, presence } = parseAppSetup(request.body, opts.clock.now(), limits);
        if (opts.admin.held() + creating >= limits.maxSandboxApps) {
          throw new ServiceError('appLimitExceeded', `the sandbox holds its maximum of ${limits.maxSandboxApps} apps (MAX_SANDBOX_APPS); delete one (DELETE /apps/<appId>) to make room`);
        }
        creating++;
        try {
          await opts.admin.create(created, presence);
        } catch (err) {
          throw appendFailure(err, 'the log did not acknowledge the new app, so none was created; retry');
        } finally {
          creating--;
        }
        return sendResult(request, reply, 201, {
          appId: created.appId,
          accountId: created.accountId,
          keys: created.keys.map((k) => ({
            id: k.keyName.split('.')[1],
            keyName: k.keyName,
            keySecret: k.keySecret,
            keyStr: keyString(k),
            capability: k.capability,
            revocableTokens: k.revocableTokens === true,
            expires: null,
          })),
          namespaces: created.namespaces,
          channels: presence.map((p) => ({ name: p.channel, presence: p.members })),
        });
      },
    },
  });
  resource(app, '/apps/:appId', {
    DELETE: {
      handler: async (request, reply) => {
        const { appId } = request.params as { appId: string };
        const credentials = credentialsOf(request);
        if (credentials.app.appId !== appId || credentials.method !== 'basic') {
          throw new ServiceError('capabilityDenied', 'an app can only be deleted with one of its own keys');
        }
        // Only what POST /apps made: the apps of APPS_FILE and the default app are the operator's.
        // Deleted, they were gone for good (the app.deleted event replays over them at every
        // start), and any of their keys, however narrow its capability, could do it.
        if (credentials.app.source !== 'sandbox') {
          throw new ServiceError('capabilityDenied', `app "${appId}" is not a sandbox app (it comes from ${credentials.app.source === 'file' ? 'APPS_FILE' : 'DATA_DIR, the default app'}): only apps made by POST /apps can be deleted here`);
        }
        try {
          await opts.admin.delete(appId);
        } catch (err) {
          throw appendFailure(err, 'the log did not acknowledge the deletion, so the app stays; retry');
        }
        return sendResult(request, reply, 204, undefined);
      },
    },
  });
}
