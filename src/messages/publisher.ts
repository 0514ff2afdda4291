import type { AppendBatcher, PendingRecord } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { channelKey, encodeEvent, type MessagesPublished } from '../log/events.js';
import { isAssignedId, type OutgoingMessage } from './message.js';
import { ServiceError } from '../errors.js';

export interface PublishResult {
  /** ids of messages that were appended; repeats of idempotent publishes are left out */
  appended: string[];
}

/** One publish as a record for the batcher: its event is built once the timestamp is known. */
class PublishRecord implements PendingRecord {
  readonly key: string;

  constructor(
    private readonly appId: string,
    private readonly channel: string,
    private readonly transport: 'rest' | 'realtime',
    private readonly messages: OutgoingMessage[],
    private readonly clientIds: boolean,
  ) {
    this.key = channelKey(appId, channel);
  }

  build(timestamp: number): Uint8Array {
    // The messages are this publish's own objects: they get their timestamp in place.
    for (const m of this.messages) m.timestamp = timestamp;
    const { appId, channel, transport, messages } = this;
    const event: MessagesPublished = { type: 'messages.published', appId, channel, transport, messages };
    if (this.clientIds) event.clientIds = true;
    try {
      return encodeEvent(event);
    } catch (err) {
      // The messages were validated, so this should not happen; if it does, it is this publish's
      // own fault, and it fails alone (AppendBatcher), with a 4xx that SDKs do not retry.
      throw new ServiceError('invalidDataOrEncoding', `the messages could not be encoded for the log (${(err as Error).message})`);
    }
  }
}

/**
 * Appends one publish (to one channel) to the `messages` topic and resolves once it is durable.
 * Messages whose id the channel has just seen are repeats of an idempotent publish and are not
 * appended again; the history projection drops any repeat that still reaches the log.
 */
export class Publisher {
  constructor(
    private readonly batcher: AppendBatcher,
    private readonly recentlySeen: (appId: string, channel: string, id: string) => boolean,
  ) {}

  async publish(appId: string, channel: string, messages: OutgoingMessage[], transport: 'rest' | 'realtime' = 'rest'): Promise<PublishResult> {
    const fresh = messages.filter((m) => isAssignedId(m.id) || !this.recentlySeen(appId, channel, m.id));
    if (fresh.length === 0) return { appended: [] };
    const clientIds = fresh.some((m) => !isAssignedId(m.id));
    try {
      await this.batcher.append(Topics.messages, [new PublishRecord(appId, channel, transport, fresh, clientIds)]);
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      // Nothing was acknowledged: the client may retry, and the same ids keep it idempotent.
      // The log's own error (a broker's address, a file's path) goes to the service log, not to the client.
      throw new ServiceError('unavailable', 'the log did not acknowledge the publish; retry', err);
    }
    return { appended: fresh.map((m) => m.id) };
  }
}
