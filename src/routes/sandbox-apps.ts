import type { FastifyInstance } from 'fastify';
import { ServiceError } from '../errors.js';
import { keyString, type AppDefinition, type NamespaceRule } from '../apps/app.js';
import { newApp } from '../apps/default-app.js';
import { parseCapability, stringifyCapability } from '../auth/capability.js';
import { checkChannelName } from '../channels/channel-name.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import type { Clock } from '../clock.js';
import type { MessageData } from '../messages/message.js';
import { resource } from './route-table.js';

export interface PresenceFixture {
  channel: string;
  members: { clientId: string; data?: MessageData; encoding?: string }[];
}

export interface AppAdmin {
  /** Appends app.created (and the presence fixtures) and resolves once durable and applied locally. */
  create(app: AppDefinition, presence: PresenceFixture[]): Promise<void>;
  delete(appId: string): Promise<void>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads a `post_apps` body (the SDK test harnesses' test-app-setup.json). */
export function parseAppSetup(body: unknown, now: number): { app: AppDefinition; presence: PresenceFixture[] } {
  const spec = isObject(body) ? body : {};
  if (body !== undefined && body !== null && !isObject(body)) throw new ServiceError('invalidRequestBody', 'the body must be an object like post_apps');
  const rawKeys = spec.keys === undefined ? [{}] : spec.keys;
  if (!Array.isArray(rawKeys) || rawKeys.length === 0 || rawKeys.length > 100) {
    throw new ServiceError('invalidRequestBody', 'keys must be an array of 1 to 100 key objects');
  }
  const capabilities = rawKeys.map((k, i) => {
    if (!isObject(k)) throw new ServiceError('invalidRequestBody', `keys[${i}] must be an object`);
    if (k.capability === undefined) return undefined;
    try {
      return stringifyCapability(parseCapability(k.capability));
    } catch (err) {
      throw new ServiceError('invalidRequestBody', `keys[${i}].capability: ${(err as Error).message}`);
    }
  });
  const rawNamespaces = spec.namespaces ?? [];
  if (!Array.isArray(rawNamespaces)) throw new ServiceError('invalidRequestBody', 'namespaces must be an array');
  const namespaces: NamespaceRule[] = rawNamespaces.map((ns, i) => {
    if (!isObject(ns) || typeof ns.id !== 'string' || ns.id.length === 0) {
      throw new ServiceError('invalidRequestBody', `namespaces[${i}] must be an object with a non-empty id`);
    }
    if (ns.retentionHours !== undefined && !(Number.isInteger(ns.retentionHours) && (ns.retentionHours as number) >= 24 && (ns.retentionHours as number) <= 72)) {
      throw new ServiceError('invalidRequestBody', `namespaces[${i}].retentionHours must be a whole number from 24 to 72`);
    }
    return { ...ns, id: ns.id } as NamespaceRule;
  });
  const rawChannels = spec.channels ?? [];
  if (!Array.isArray(rawChannels)) throw new ServiceError('invalidRequestBody', 'channels must be an array');
  const presence: PresenceFixture[] = rawChannels.map((c, i) => {
    if (!isObject(c) || typeof c.name !== 'string') throw new ServiceError('invalidRequestBody', `channels[${i}] must have a name`);
    const channel = checkChannelName(c.name);
    const members = Array.isArray(c.presence) ? c.presence : [];
    return {
      channel,
      members: members.map((m, j) => {
        if (!isObject(m) || typeof m.clientId !== 'string' || m.clientId.length === 0) {
          throw new ServiceError('invalidRequestBody', `channels[${i}].presence[${j}] needs a clientId`);
        }
        return {
          clientId: m.clientId,
          data: m.data as MessageData | undefined,
          encoding: typeof m.encoding === 'string' ? m.encoding : undefined,
        };
      }),
    };
  });
  return { app: newApp({ source: 'sandbox', capabilities, namespaces, now }), presence };
}

/** Sandbox provisioning (SANDBOX=1), as the SDKs' test harnesses use it. */
export async function sandboxAppRoutes(app: FastifyInstance, opts: { admin: AppAdmin; clock: Clock }): Promise<void> {
  resource(app, '/apps', {
    POST: {
      options: { config: { auth: 'none' } },
      handler: async (request, reply) => {
        const { app: created, presence } = parseAppSetup(request.body, opts.clock.now());
        await opts.admin.create(created, presence);
        return sendResult(request, reply, 201, {
          appId: created.appId,
          accountId: created.accountId,
          keys: created.keys.map((k) => ({
            id: k.keyName.split('.')[1],
            keyName: k.keyName,
            keySecret: k.keySecret,
            keyStr: keyString(k),
            capability: k.capability,
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
        await opts.admin.delete(appId);
        return sendResult(request, reply, 204, undefined);
      },
    },
  });
}
