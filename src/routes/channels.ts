import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../errors.js';
import { sendResult } from '../http/reply.js';
import { limitParam } from '../http/query-params.js';
import { keptParams, relativeUrl, type LinkParams } from '../http/pagination.js';
import { credentialsOf } from '../http/request-context.js';
import { permitsAppWide, resourceCovers, type Capability } from '../auth/capability.js';
import { isMetachannel } from '../domain/channel.js';
import type { Clock } from '../clock.js';
import { channelFor } from './channel-messages.js';
import { resource } from './route-table.js';
import { ChannelsProjection } from '../../projections/channels/channels-projection.js';
import type { ChannelDetails } from '../../projections/channels/channel-state.js';

export interface ChannelsReader {
  details(appId: string, channel: string, now: number): ChannelDetails;
  list(appId: string, q: { prefix: string; after?: string; limit: number }, now: number): { channels: string[]; more: boolean };
  /** Activates the channel (spec: Channel activity) on this instance, writing nothing. */
  activate(appId: string, channel: string, now: number): void;
  /** Resolves once details() and list() include every write this instance acknowledged (README: Consistency of reads). */
  ownWrites(): Promise<void>;
}

const OPERATION = 'channel-metadata';

const optionalString = (query: Record<string, unknown>, name: string): string | undefined => {
  const v = query[name];
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalidParameterValue', `${name} must be given once, as a string`);
  return v;
};

/** spec: Channel enumeration: `channel-metadata` on `*`, or on a resource that covers the prefix. */
function mayEnumerate(cap: Capability, prefix: string | undefined): boolean {
  if (permitsAppWide(cap, OPERATION)) return true;
  if (prefix === undefined) return false;
  for (const [res, ops] of cap) {
    if ((ops.has(OPERATION) || ops.has('*')) && resourceCovers(res, `${prefix}*`)) return true;
  }
  return false;
}

export async function channelsRoutes(app: FastifyInstance, opts: { channels: ChannelsReader; clock: Clock }): Promise<void> {
  // spec: Channel status. The request activates the channel: in memory, on this instance (a read
  // must not grow the disk; README: Channels).
  resource(app, '/channels/:channelId', {
    GET: {
      handler: async (request, reply) => {
        const { channel, credentials } = channelFor(request as FastifyRequest<{ Params: { channelId: string } }>, OPERATION);
        const appId = credentials.app.appId;
        await opts.channels.ownWrites();
        const now = opts.clock.now();
        if (!isMetachannel(channel)) opts.channels.activate(appId, channel, now);
        return sendResult(request, reply, 200, opts.channels.details(appId, channel, now));
      },
    },
  });

  // spec: Channel enumeration
  resource(app, '/channels', {
    GET: {
      handler: async (request, reply) => {
        const query = request.query as Record<string, unknown>;
        const prefix = optionalString(query, 'prefix');
        const by = optionalString(query, 'by') ?? 'value';
        if (by !== 'id' && by !== 'value') throw new ServiceError('invalidParameterValue', 'by must be "id" or "value"');
        const limit = limitParam(query);
        const cursor = optionalString(query, 'cursor');
        const credentials = credentialsOf(request);
        if (!mayEnumerate(credentials.capability, prefix)) {
          throw new ServiceError(
            'capabilityDenied',
            prefix === undefined
              ? `listing channels needs the "${OPERATION}" capability on "*"`
              : `listing channels starting with "${prefix}" needs the "${OPERATION}" capability on "*" or on a resource covering "${prefix}*"`,
          );
        }
        const appId = credentials.app.appId;
        await opts.channels.ownWrites();
        const now = opts.clock.now();
        const { channels, more } = opts.channels.list(appId, { prefix: prefix ?? '', after: cursor, limit }, now);
        // `limit` always: a query of no parameters made `./channels?`, a link ably-js v2 does not
        // read (it wants ./<resource>?<params>), so its first() and current() had no page to go to.
        const base: LinkParams = { prefix, by: query.by === undefined ? undefined : by, limit, ...keptParams(query) };
        const links: Record<string, string> = { first: relativeUrl('channels', base), current: relativeUrl('channels', { ...base, cursor }) };
        if (more) links.next = relativeUrl('channels', { ...base, cursor: ChannelsProjection.cursorOf(channels[channels.length - 1]) });
        const body = by === 'id' ? channels : channels.map((c) => opts.channels.details(appId, c, now));
        return sendResult(request, reply, 200, body, links);
      },
    },
  });
}
