import type { Logger } from 'pino';
import type { AppendBatcher } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { channelKey } from '../log/partitioner.js';
import { encodeEvent } from '../log/event-codec.js';
import { isMetachannel } from '../domain/channel.js';
import { intervalOf } from '../domain/stats-sample.js';
import type { Clock } from '../clock.js';

/**
 * Marks a channel that a realtime connection attached to as used, for the stats' `channels.*`
 * (issue 28: a channel that only had subscribers counts): a `channel.used` record on the
 * `messages` topic, keyed like the channel's publishes, so the stats projection counts it in the
 * same partition's sample as a publish and a channel both attached and published to counts once.
 * (The attachment's own `channel.attached` is on the `connections` topic, another partition.)
 *
 * One record per channel and 6-second sample interval of this instance's clock, at most: an
 * attachment that the connection's budget let through (src/realtime/connection-events.ts) marks
 * its channel unless another already did in this interval, so attach churn on one channel adds
 * one record per interval. A channel that stays attached is active in every sample it is attached
 * in: when the interval turns, `refresh` marks again each channel that still has an attachment
 * on this instance (one record per attached channel and interval; the attachments themselves are
 * bounded by the connection and attach limits). Metachannels are never active channels.
 */
export class ChannelUse {
  private interval = -Infinity;
  /** channelKey of the channels marked in `interval` (bounded by the attachments one interval lets through). */
  private readonly marked = new Set<string>();

  constructor(private readonly options: { batcher: AppendBatcher; clock: Clock; logger: Logger }) {}

  attached(appId: string, channel: string): void {
    if (isMetachannel(channel)) return;
    this.turn(intervalOf(this.options.clock.now()));
    const key = channelKey(appId, channel);
    if (this.marked.has(key)) return;
    this.marked.add(key);
    this.options.batcher
      .append(Topics.messages, [{ key, build: () => encodeEvent({ type: 'channel.used', appId, channel }) }])
      .catch((err) => this.options.logger.warn({ err, event: 'channel.used' }, 'channel use not appended: the stats may leave the channel out of this sample'));
  }

  /**
   * When a new interval has begun, marks each channel of `attachedNow` (this instance's attachments,
   * as appId and channel) in it; a no-op within the interval already marked.
   */
  refresh(attachedNow: () => Iterable<[appId: string, channel: string]>): void {
    const interval = intervalOf(this.options.clock.now());
    if (interval === this.interval) return;
    this.turn(interval);
    for (const [appId, channel] of attachedNow()) this.attached(appId, channel);
  }

  private turn(interval: number): void {
    if (interval === this.interval) return;
    this.interval = interval;
    this.marked.clear();
  }
}
