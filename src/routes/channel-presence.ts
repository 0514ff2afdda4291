import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { sendResult } from '../http/reply.js';
import { limitParam } from '../http/query-params.js';
import { keptParams, relativeUrl, type LinkParams } from '../http/pagination.js';
import { messageToWire } from '../codec/message-wire.js';
import type { Format } from '../http/format.js';
import { channelFor, historyPage } from './channel-messages.js';
import type { PresenceMember, MembersQuery } from '../../projections/presence/presence-projection.js';
import type { HistoryEntry, HistoryQuery } from '../../projections/history/history-entry.js';
import { resource } from './route-table.js';

export interface PresenceReader {
  members(q: MembersQuery): { members: PresenceMember[]; next?: string };
  history(q: HistoryQuery): Promise<HistoryEntry[]>;
  visibleUntil(): number;
  /** Resolves once members() and history() include every presence change this instance acknowledged (see HistoryReader). */
  ownWrites(): Promise<void>;
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
        await opts.presence.ownWrites();
        const { members, next } = opts.presence.members({ appId: credentials.app.appId, channel, clientId, connectionId, limit, after: cursor });
        const base: LinkParams = { clientId, connectionId, limit, ...keptParams(query) };
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
        const { page, links } = await historyPage(request.query as Record<string, unknown>, 'history', credentials.app.appId, channel, {
          query: (q) => opts.presence.history(q),
          visibleUntil: () => opts.presence.visibleUntil(),
          ownWrites: () => opts.presence.ownWrites(),
        });
        const format = request.ctx?.format ?? 'json';
        return sendResult(request, reply, 200, page.map((e) => messageToWire(e.message, format)), links);
      },
    },
  });
}
