import type { FastifyInstance } from 'fastify';
import { ServiceError, type ErrorBody } from '../errors.js';
import { checkChannelName, isMetachannel } from '../channels/channel-name.js';
import { permits } from '../auth/capability.js';
import { credentialsOf } from '../http/request-context.js';
import { sendError, sendResult } from '../http/reply.js';
import { parsePublishBody, type PublishLimits } from '../messages/message.js';
import type { Publisher } from '../messages/publisher.js';
import type { Credentials } from '../auth/credentials.js';
import { toErrorBody } from '../http/error-body.js';
import { resource } from './route-table.js';

export const MAX_BATCH_CHANNELS = 100;

interface BatchSpec {
  channels: string[];
  messages: unknown;
}

type PublishOutcome = { channel: string; messageId: string; serials: string[] } | { channel: string; error: ErrorBody };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads BatchSpecs (spec: BatchSpec); anything malformed fails the whole request before any publish. */
export function parseBatchSpecs(body: unknown): BatchSpec[] {
  const raw = Array.isArray(body) ? body : [body];
  if (raw.length === 0 || body === undefined || body === null) {
    throw new ServiceError('invalidRequestBody', 'the body must be a BatchSpec or an array of BatchSpecs');
  }
  const specs = raw.map((spec, i) => {
    if (!isObject(spec)) throw new ServiceError('invalidRequestBody', `batch spec ${i} is not an object`);
    const channels = typeof spec.channels === 'string' ? [spec.channels] : spec.channels;
    if (!Array.isArray(channels) || channels.length === 0 || channels.some((c) => typeof c !== 'string')) {
      throw new ServiceError('invalidRequestBody', `batch spec ${i}: channels must be a channel name or an array of them`);
    }
    if (spec.messages === undefined || spec.messages === null) {
      throw new ServiceError('invalidRequestBody', `batch spec ${i}: messages must be a Message or an array of Messages`);
    }
    return { channels: channels as string[], messages: spec.messages };
  });
  const distinct = new Set(specs.flatMap((s) => s.channels));
  if (distinct.size > MAX_BATCH_CHANNELS) {
    throw new ServiceError('invalidRequestBody', `a batch may name at most ${MAX_BATCH_CHANNELS} distinct channels; this one names ${distinct.size}`);
  }
  return specs;
}

async function publishOne(
  publisher: Publisher,
  credentials: Credentials,
  channelName: string,
  messages: unknown,
  limits: PublishLimits,
): Promise<PublishOutcome> {
  try {
    const channel = checkChannelName(channelName);
    if (isMetachannel(channel)) throw new ServiceError('capabilityDenied', `publishing is never possible on a metachannel ("${channel}")`);
    if (!permits(credentials.capability, channel, 'publish')) {
      throw new ServiceError('capabilityDenied', `the credentials lack the "publish" capability on channel "${channel}"`);
    }
    const parsed = parsePublishBody(messages, limits, credentials.clientId);
    await publisher.publish(credentials.app.appId, channel, parsed);
    const serials = parsed.map((m) => m.id);
    return { channel, messageId: serials[0].split(':')[0], serials };
  } catch (err) {
    return { channel: channelName, error: toErrorBody(err) };
  }
}

/**
 * POST /messages (spec: Bulk publish): one publish per channel and message set, all in parallel,
 * each succeeding or failing on its own. The spec's outcomes (201 / error / 400 with 40020 and
 * batchResponse); for protocol 2 and later, one `{successCount, failureCount, results}` per spec.
 */
export async function batchPublishRoutes(app: FastifyInstance, opts: { publisher: Publisher; limits: PublishLimits }): Promise<void> {
  resource(app, '/messages', {
    POST: {
      handler: async (request, reply) => {
        const credentials = credentialsOf(request);
        const specs = parseBatchSpecs(request.body);
        const perSpec = await Promise.all(
          specs.map((spec) => Promise.all(spec.channels.map((c) => publishOne(opts.publisher, credentials, c, spec.messages, opts.limits)))),
        );
        if (request.ctx?.version.modern) {
          const results = perSpec.map((results) => {
            const failureCount = results.filter((r) => 'error' in r).length;
            return { successCount: results.length - failureCount, failureCount, results };
          });
          return sendResult(request, reply, 201, Array.isArray(request.body) ? results : results[0]);
        }
        const flat = perSpec.flat().map((r) => ('error' in r ? r : { channel: r.channel, messageId: r.messageId }));
        if (flat.every((r) => !('error' in r))) return sendResult(request, reply, 201, flat);
        const error = new ServiceError('batchError', 'the batch includes errors; see batchResponse').toJSON();
        return sendError(request, reply, error, { batchResponse: flat });
      },
    },
  });
}
