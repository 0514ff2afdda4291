import type { StoredMessage } from '../../src/domain/message.js';
import { activeAt, channelIdOf, emptyMetrics, metricsOf, occupied, stateKey, type Announcement, type ChannelDetails, type ChannelState, type OccupancyMetrics } from './channel-state.js';
import { lifecycleId, periodOfId } from './lifecycle-ids.js';

export interface LifecycleOptions {
  idleMs: number;
  /** Events are announced only when what caused them is younger than this (ChannelsOptions.windowMs). */
  windowMs: number;
  occupancyThrottleMs: number;
  region: string;
}

const BUCKET_MS = 250;

/**
 * Which lifecycle events of the channels projection are due (ARCHITECTURE: lifecycle): what the
 * log says was announced (read back from `[meta]channel.lifecycle`), the channels to look at
 * next (something happened to them, their idle time runs out, their occupancy event was held
 * back by the throttle), and the events those channels' states call for. The channels are the
 * projection's (channels-projection.ts), read here; a channel no longer active is handed back to
 * `release` to be let go of.
 */
export class LifecycleEvents {
  /**
   * The period whose `channel.opened` the log holds, per channel (read back from the metachannel,
   * or announced by this process), and when it was announced.
   */
  private readonly announced = new Map<string, { period: string; at: number }>();
  /** Channels to look at in the next announce(): something happened to them. */
  private dirty = new Set<string>();
  /** Channels whose idle time runs out within each bucket of time (its end, ms). */
  private readonly due = new Map<number, Set<string>>();
  /** Channels with an occupancy change held back by the throttle. */
  private readonly throttled = new Set<string>();

  constructor(
    private readonly options: LifecycleOptions,
    private readonly channels: ReadonlyMap<string, ChannelState>,
    private readonly release: (s: ChannelState, now: number) => void,
  ) {}

  /** Something happened to the channel: the next announce() looks at it. */
  touch(key: string): void {
    this.dirty.add(key);
  }

  /** The periods announced open, as a snapshot holds them (channels-snapshot.ts). */
  announcedOpen(): ReadonlyMap<string, { period: string; at: number }> {
    return this.announced;
  }

  /** The periods announced open that a snapshot held. */
  restore(announced: Iterable<[key: string, period: string, at: number]>): void {
    for (const [key, period, at] of announced) {
      this.announced.set(key, { period, at });
      this.dirty.add(key);
    }
  }

  /** The metachannel's own messages: which periods have been announced open, and closed. */
  readBack(appId: string, messages: StoredMessage[]): void {
    for (const m of messages) {
      const period = periodOfId(m.id);
      const channel = channelIdOf(m);
      if (period === undefined || channel === undefined) continue;
      const key = stateKey(appId, channel);
      this.dirty.add(key);
      if (m.name === 'channel.opened') this.announced.set(key, { period, at: m.timestamp });
      else if (m.name === 'channel.closed' && this.announced.get(key)?.period === period) this.announced.delete(key);
      else if (m.name === 'channel.occupancy') {
        const s = this.channels.get(key);
        if (s && s.occupancyCause === period) {
          s.occupancyCause = undefined;
          s.occupancyAnnouncedAt = m.timestamp;
        }
      }
    }
  }

  /** ChannelsProjection.announce(): the events now due, and channels no longer active released. */
  announce(now: number): Announcement[] {
    const { windowMs, idleMs, occupancyThrottleMs, region } = this.options;
    const out: Announcement[] = [];
    const recent = (at: number): boolean => at > now - windowMs;
    const emit = (s: { appId: string; channel: string }, name: string, cause: string, details: ChannelDetails): void => {
      const data = JSON.stringify({ ...details, name: s.channel, region });
      out.push({ appId: s.appId, message: { id: lifecycleId(cause, s.channel, name), timestamp: 0, name, data, encoding: 'json' } });
    };
    const closing = (appId: string, channel: string, period: string, at: number, metrics: OccupancyMetrics): void => {
      if (!recent(at)) return;
      const details: ChannelDetails = { channelId: channel, status: { isActive: false, occupancy: { metrics } } };
      emit({ appId, channel }, 'channel.region.inactive', period, details);
      emit({ appId, channel }, 'channel.closed', period, details);
    };
    // Only channels something happened to, or whose idle time may have run out: not every channel
    // on every call (100,000 active channels cost 10-20 ms a scan).
    const keys = this.dirty;
    this.dirty = new Set();
    for (const [bucket, due] of this.due) {
      if (bucket > now) continue;
      this.due.delete(bucket);
      for (const k of due) {
        keys.add(k);
        const s = this.channels.get(k);
        if (s?.dueBucket === bucket) s.dueBucket = undefined;
      }
    }
    for (const k of this.throttled) keys.add(k);
    this.throttled.clear();
    for (const key of keys) {
      const s = this.channels.get(key);
      const announced = this.announced.get(key);
      if (!s) {
        // A period announced open whose channel the projection does not hold (its last use is
        // older than what a restart reads back, or another instance has not read its cause yet):
        // over once the idle time has passed since it was announced.
        if (announced === undefined) continue;
        if (now - announced.at < idleMs) {
          this.schedule(key, announced.at + idleMs);
          continue;
        }
        const sep = key.indexOf('\u0000');
        closing(key.slice(0, sep), key.slice(sep + 1), announced.period, announced.at + idleMs, emptyMetrics());
        this.announced.delete(key);
        continue;
      }
      const active = activeAt(s, now, idleMs);
      if (announced !== undefined && (!active || announced.period !== s.period)) {
        // The announced period ended: at its last use plus the idle time (or when the next began).
        closing(s.appId, s.channel, announced.period, active ? s.openedAt : s.lastUse + idleMs, metricsOf(s));
        this.announced.delete(key);
      }
      if (!active) {
        this.release(s, now);
        continue;
      }
      let made: ChannelDetails | undefined;
      const details = (): ChannelDetails => (made ??= { channelId: s.channel, status: { isActive: true, occupancy: { metrics: metricsOf(s) } } });
      if (!this.announced.has(key)) {
        if (recent(s.openedAt)) {
          emit(s, 'channel.opened', s.period, details());
          emit(s, 'channel.region.active', s.period, details());
        }
        this.announced.set(key, { period: s.period, at: now });
      }
      if (s.occupancyCause !== undefined) {
        if (now - s.occupancyAnnouncedAt >= occupancyThrottleMs) {
          if (recent(s.occupancyChangedAt)) emit(s, 'channel.occupancy', s.occupancyCause, details());
          s.occupancyCause = undefined;
          s.occupancyAnnouncedAt = now;
        } else {
          this.throttled.add(key);
        }
      }
      if (!occupied(s)) this.schedule(key, s.lastUse + idleMs, s);
    }
    return out;
  }

  /** Looks at a channel again once `at` has passed. */
  private schedule(key: string, at: number, s?: ChannelState): void {
    const bucket = Math.ceil(at / BUCKET_MS) * BUCKET_MS;
    if (s) {
      if (s.dueBucket === bucket) return;
      if (s.dueBucket !== undefined) this.due.get(s.dueBucket)?.delete(key);
      s.dueBucket = bucket;
    }
    let due = this.due.get(bucket);
    if (!due) this.due.set(bucket, (due = new Set()));
    due.add(key);
  }

  /** Announcements that could not be appended: due again at the next call. */
  failed(announcements: Announcement[], now: number): void {
    for (const { appId, message } of announcements) {
      const channel = channelIdOf(message);
      if (channel === undefined) continue;
      const key = stateKey(appId, channel);
      const period = periodOfId(message.id);
      this.dirty.add(key);
      if (message.name === 'channel.opened' && this.announced.get(key)?.period === period) this.announced.delete(key);
      if (message.name === 'channel.closed' && period !== undefined && !this.announced.has(key)) this.announced.set(key, { period, at: now - this.options.idleMs });
      const s = this.channels.get(key);
      if (message.name === 'channel.occupancy' && s && s.occupancyCause === undefined) {
        s.occupancyCause = period;
        s.occupancyAnnouncedAt = 0;
      }
    }
  }
}
