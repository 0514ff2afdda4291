// Whether an ATTACH's channelSerial resumes (REALTIME-PROTOCOL.md §4.3): the position it names in
// the channel's partition, believed only up to the log's end; the replay of what the client missed
// (backlog.ts, which refuses a position outside the resume window); and what ATTACHED says of it
// (RESUMED, its channelSerial, or error 90003). Apart from channel-attach.ts, which orchestrates the
// attach (registration, SYNC, the order of what is sent): this is the rule a forged or stale
// channelSerial meets, in one place.
import type { Logger } from 'pino';
import type { Log } from '../log/port.js';
import { Topics } from '../log/port.js';
import { ServiceError } from '../errors.js';
import { parseChannelSerial } from '../channels/channel-serial.js';
import { continuityLost, type Backlog, type BacklogRecord } from './backlog.js';
import type { Delivery } from './delivery.js';

export interface ChannelResumeDeps {
  log: Pick<Log, 'endOffsets'>;
  backlog: Pick<Backlog, 'replay'>;
  delivery: Pick<Delivery, 'position' | 'nothingSince'>;
  logger: Logger;
}

/** One ATTACH of a channel: `serial` the channelSerial it gave, if any. */
export interface ResumeAsked {
  serial: string | undefined;
  /** The channel's name as attached (with its qualifier). */
  channel: string;
  recordKey: string;
  partition: number;
}

/**
 * One attach's resume, in its steps: made with the ATTACH; aheadOfDelivery, then checkLogEnd
 * before the attachment is made; plan(target) in the tick it registers; replay when `replays`;
 * then `resumed`, `attachedAt` and `error` for the ATTACHED.
 */
export class ChannelResume {
  /** The position resumed from, while the channelSerial holds as one. */
  private position: number | undefined;
  /** Why a channelSerial given is not resumed from: ATTACHED without RESUMED carries it (90003). */
  private lost: ServiceError | undefined;
  private target = 0;
  private quiet = false;
  /** Whether what the client missed is read from the log (plan). */
  replays = false;
  /** Whether ATTACHED carries RESUMED. */
  resumed = false;

  constructor(
    private readonly deps: ChannelResumeDeps,
    private readonly asked: ResumeAsked,
  ) {
    const { serial, partition } = asked;
    const parsed = serial === undefined ? undefined : parseChannelSerial(serial);
    this.position = parsed?.partition === partition ? parsed.offset : undefined;
    this.lost = serial !== undefined && this.position === undefined ? continuityLost(': its channelSerial is not a position of this channel') : undefined;
  }

  /** The position the attachment starts from (its `from`), if it resumes. */
  get from(): number | undefined {
    return this.position;
  }

  /**
   * Ahead of this instance's delivery: a position from another instance further on, believed
   * only up to the log's end (checkLogEnd: a log made anew since has not reached it: no continuity).
   */
  aheadOfDelivery(): boolean {
    return this.position !== undefined && this.position > this.deps.delivery.position(this.asked.partition);
  }

  async checkLogEnd(): Promise<void> {
    const { partition } = this.asked;
    const end = (await this.deps.log.endOffsets(Topics.messages).catch(() => undefined))?.get(partition);
    if (end === undefined || this.position! > end) [this.position, this.lost] = [undefined, continuityLost(": its channelSerial is past the end of the channel's log")];
  }

  /** In the tick the attachment registers at `target` (delivery's position): whether it resumes, and how. */
  plan(target: number): void {
    const { partition, recordKey } = this.asked;
    const from = this.position;
    this.target = target;
    // Behind the client's position (it comes from an instance whose delivery is further on): live
    // delivery brings everything after it, and skips what the client has.
    const ahead = from !== undefined && from > target;
    // Nothing of the channel after the client's position (known without reading: a quiet channel
    // resumes however long ago its last message was): continuity, and nothing to replay.
    this.quiet = from !== undefined && from < target && this.deps.delivery.nothingSince(partition, recordKey, from);
    this.replays = from !== undefined && from < target && !this.quiet;
    this.resumed = ahead || this.quiet || from === target;
  }

  /** What the client missed, read from the log for `owner` (its connection); none, without RESUMED, when that fails. */
  async replay(owner: object, gone: () => boolean): Promise<BacklogRecord[]> {
    const { channel, serial, recordKey, partition } = this.asked;
    try {
      const backlog = await this.deps.backlog.replay(recordKey, partition, this.position!, this.target, owner, gone);
      this.resumed = true;
      return backlog;
    } catch (err) {
      this.deps.logger.debug({ err, channel, serial }, 'channel backlog not available; attaching without continuity');
      this.lost = err instanceof ServiceError ? err : continuityLost(': its backlog could not be read', err);
      return [];
    }
  }

  /**
   * The client's position as it reads ATTACHED: the backlog and the held deliveries follow it,
   * each with its own. Past them, a resume from here (the client cut off before they reach it)
   * would skip them with RESUMED (issue 22: messages missed in silence).
   */
  get attachedAt(): number {
    return this.resumed && this.position !== undefined && !this.quiet ? this.position : this.target;
  }

  /**
   * A channelSerial not resumed from: the SDK shows the error on the channel's state change (an
   * `update` if it was attached) and takes ATTACHED's channelSerial; the channel stays attached.
   */
  get error(): ServiceError | undefined {
    return this.asked.serial !== undefined && !this.resumed ? (this.lost ?? continuityLost('')) : undefined;
  }
}
