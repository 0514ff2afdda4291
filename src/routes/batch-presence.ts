import type { FastifyInstance } from 'fastify';
import { ServiceError, type ErrorBody } from '../errors.js';
import { restChannelName } from '../channels/channel-qualifier.js';
import { permits } from '../auth/capability.js';
import { credentialsOf } from '../http/request-context.js';
import { sendError, sendResult } from '../http/reply.js';
import { toErrorBody } from '../http/error-body.js';
import { MAX_BATCH_CHANNELS } from './batch-publish.js';
import { memberToWire, type PresenceReader } from './channel-presence.js';
import { resource } from './route-table.js';
import type { Limits } from '../limits.js';

type PresenceOutcome = { channel: string; presence: Record<string, unknown>[] } | { channel: string; error: ErrorBody };

/**
 * The channel names of a batch presence request: `channel` (or `channels`), split by `separator`,
 * each once, at its first place (spec: a name repeated counts once). Each result carries a whole
 * member set: a name repeated a thousand times in one short query string answered its set a
 * thousand times (320 MB and the event loop held 4 s for a channel of 1,000 members).
 */
export function batchChannels(query: Record<string, unknown>): string[] {
  const raw = query.channel ?? query.channels;
  if (typeof raw !== 'string' || raw.length === 0) {
    throw new ServiceError('invalidParameterValue', 'channel must name one or more channels, separated by commas (or by separator)');
  }
  const separator = query.separator ?? ',';
  if (typeof separator !== 'string' || separator.length === 0 || separator.length > 8) {
    throw new ServiceError('invalidParameterValue', 'separator must be a string of 1 to 8 characters');
  }
  const names = [...new Set(raw.split(separator))];
  if (names.some((n) => n.length === 0)) throw new ServiceError('invalidParameterValue', 'channel holds an empty channel name');
  if (names.length > MAX_BATCH_CHANNELS) {
    throw new ServiceError('invalidParameterValue', `a batch may name at most ${MAX_BATCH_CHANNELS} distinct channels`);
  }
  return names;
}

/** GET /presence (spec: Batch presence): presence of many channels, read in parallel, in request order. */
export async function batchPresenceRoutes(app: FastifyInstance, opts: { presence: PresenceReader; limits: Pick<Limits, 'maxBatchPresenceMembers'> }): Promise<void> {
  resource(app, '/presence', {
    GET: {
      handler: async (request, reply) => {
        const credentials = credentialsOf(request);
        const names = batchChannels(request.query as Record<string, unknown>);
        const format = request.ctx?.format ?? 'json';
        await opts.presence.ownWrites();
        // The members the reply may still hold (each channel's set is whole, built at once).
        let room = opts.limits.maxBatchPresenceMembers;
        const results: PresenceOutcome[] = await Promise.all(
          names.map(async (name): Promise<PresenceOutcome> => {
            try {
              const channel = restChannelName(name);
              if (!permits(credentials.capability, channel, 'subscribe')) {
                throw new ServiceError('capabilityDenied', `the credentials lack the "subscribe" capability on channel "${channel}"`);
              }
              const { members } = opts.presence.members({ appId: credentials.app.appId, channel, limit: room + 1 });
              if (members.length > room) {
                throw new ServiceError(
                  'tooManyPresenceMembers',
                  `channel "${channel}" has more presence members than this batch can still answer (${opts.limits.maxBatchPresenceMembers} in all); read them page by page with GET /channels/<id>/presence`,
                );
              }
              room -= members.length;
              return { channel, presence: members.map((m) => memberToWire(m, format)) };
            } catch (err) {
              return { channel: name, error: toErrorBody(err) };
            }
          }),
        );
        if (request.ctx?.version.batchResults) {
          const failureCount = results.filter((r) => 'error' in r).length;
          return sendResult(request, reply, 200, { successCount: results.length - failureCount, failureCount, results });
        }
        if (results.every((r) => !('error' in r))) return sendResult(request, reply, 200, results);
        const error = new ServiceError('batchError', 'the batch includes errors; see batchResponse').toJSON();
        return sendError(request, reply, error, { batchResponse: results });
      },
    },
  });
}
