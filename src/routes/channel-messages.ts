import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { restChannelName } from '../channels/channel-qualifier.js';
import type { Operation } from '../auth/capability.js';
import { checkAllowedOn } from '../auth/channel-access.js';
import { credentialsOf } from '../http/request-context.js';
import { sendResult } from '../http/reply.js';
import { directionParam, integerParam, limitParam, timeParam } from '../http/query-params.js';
import { keptParams, relativeUrl, type LinkParams } from '../http/pagination.js';
import { parsePublishBody, type PublishingConnection, type PublishLimits } from '../messages/message.js';
import type { StoredMessage } from '../domain/message.js';
import { messageToWire } from '../codec/message-wire.js';
import type { Publisher } from '../messages/publisher.js';
import type { Credentials } from '../auth/credentials.js';
import { parseChannelSerial } from '../channels/channel-serial.js';
import { serialOf, type HistoryEntry, type HistoryQuery } from '../../projections/history/history-entry.js';
import { resource } from './route-table.js';

export interface HistoryReader {
  query(q: HistoryQuery): Promise<HistoryEntry[]>;
  /** Resolved `end` of a query that gives none: the newest instant history is complete up to. */
  visibleUntil(): number;
  /**
   * Resolves once what query() reads includes every write this instance acknowledged (README:
   * Consistency of reads); rejects with 50003 past the limit.
   */
  ownWrites(): Promise<void>;
}

export interface ChannelMessagesOptions {
  publisher: Publisher;
  history: HistoryReader;
  limits: PublishLimits;
  /** The realtime connection a connectionKey names, in an app (the realtime gateway). */
  connectionOf?: (appId: string, connectionKey: string) => PublishingConnection | undefined;
  /** Told of every history page served (messages read count as outbound, spec quota rules). */
  onHistoryRead?: (appId: string, channel: string, messages: StoredMessage[]) => void;
}

interface ChannelParams {
  channelId: string;
}

/** The channel named in the path, checked, with the operation the credentials must allow on it. */
export function channelFor(request: FastifyRequest<{ Params: ChannelParams }>, operation: Operation): { channel: string; credentials: Credentials } {
  const channel = restChannelName(request.params.channelId);
  const credentials = credentialsOf(request);
  checkAllowedOn(credentials.capability, channel, operation);
  return { channel, credentials };
}

/** Paging for time-ordered results (spec: Pagination): first (times resolved), current, next. */
export function pageLinks(
  resourceName: string,
  query: Record<string, unknown>,
  resolved: LinkParams,
  cursor: number | undefined,
  nextCursor: number | undefined,
): Record<string, string> {
  const base: LinkParams = { ...resolved, ...keptParams(query) };
  const links: Record<string, string> = {
    first: relativeUrl(resourceName, base),
    current: relativeUrl(resourceName, { ...base, cursor }),
  };
  if (nextCursor !== undefined) links.next = relativeUrl(resourceName, { ...base, cursor: nextCursor });
  return links;
}

/**
 * One page of a channel's history (spec: Retrieve message history; presence history follows the
 * same rules): parameters checked, `end` resolved when absent, one extra entry read to know
 * whether there is a next page, and the Link relations.
 */
export async function historyPage(
  query: Record<string, unknown>,
  resourceName: string,
  appId: string,
  channel: string,
  reader: HistoryReader,
): Promise<{ page: HistoryEntry[]; links: Record<string, string> }> {
  const start = timeParam(query, 'start');
  const givenEnd = timeParam(query, 'end');
  const limit = limitParam(query);
  const direction = directionParam(query);
  const cursor = integerParam(query, 'cursor');
  if (start !== undefined && givenEnd !== undefined && start > givenEnd) {
    throw new ServiceError('invalidParameterValue', `start (${start}) is after end (${givenEnd})`);
  }
  // `from_serial` (the SDK's history({untilAttach: true}) sends the channelSerial its ATTACHED
  // carried, `partition:offset`): only what was in the channel before that position.
  const fromSerial = query.from_serial;
  let after = cursor;
  if (fromSerial !== undefined) {
    const at = typeof fromSerial === 'string' ? parseChannelSerial(fromSerial) : undefined;
    if (!at) throw new ServiceError('invalidParameterValue', 'from_serial must be a channelSerial of an ATTACHED, partition:offset');
    if (direction !== 'backwards') throw new ServiceError('invalidParameterValue', 'from_serial needs direction=backwards');
    const bound = serialOf(at.offset, 0);
    after = after === undefined ? bound : Math.min(after, bound);
  }
  // Before `end` is resolved: it must not fall before a write the caller was just told of.
  await reader.ownWrites();
  const end = givenEnd ?? reader.visibleUntil();
  const found = await reader.query({ appId, channel, start: start ?? 0, end, limit: limit + 1, direction, after });
  const page = found.slice(0, limit);
  const nextCursor = found.length > limit ? page[page.length - 1].serial : undefined;
  const linked: LinkParams = { start, end, limit, direction };
  if (typeof fromSerial === 'string') linked.from_serial = fromSerial;
  return { page, links: pageLinks(resourceName, query, linked, cursor, nextCursor) };
}

export async function channelMessagesRoutes(app: FastifyInstance, opts: ChannelMessagesOptions): Promise<void> {
  resource(app, '/channels/:channelId/messages', {
    // spec: Publish messages to a channel
    POST: {
      // The spec's Message fields that a form can carry (text values only).
      options: { config: { formFields: ['name', 'data', 'encoding', 'clientId', 'connectionKey', 'id'] } },
      handler: async (request, reply) => {
        const { channel, credentials } = channelFor(request as FastifyRequest<{ Params: ChannelParams }>, 'publish');
        const appId = credentials.app.appId;
        const connectionOf = opts.connectionOf && ((key: string) => opts.connectionOf!(appId, key));
        const messages = parsePublishBody(request.body, opts.limits, credentials, connectionOf);
        await opts.publisher.publish(credentials.app.appId, channel, messages, 'rest', credentials.keyName);
        if (!request.ctx?.version.modern) return sendResult(request, reply, 201, undefined);
        const ids = messages.map((m) => m.id);
        return sendResult(request, reply, 201, { channel, messageId: ids[0]?.split(':')[0], serials: ids });
      },
    },
    // spec: Retrieve message history
    GET: {
      handler: async (request, reply) => {
        const { channel, credentials } = channelFor(request as FastifyRequest<{ Params: ChannelParams }>, 'history');
        const { page, links } = await historyPage(request.query as Record<string, unknown>, 'messages', credentials.app.appId, channel, opts.history);
        const format = request.ctx?.format ?? 'json';
        opts.onHistoryRead?.(credentials.app.appId, channel, page.map((e) => e.message));
        return sendResult(request, reply, 200, page.map((e) => messageToWire(e.message, format)), links);
      },
    },
  });
}
