import type { AppendBatcher, PendingRecord } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { channelKey } from '../log/partitioner.js';
import { encodeEvent } from '../log/event-codec.js';
import type { MessagesPublished } from '../domain/events.js';
import { isAssignedId, type OutgoingMessage } from './message.js';
import type { PublishTransport } from '../domain/message.js';
import { appendFailure, ServiceError } from '../errors.js';
import { systemClock, type Clock } from '../clock.js';
import { DEFAULT_LIMITS, type Limits } from '../limits.js';
import { pairDigest, RecentKeys } from '../recent-keys.js';

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
    private readonly keyName: string | undefined,
  ) {
    this.key = channelKey(appId, channel);
  }

  build(timestamp: number): Uint8Array {
    // The messages are this publish's own objects: they get their timestamp in place.
    for (const m of this.messages) m.timestamp = timestamp;
    const { appId, channel, transport, messages } = this;
    // The messages last (event-codec.ts's layout: the audit replay copies what comes before them whole).
    const event = { type: 'messages.published', appId, channel, transport } as MessagesPublished;
    if (this.clientIds) event.clientIds = true;
    if (this.keyName !== undefined) event.keyName = this.keyName;
    event.messages = messages;
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
 * Appends one publish (to one channel) and resolves once it is durable. Messages whose id the
 * channel has just seen are repeats of an idempotent publish and are not appended again; the
 * history projection drops any repeat that still reaches the log.
 *
 * "Just seen" is the history projection's idempotency index, which has a message only once it
 * has consumed it. A repeat sent while the first is still being appended, or before the projection
 * has it (a realtime client re-sending a publish whose ACK was lost with its socket, resumed at
 * once), was appended twice and delivered twice live: ids being appended and appended lately are
 * remembered here too (limits: recentIdsWindowMs, maxRecentIdsPerApp), and a repeat waits for the
 * first's outcome. Each app has its own memory of them, so one app's ids never push out another's.
 */
export class Publisher {
  /** Per app: digest(channel, id) → the first append's outcome while it runs (true: appended), then when it was appended. */
  private readonly recent = new Map<string, RecentKeys<Promise<boolean> | number>>();

  constructor(
    private readonly batcher: AppendBatcher,
    private readonly recentlySeen: (appId: string, channel: string, id: string) => boolean,
    private readonly clock: Clock = systemClock,
    private readonly limits: Pick<Limits, 'recentIdsWindowMs' | 'maxRecentIdsPerApp'> = DEFAULT_LIMITS,
    /** Messages appended by how they came in (GET /metrics: cm_messages_published_total). */
    private readonly published: Record<PublishTransport, number> = { rest: 0, realtime: 0, batch: 0, service: 0 },
    /** Throws when the publish may not begin its channel (src/channels/channel-admission.ts); the service's own publishes are not asked. */
    private readonly admit: (appId: string, channel: string) => void = () => undefined,
  ) {}

  /** `batch`: one channel of a batch publish, a REST request for the stats (spec: Bulk publish); `service`: the service's own. */
  /** `keyName`: the key of the credentials that published (kept on the log for audits). */
  async publish(appId: string, channel: string, messages: OutgoingMessage[], transport: PublishTransport = 'rest', keyName?: string): Promise<PublishResult> {
    if (transport !== 'service') this.admit(appId, channel);
    if (allAssigned(messages)) {
      // The common case (every id the service's own), appended here rather than through append():
      // one async function per publish fewer (its promise and its await), same outcome.
      try {
        await this.batcher.append(Topics.messages, [new PublishRecord(appId, channel, transport === 'realtime' ? 'realtime' : 'rest', messages, false, keyName)]);
      } catch (err) {
        throw unavailable(err);
      }
      this.published[transport] += messages.length;
      return { appended: messages.map((m) => m.id) };
    }
    let appended!: (ok: boolean) => void;
    const outcome = new Promise<boolean>((resolve) => (appended = resolve));
    const { fresh, claimed } = await this.claim(appId, channel, messages, outcome);
    if (fresh.length === 0) {
      appended(false);
      return { appended: [] };
    }
    const recent = this.recentOf(appId);
    try {
      await this.append(appId, channel, transport, fresh, true, keyName);
    } catch (err) {
      for (const key of claimed) if (recent.get(key) === outcome) recent.delete(key);
      appended(false);
      throw err;
    }
    const now = this.clock.now();
    for (const key of claimed) if (recent.get(key) === outcome) recent.set(key, now);
    appended(true);
    return { appended: fresh.map((m) => m.id) };
  }

  /**
   * The messages that are not repeats (assigned ids, and client ids neither remembered here nor
   * seen by history), each client id claimed with `outcome` right after its last check, with no
   * await between the two: of several repeats waiting on a first append that failed, one claims it.
   */
  private async claim(appId: string, channel: string, messages: OutgoingMessage[], outcome: Promise<boolean>): Promise<{ fresh: OutgoingMessage[]; claimed: string[] }> {
    const recent = this.recentOf(appId);
    const fresh: OutgoingMessage[] = [];
    const claimed: string[] = [];
    for (const m of messages) {
      if (isAssignedId(m.id)) {
        fresh.push(m);
        continue;
      }
      const key = pairDigest(channel, m.id);
      let repeat = false;
      for (;;) {
        const earlier = recent.get(key);
        if (earlier === outcome) repeat = true; // the same id twice in this publish
        else if (typeof earlier === 'number') repeat = this.clock.now() - earlier <= this.limits.recentIdsWindowMs;
        else if (earlier instanceof Promise) {
          if (await earlier) repeat = true;
          else continue; // the first failed: look again, another may have claimed it meanwhile
        }
        break;
      }
      if (repeat || this.recentlySeen(appId, channel, m.id)) continue;
      recent.set(key, outcome);
      claimed.push(key);
      fresh.push(m);
    }
    return { fresh, claimed };
  }

  private recentOf(appId: string): RecentKeys<Promise<boolean> | number> {
    let recent = this.recent.get(appId);
    if (!recent) this.recent.set(appId, (recent = new RecentKeys(this.limits.maxRecentIdsPerApp, this.limits.recentIdsWindowMs, () => this.clock.now())));
    return recent;
  }

  private async append(appId: string, channel: string, transport: PublishTransport, messages: OutgoingMessage[], clientIds: boolean, keyName: string | undefined): Promise<void> {
    try {
      await this.batcher.append(Topics.messages, [new PublishRecord(appId, channel, transport === 'realtime' ? 'realtime' : 'rest', messages, clientIds, keyName)]);
      this.published[transport] += messages.length;
    } catch (err) {
      throw unavailable(err);
    }
  }
}

/** Whether every message has an id the service assigned (none of them a client's, for idempotency). */
function allAssigned(messages: OutgoingMessage[]): boolean {
  for (let i = 0; i < messages.length; i++) if (!isAssignedId(messages[i].id)) return false;
  return true;
}

/** A failed append as the publisher's caller sees it: the record's own ServiceError, or unavailable (the log's error kept as the cause). */
function unavailable(err: unknown): ServiceError {
  // Nothing was acknowledged: the client may retry, and the same ids keep it idempotent.
  return appendFailure(err, 'the log did not acknowledge the publish; retry');
}
