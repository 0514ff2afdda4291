import { ServiceError } from '../errors.js';
import { isMetachannel } from '../domain/channel.js';
import type { Clock } from '../clock.js';

/** The channels the log keeps in use, as the channels projection holds them (projections/channels). */
export interface HeldChannels {
  holds(appId: string, channel: string): boolean;
  /** Of one app, or of every app. */
  heldCount(appId?: string): number;
  /** Told of each channel it begins to hold. */
  onHeld: ((appId: string, channel: string) => void) | undefined;
}

/**
 * How long a channel admitted here counts before the projection holds it: it has applied the
 * record that began it well within this (READ_YOUR_WRITES_TIMEOUT_MS is 5 s), and one whose
 * append failed stops counting then.
 */
const PENDING_MS = 10_000;

/**
 * Whether a publish, an attach or a presence change may begin a channel (README: Resource
 * limits): each channel in use costs every instance its state, its history tail and its lifecycle
 * messages, so the channels in use are bounded, per app (MAX_ACTIVE_CHANNELS_PER_APP) and for the
 * service (MAX_ACTIVE_CHANNELS). A channel already in use is always admitted; a new one past
 * either limit is refused with 40114 until channels close. Metachannels are never active channels.
 *
 * The count is the projection's, which every instance derives from the whole log, plus the
 * channels this instance admitted that the projection does not hold yet (a burst of new channels
 * within its lag would otherwise all pass); the projection tells when it begins to hold one, so
 * an admission costs a few map operations, at the limit too. New channels admitted at the same
 * moment on other instances are not seen until the projection applies them: with N instances, a
 * burst sent to all at once can reach N times the limit (each admits up to it) before the next
 * are refused.
 */
export class ChannelAdmission {
  /** Per app: channels admitted here and not yet held by the projection, with when (oldest first). */
  private readonly pending = new Map<string, Map<string, number>>();
  private pendingCount = 0;

  constructor(
    private readonly held: HeldChannels,
    private readonly limits: { maxActiveChannels: number; maxActiveChannelsPerApp: number },
    private readonly clock: Clock,
  ) {
    // Once the projection holds a channel admitted here, its count has it: no longer pending.
    held.onHeld = (appId, channel) => this.forget(appId, channel);
  }

  /** Throws channelLimitExceeded (40114) when `channel` is new and the app or the service is at its limit. */
  admit(appId: string, channel: string): void {
    if (isMetachannel(channel) || this.held.holds(appId, channel)) return;
    let pending = this.pending.get(appId);
    if (pending?.has(channel)) return;
    const now = this.clock.now();
    this.expire(now);
    const over = this.over(appId);
    if (over) {
      throw new ServiceError(
        'channelLimitExceeded',
        over === 'app'
          ? `the app has ${this.limits.maxActiveChannelsPerApp} active channels, the most it may (MAX_ACTIVE_CHANNELS_PER_APP): "${shown(channel)}" cannot begin until others close`
          : `the service has ${this.limits.maxActiveChannels} active channels, the most it may (MAX_ACTIVE_CHANNELS): "${shown(channel)}" cannot begin until others close`,
      );
    }
    if (!pending) this.pending.set(appId, (pending = new Map()));
    pending.set(channel, now);
    this.pendingCount++;
  }

  private over(appId: string): 'app' | 'service' | undefined {
    if (this.held.heldCount(appId) + (this.pending.get(appId)?.size ?? 0) >= this.limits.maxActiveChannelsPerApp) return 'app';
    if (this.held.heldCount() + this.pendingCount >= this.limits.maxActiveChannels) return 'service';
    return undefined;
  }

  /** Forgets what was admitted PENDING_MS ago or longer and never held (oldest first: stops at the first younger). */
  private expire(now: number): void {
    for (const [appId, pending] of this.pending) {
      for (const [channel, at] of pending) {
        if (now - at < PENDING_MS) break;
        pending.delete(channel);
        this.pendingCount--;
      }
      if (pending.size === 0) this.pending.delete(appId);
    }
  }

  private forget(appId: string, channel: string): void {
    const pending = this.pending.get(appId);
    if (!pending?.delete(channel)) return;
    this.pendingCount--;
    if (pending.size === 0) this.pending.delete(appId);
  }
}

const shown = (channel: string): string => (channel.length > 64 ? `${channel.slice(0, 64)}…` : channel);
