import type { FastifyInstance } from 'fastify';
import { ServiceError, type ErrorBody } from '../errors.js';
import { restChannelName } from '../channels/channel-qualifier.js';
import { isMetachannel } from '../domain/channel.js';
import { permits } from '../auth/capability.js';
import { credentialsOf } from '../http/request-context.js';
import { sendError, sendResult } from '../http/reply.js';
import { copyForChannel, parsePublishBody, publishSize, type OutgoingMessage, type PublishLimits } from '../messages/message.js';
import type { Publisher } from '../messages/publisher.js';
import type { Credentials } from '../auth/credentials.js';
import type { Limits } from '../limits.js';
import { toErrorBody } from '../http/error-body.js';
import { resource } from './route-table.js';

export const MAX_BATCH_CHANNELS = 100;

/** Publishes started before the handler lets the event loop serve other requests (a /time, say). */
const MESSAGES_PER_TURN = 500;

export type BatchLimits = PublishLimits & Pick<Limits, 'maxBatchMessages' | 'maxBatchBytes'>;

interface BatchSpec {
  channels: string[];
  messages: unknown;
}

type PublishOutcome = { channel: string; messageId: string; serials: string[] } | { channel: string; error: ErrorBody };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads BatchSpecs (spec: BatchSpec); anything malformed, and a batch over the limits (100
 * distinct channels, maxBatchMessages messages counted once per channel), fails the whole request
 * before any publish.
 */
export function parseBatchSpecs(body: unknown, limits: Pick<Limits, 'maxBatchMessages'>): BatchSpec[] {
  const raw = Array.isArray(body) ? body : [body];
  if (raw.length === 0 || body === undefined || body === null) {
    throw new ServiceError('invalidRequestBody', 'the body must be a BatchSpec or an array of BatchSpecs');
  }
  let messages = 0;
  const specs = raw.map((spec, i) => {
    if (!isObject(spec)) throw new ServiceError('invalidRequestBody', `batch spec ${i} is not an object`);
    const channels = typeof spec.channels === 'string' ? [spec.channels] : spec.channels;
    if (!Array.isArray(channels) || channels.length === 0 || channels.some((c) => typeof c !== 'string')) {
      throw new ServiceError('invalidRequestBody', `batch spec ${i}: channels must be a channel name or an array of them`);
    }
    if (spec.messages === undefined || spec.messages === null) {
      throw new ServiceError('invalidRequestBody', `batch spec ${i}: messages must be a Message or an array of Messages`);
    }
    // A spec with no messages (an empty array) counts one a channel: each of its channels still
    // gets an outcome. Counted as none, 400,000 channel names in a 1.6 MB body answered 52 MB of
    // failures and held the event loop 0.7 s to write them.
    messages += Math.max(1, Array.isArray(spec.messages) ? spec.messages.length : 1) * channels.length;
    if (messages > limits.maxBatchMessages) {
      throw new ServiceError(
        'tooManyMessages',
        `a batch may publish at most ${limits.maxBatchMessages} messages (a message counts once per channel it goes to, a spec without messages once per channel); this one has more`,
      );
    }
    return { channels: channels as string[], messages: spec.messages };
  });
  const distinct = new Set(specs.flatMap((s) => s.channels));
  if (distinct.size > MAX_BATCH_CHANNELS) {
    throw new ServiceError('invalidRequestBody', `a batch may name at most ${MAX_BATCH_CHANNELS} distinct channels; this one names ${distinct.size}`);
  }
  return specs;
}

/** A spec's messages, validated once for all its channels (they depend on the credentials only). */
type ParsedSpec = { channels: string[]; messages: OutgoingMessage[] } | { channels: string[]; error: unknown };

function parseSpecs(specs: BatchSpec[], credentials: Credentials, limits: BatchLimits): ParsedSpec[] {
  let bytes = 0;
  const parsed = specs.map((spec): ParsedSpec => {
    try {
      const messages = parsePublishBody(spec.messages, limits, credentials);
      bytes += publishSize(messages) * spec.channels.length;
      return { channels: spec.channels, messages };
    } catch (error) {
      return { channels: spec.channels, error };
    }
  });
  if (bytes > limits.maxBatchBytes) {
    throw new ServiceError('messageTooLarge', `a batch may publish at most ${limits.maxBatchBytes} bytes of messages (counted once per channel); this one has ${bytes}`);
  }
  return parsed;
}

async function publishOne(publisher: Publisher, credentials: Credentials, channelName: string, spec: ParsedSpec, first: boolean): Promise<PublishOutcome> {
  try {
    const channel = restChannelName(channelName);
    if (isMetachannel(channel)) throw new ServiceError('capabilityDenied', `publishing is never possible on a metachannel ("${channel}")`);
    if (!permits(credentials.capability, channel, 'publish')) {
      throw new ServiceError('capabilityDenied', `the credentials lack the "publish" capability on channel "${channel}"`);
    }
    if ('error' in spec) throw spec.error;
    const messages = first ? spec.messages : copyForChannel(spec.messages);
    await publisher.publish(credentials.app.appId, channel, messages, 'batch', credentials.keyName);
    const serials = messages.map((m) => m.id);
    return { channel, messageId: serials[0].split(':')[0], serials };
  } catch (err) {
    return { channel: channelName, error: toErrorBody(err) };
  }
}

/**
 * Starts every publish of the batch, in request order, letting the event loop serve other requests
 * between groups of MESSAGES_PER_TURN messages: a large legal batch does not stall the service.
 */
async function publishAll(publisher: Publisher, credentials: Credentials, specs: ParsedSpec[]): Promise<PublishOutcome[][]> {
  const started: Promise<PublishOutcome>[][] = [];
  let sinceYield = 0;
  for (const spec of specs) {
    const outcomes: Promise<PublishOutcome>[] = [];
    started.push(outcomes);
    for (let i = 0; i < spec.channels.length; i++) {
      outcomes.push(publishOne(publisher, credentials, spec.channels[i], spec, i === 0));
      sinceYield += 'messages' in spec ? spec.messages.length : 1;
      if (sinceYield >= MESSAGES_PER_TURN) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }
  return Promise.all(started.map((outcomes) => Promise.all(outcomes)));
}

/**
 * POST /messages (spec: Bulk publish): one publish per channel and message set, all in parallel,
 * each succeeding or failing on its own. The spec's outcomes (201 / error / 400 with 40020 and
 * batchResponse), up to protocol 2; from protocol 3, one `{successCount, failureCount, results}` per spec.
 */
export async function batchPublishRoutes(app: FastifyInstance, opts: { publisher: Publisher; limits: BatchLimits }): Promise<void> {
  resource(app, '/messages', {
    POST: {
      handler: async (request, reply) => {
        const credentials = credentialsOf(request);
        const specs = parseSpecs(parseBatchSpecs(request.body, opts.limits), credentials, opts.limits);
        const perSpec = await publishAll(opts.publisher, credentials, specs);
        if (request.ctx?.version.batchResults) {
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
