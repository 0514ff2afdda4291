import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { StoredMessage } from '../domain/message.js';
import type { Attachment } from './attachment.js';
import type { OccupancyCategory } from './channel-params.js';

// In-band occupancy (REALTIME-PROTOCOL.md §9): an attachment that asked for the `occupancy` param
// receives `[meta]occupancy` messages, `data: {metrics: {...}}`, as its channel's occupancy
// changes. The figures are the channels projection's (projections/channels: attachments and
// members as the log recorded them, every instance's), read when it reports a change, at most once
// per interval per channel (the platform debounces too): a channel with 10,000 subscribers
// attaching at once sends a few messages, not 10,000 to each.

/** The channels projection, as occupancy reads it. */
export interface OccupancySource {
  metrics(appId: string, channel: string): Record<OccupancyCategory, number>;
  /** Calls `listener` with the channels whose occupancy changed, after each batch it applies. */
  onOccupancyChanged(listener: (changed: { appId: string; channel: string }[]) => void): () => void;
}

export interface InbandOccupancyDeps {
  source: OccupancySource;
  clock: Clock;
  logger: Logger;
  /** At most one message per channel this often (REALTIME_OCCUPANCY_INTERVAL_MS). */
  intervalMs: number;
  /** Sends the message to an attachment (Delivery.sendOccupancy). */
  send(attachment: Attachment, message: StoredMessage): void;
  instanceId: string;
}

interface Watched {
  appId: string;
  channel: string;
  attachments: Set<Attachment>;
  /** The figures last sent (JSON), and when. */
  last?: string;
  sentAt: number;
  timer?: NodeJS.Timeout;
}

export class InbandOccupancy {
  /** Channels with attachments here that asked for occupancy, by appId and channel. */
  private readonly watched = new Map<string, Watched>();
  private unsubscribe: (() => void) | undefined;
  private sequence = 0;

  constructor(private readonly deps: InbandOccupancyDeps) {}

  start(): void {
    this.unsubscribe = this.deps.source.onOccupancyChanged((changed) => {
      // Called inside the projection's apply: nothing thrown here may reach it.
      try {
        for (const { appId, channel } of changed) {
          const w = this.watched.get(keyOf(appId, channel));
          if (w) this.schedule(w);
        }
      } catch (err) {
        this.deps.logger.error({ err }, 'in-band occupancy failed on a change');
      }
    });
  }

  close(): void {
    this.unsubscribe?.();
    for (const w of this.watched.values()) clearTimeout(w.timer);
    this.watched.clear();
  }

  /** An attachment that asked for occupancy: it gets the current figures at once, then their changes. */
  attached(attachment: Attachment): void {
    const key = keyOf(attachment.conn.appId, attachment.base);
    let w = this.watched.get(key);
    if (!w) this.watched.set(key, (w = { appId: attachment.conn.appId, channel: attachment.base, attachments: new Set(), sentAt: 0 }));
    w.attachments.add(attachment);
    this.sendTo(attachment, this.deps.source.metrics(w.appId, w.channel));
  }

  detached(attachment: Attachment): void {
    const key = keyOf(attachment.conn.appId, attachment.base);
    const w = this.watched.get(key);
    if (!w?.attachments.delete(attachment) || w.attachments.size > 0) return;
    clearTimeout(w.timer);
    this.watched.delete(key);
  }

  private schedule(w: Watched): void {
    if (w.timer) return;
    const wait = w.sentAt + this.deps.intervalMs - this.deps.clock.now();
    if (wait <= 0) return this.flush(w);
    w.timer = setTimeout(() => this.flush(w), wait);
    w.timer.unref();
  }

  private flush(w: Watched): void {
    w.timer = undefined;
    if (this.watched.get(keyOf(w.appId, w.channel)) !== w) return;
    const metrics = this.deps.source.metrics(w.appId, w.channel);
    const figures = JSON.stringify(metrics);
    if (figures === w.last) return;
    w.last = figures;
    w.sentAt = this.deps.clock.now();
    for (const attachment of w.attachments) this.sendTo(attachment, metrics);
  }

  private sendTo(attachment: Attachment, metrics: Record<OccupancyCategory, number>): void {
    const category = attachment.occupancy?.category;
    const shown = category === undefined ? { ...metrics } : { [category]: metrics[category] };
    const message: StoredMessage = {
      id: `${this.deps.instanceId}-occupancy:${++this.sequence}:0`,
      timestamp: this.deps.clock.now(),
      name: '[meta]occupancy',
      data: { metrics: shown },
    };
    try {
      this.deps.send(attachment, message);
    } catch (err) {
      this.deps.logger.error({ err, channel: attachment.channel }, 'in-band occupancy not sent');
    }
  }
}

const keyOf = (appId: string, channel: string): string => `${appId}\u0000${channel}`;
