import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { sendResult } from '../http/reply.js';
import { directionParam, integerParam, limitParam, timeParam } from '../http/query-params.js';
import { relativeUrl, type LinkParams } from '../http/pagination.js';
import { messageToWire } from '../messages/wire.js';
import type { Format } from '../http/format.js';
import { channelFor, pageLinks } from './channel-messages.js';
import type { PresenceMember, MembersQuery } from '../../projections/presence/presence-projection.js';
import type { HistoryEntry, HistoryQuery } from '../../projections/history/history-entry.js';
import { resource } from './route-table.js';

export interface PresenceReader {
  members(q: MembersQuery): { members: PresenceMember[]; next?: string };
  history(q: HistoryQuery): Promise<HistoryEntry[]>;
  visibleUntil(): number;
}

const PRESENT = 1;

/** A current member as a PresenceMessage with action `present`. */
export const memberToWire = (m: PresenceMember, format: Format): Record<string, unknown> =>
  messageToWire({ ...m, action: PRESENT }, format);

const stringParam = (query: Record<string, unknown>, name: string): string | undefined => {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0) throw new ServiceError('invalidParameterValue', `${name} must be a non-empty string`);
  return v;
};

export async function channelPresenceRoutes(app: FastifyInstance, opts: { presence: PresenceReader }): Promise<void> {
  // spec: Retrieve current presence members
  resource(app, '/channels/:channelId/presence', {
    GET: {
      handler: async (request, reply) => {
        const { channel, credentials } = channelFor(request as FastifyRequest<{ Params: { channelId: string } }>, 'subscribe');
        const query = request.query as Record<string, unknown>;
        const clientId = stringParam(query, 'clientId');
        const connectionId = stringParam(query, 'connectionId');
        const limit = limitParam(query);
        const cursor = stringParam(query, 'cursor');
        const { members, next } = opts.presence.members({ appId: credentials.app.appId, channel, clientId, connectionId, limit, after: cursor });
        const base: LinkParams = { clientId, connectionId, limit };
        for (const k of ['format', 'callback', 'envelope', 'v']) if (typeof query[k] === 'string') base[k] = query[k] as string;
        const links: Record<string, string> = {
          first: relativeUrl('presence', base),
          current: relativeUrl('presence', { ...base, cursor }),
        };
        if (next !== undefined) links.next = relativeUrl('presence', { ...base, cursor: next });
        const format = request.ctx?.format ?? 'json';
        return sendResult(request, reply, 200, members.map((m) => memberToWire(m, format)), links);
      },
    },
  });

  // spec: Retrieve presence history
  resource(app, '/channels/:channelId/presence/history', {
    GET: {
      handler: async (request, reply) => {
        const { channel, credentials } = channelFor(request as FastifyRequest<{ Params: { channelId: string } }>, 'history');
        const query = request.query as Record<string, unknown>;
        const start = timeParam(query, 'start');
        const givenEnd = timeParam(query, 'end');
        const limit = limitParam(query);
        const direction = directionParam(query);
        const cursor = integerParam(query, 'cursor');
        if (start !== undefined && givenEnd !== undefined && start > givenEnd) {
          throw new ServiceError('invalidParameterValue', `start (${start}) is after end (${givenEnd})`);
        }
        const end = givenEnd ?? opts.presence.visibleUntil();
        const found = await opts.presence.history({ appId: credentials.app.appId, channel, start: start ?? 0, end, limit: limit + 1, direction, after: cursor });
        const page = found.slice(0, limit);
        const nextCursor = found.length > limit ? page[page.length - 1].serial : undefined;
        const format = request.ctx?.format ?? 'json';
        return sendResult(
          request,
          reply,
          200,
          page.map((e) => messageToWire(e.message, format)),
          pageLinks('history', query, { start, end, limit, direction }, cursor, nextCursor),
        );
      },
    },
  });
}
