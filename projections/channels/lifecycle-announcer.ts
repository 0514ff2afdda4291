import type { Logger } from 'pino';
import type { Clock } from '../../src/clock.js';
import type { PublishTransport, StoredMessage } from '../../src/domain/message.js';
import type { ChannelsProjection } from './channels-projection.js';
import type { Announcement } from './channel-state.js';
import { LIFECYCLE_CHANNEL } from '../../src/domain/channel.js';

export interface LifecycleAnnouncerOptions {
  projection: ChannelsProjection;
  /** Appends the events like any publish (src/messages/publisher.ts): history, delivery and the idempotent window see them. */
  publisher: { publish(appId: string, channel: string, messages: StoredMessage[], transport: PublishTransport): Promise<unknown> };
  clock: Clock;
  logger: Logger;
  /** How often due lifecycle events are looked for (and idle channels swept). */
  intervalMs?: number;
  /** Whether this instance is the one that appends them (default: always). */
  leads?: () => boolean;
}

const CHUNK = 200;

/**
 * Appends the lifecycle events the channels projection finds due as messages on
 * `[meta]channel.lifecycle`, through the publisher like any publish (history, realtime delivery
 * and stats see them; their ids make repeats drop). Start it once the projection has caught up.
 */
export class LifecycleAnnouncer {
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly options: LifecycleAnnouncerOptions) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), this.options.intervalMs ?? 250);
    this.timer.unref();
  }

  /** Announces what is due now; resolves once it is appended (or has failed and is due again). */
  tick(): Promise<void> {
    const now = this.options.clock.now();
    const due = this.options.projection.announce(now);
    if (this.options.leads && !this.options.leads()) {
      // Another instance appends them: they stay due here until its messages are read back.
      if (due.length > 0) this.options.projection.failed(due, now);
      return Promise.resolve();
    }
    // One publish per app and chunk: one log record each, well under Kafka's record size.
    const chunks = new Map<string, Announcement[][]>();
    for (const a of due) {
      let list = chunks.get(a.appId);
      if (!list) chunks.set(a.appId, (list = [[]]));
      if (list[list.length - 1].length === CHUNK) list.push([]);
      list[list.length - 1].push(a);
    }
    const appends = [...chunks].flatMap(([appId, list]) => list.map((announcements) => [appId, announcements] as const)).map(([appId, announcements]) => {
      const append = this.options.publisher
        .publish(appId, LIFECYCLE_CHANNEL, announcements.map((a) => a.message), 'service')
        .then(
          () => undefined,
          (err) => {
            this.options.logger.warn({ err, appId }, 'channel lifecycle events not appended; tried again');
            this.options.projection.failed(announcements, this.options.clock.now());
          },
        )
        .finally(() => this.inFlight.delete(append));
      this.inFlight.add(append);
      return append;
    });
    return Promise.all(appends).then(() => undefined);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.inFlight);
  }
}
