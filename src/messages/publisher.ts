import type { AppendBatcher, PendingRecord } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { channelKey, encodeEvent, type MessagesPublished } from '../log/events.js';
import { isAssignedId, type OutgoingMessage } from './message.js';
import { ServiceError } from '../errors.js';
import { systemClock, type Clock } from '../clock.js';

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

/** How long an appended client-supplied id is remembered here, for the history projection to have it. */
const RECENT_MS = 30_000;
/** Ids remembered so (about 150 bytes each); the oldest go first. */
const MAX_RECENT = 100_000;

/**
 * Appends one publish (to one channel) and resolves once it is durable. Messages whose id the
 * channel has just seen are repeats of an idempotent publish and are not appended again; the
 * history projection drops any repeat that still reaches the log.
 *
 * "Just seen" is the history projection's idempotency index, which has a message only once it
 * has consumed it. A repeat sent while the first is still being appended, or before the projection
 * has it (a realtime client re-sending a publish whose ACK was lost with its socket, resumed at
 * once), was appended twice and delivered twice live: ids being appended and appended in the last
 * 30 s are remembered here too, and a repeat waits for the first's outcome.
 */
export class Publisher {
  /** `channelKey\0id` → the first append's outcome while it runs (true: appended), then when it was appended. */
  private readonly recent = new Map<string, Promise<boolean> | number>();

  constructor(
    private readonly batcher: AppendBatcher,
    private readonly recentlySeen: (appId: string, channel: string, id: string) => boolean,
    private readonly clock: Clock = systemClock,
  ) {}

  async publish(appId: string, channel: string, messages: OutgoingMessage[], transport: 'rest' | 'realtime' = 'rest'): Promise<PublishResult> {
    const clientIds = messages.some((m) => !isAssignedId(m.id));
    if (!clientIds) {
      await this.append(appId, channel, transport, messages, false);
      return { appended: messages.map((m) => m.id) };
    }
    const fresh = await this.notRepeated(appId, channel, messages);
    if (fresh.length === 0) return { appended: [] };
    let appended!: (ok: boolean) => void;
    const outcome = new Promise<boolean>((resolve) => (appended = resolve));
    const keys = fresh.filter((m) => !isAssignedId(m.id)).map((m) => recentKey(appId, channel, m.id));
    for (const key of keys) this.remember(key, outcome);
    try {
      await this.append(appId, channel, transport, fresh, true);
    } catch (err) {
      for (const key of keys) if (this.recent.get(key) === outcome) this.recent.delete(key);
      appended(false);
      throw err;
    }
    const now = this.clock.now();
    for (const key of keys) if (this.recent.get(key) === outcome) this.remember(key, now);
    appended(true);
    return { appended: fresh.map((m) => m.id) };
  }

  private async append(appId: string, channel: string, transport: 'rest' | 'realtime', messages: OutgoingMessage[], clientIds: boolean): Promise<void> {
    try {
      await this.batcher.append(Topics.messages, [new PublishRecord(appId, channel, transport, messages, clientIds)]);
    } catch (err) {
      if (err instanceof ServiceError) throw err;
      // Nothing was acknowledged: the client may retry, and the same ids keep it idempotent.
      // The log's own error (a broker's address, a file's path) goes to the service log, not to the client.
      throw new ServiceError('unavailable', 'the log did not acknowledge the publish; retry', err);
    }
  }

  /** The messages that are not repeats: assigned ids, and client ids neither remembered here nor seen by history. */
  private async notRepeated(appId: string, channel: string, messages: OutgoingMessage[]): Promise<OutgoingMessage[]> {
    const fresh: OutgoingMessage[] = [];
    const now = this.clock.now();
    for (const m of messages) {
      if (isAssignedId(m.id)) {
        fresh.push(m);
        continue;
      }
      const earlier = this.recent.get(recentKey(appId, channel, m.id));
      if (typeof earlier === 'number' && now - earlier <= RECENT_MS) continue;
      if (earlier instanceof Promise && (await earlier)) continue;
      if (!this.recentlySeen(appId, channel, m.id)) fresh.push(m);
    }
    return fresh;
  }

  private remember(key: string, value: Promise<boolean> | number): void {
    this.recent.delete(key);
    this.recent.set(key, value);
    // Oldest first: past the window, or over the count.
    const now = this.clock.now();
    for (const [k, v] of this.recent) {
      if (this.recent.size <= MAX_RECENT && (typeof v !== 'number' || now - v <= RECENT_MS)) break;
      this.recent.delete(k);
    }
  }
}

const recentKey = (appId: string, channel: string, id: string): string => `${channelKey(appId, channel)}\u0000${id}`;
