import { ServiceError } from '../errors.js';
import { Action, Flag, serviceError, toWireError, type ProtocolMessage, type WireError } from './protocol.js';
import { ConnectionLife } from './connection-life.js';
import { attachGrant, attachRequestOf, type AttachRequest } from './channel-requests.js';
import { qualifiedName } from '../channels/channel-qualifier.js';

/**
 * A connection's channels (REALTIME-PROTOCOL.md §4): ATTACH, DETACH and SYNC, and the order of the
 * frames behind an ATTACH still being worked on. The base of Connection (connection.ts), which
 * handles the frames; its own base (connection-life.ts) holds its state, socket and timers.
 */
export class ConnectionChannels extends ConnectionLife {
  /** ATTACHes waiting for delivery to pass this instance's own messages (a DETACH cancels one). */
  private readonly attaching = new Map<string, object>();
  /** Channels whose ATTACH is being worked on (it may wait on delivery or the log), with how many ATTACHes of each. */
  private readonly joining = new Map<string, number>();
  /**
   * The newest ATTACH being worked on, by the channel name the frame gave: a publish or presence
   * change sent after it on the channel waits for it (frames of a connection take effect in their
   * order). The SDK sends its publishes while the channel attaches; appended before the attach was
   * registered (which may wait seconds for delivery on a fresh production instance), they came
   * before the attachment's start, and its own subscriber never got them.
   */
  protected readonly attachWork = new Map<string, Promise<void>>();
  /** PRESENCE frames waiting for an ATTACH (attachWork), by the channel they act on: a DETACH after them leaves once they are done. */
  protected readonly presenceWaiting = new Map<string, Set<Promise<unknown>>>();
  /** A DETACH's leave waiting for the PRESENCE frames before it, by channel: the PRESENCE frames after it wait for it. */
  protected readonly presenceLeaving = new Map<string, Promise<void>>();

  /**
   * Whether an ATTACH, DETACH or SYNC names its channel: without one there is no channel to answer
   * on, so the connection fails (80013), rather than the frame going unanswered.
   */
  protected namesChannel(pm: ProtocolMessage): pm is ProtocolMessage & { channel: string } {
    if (typeof pm.channel === 'string') return true;
    const action = pm.action === Action.ATTACH ? 'ATTACH' : pm.action === Action.DETACH ? 'DETACH' : 'SYNC';
    this.fail(serviceError('protocolError', `${action} needs a channel (a string)`));
    return false;
  }

  /**
   * An ATTACH refused: ERROR with the channel, `failed` for the SDK (presence cleared, no retry). An
   * attachment made or waiting before goes too, as on DETACH: it went on receiving, members present.
   */
  protected refuseAttach(channel: unknown, error: WireError): void {
    if (typeof channel === 'string' && (this.attachments.has(channel) || this.attaching.has(channel))) this.release(channel);
    this.channelError(channel, error);
  }

  protected channelError(channel: unknown, error: WireError): void {
    if (typeof channel === 'string') this.send({ action: Action.ERROR, channel, error });
  }

  // ---- attach and detach (REALTIME-PROTOCOL.md §4)

  protected async attach(pm: ProtocolMessage): Promise<void> {
    let request: AttachRequest;
    try {
      request = attachRequestOf(pm);
    } catch (err) {
      return this.refuseAttach(pm.channel, toWireError(err));
    }
    const channel = request.channel.name;
    const { maxChannelsPerConnection } = this.ctx.settings;
    // The channels being attached count too: ATTACHes sent at once, each waiting on delivery or
    // the log, all found the count below the limit and all attached.
    if (!this.attachments.has(channel) && !this.joining.has(channel) && this.attachments.size + this.joiningOnly() >= maxChannelsPerConnection) {
      return this.refuseAttach(channel, serviceError('tooManyChannels', `a connection may attach at most ${maxChannelsPerConnection} channels`));
    }
    this.joining.set(channel, (this.joining.get(channel) ?? 0) + 1);
    const work = this.join(pm, request);
    const settled = work.then(
      () => undefined,
      () => undefined,
    );
    this.attachWork.set(pm.channel as string, settled);
    try {
      await work;
    } finally {
      if (this.attachWork.get(pm.channel as string) === settled) this.attachWork.delete(pm.channel as string);
      const left = (this.joining.get(channel) ?? 1) - 1;
      if (left > 0) this.joining.set(channel, left);
      else this.joining.delete(channel);
    }
  }

  /** Channels being attached that are not attached yet. */
  private joiningOnly(): number {
    let n = 0;
    for (const channel of this.joining.keys()) if (!this.attachments.has(channel)) n++;
    return n;
  }

  private async join(pm: ProtocolMessage, request: AttachRequest): Promise<void> {
    const { name: channel, base } = request.channel;
    // A later ATTACH of the channel supersedes one still waiting, whether or not it waits itself:
    // the earlier, done waiting after it, attached again with its own modes and params.
    this.attaching.delete(channel);
    const first = attachGrant(this.credentials.capability, pm, request);
    if (first.refusal) return this.refuseAttach(channel, first.refusal);
    try {
      this.ctx.admitChannel(this.appId, base);
    } catch (err) {
      return this.refuseAttach(channel, toWireError(err));
    }
    // An attach waits for delivery to read the log (a fresh instance's consumer joining its group):
    // what is published after ATTACHED then arrives as it is, not seconds late. A fresh attach
    // starts where delivery is: after this instance's own messages, once it passed them. A resume
    // goes on from the client's position, which they do not move.
    const delivered = this.ctx.readyToAttach(this.appId, base, request.serial === undefined);
    if (delivered) {
      const ticket = {};
      const epoch = this.epoch;
      this.attaching.set(channel, ticket);
      const caughtUp = await delivered;
      // Detached, attached again, or the socket gone meanwhile: this ATTACH is answered no more.
      if (this.attaching.get(channel) !== ticket || this.epoch !== epoch) return;
      this.attaching.delete(channel);
      if (!caughtUp) this.ctx.logger.warn({ connectionId: this.id, channel }, 'attached before delivery read the log or passed the messages this instance acknowledged: it lags');
    }
    // The modes of the credentials held when it registers: an AUTH handled while this ATTACH waited
    // (for delivery, or the log) may have narrowed them.
    let refusal: WireError | undefined;
    const grantNow = (): number => {
      const now = attachGrant(this.credentials.capability, pm, request);
      refusal = now.refusal;
      return now.modes & first.modes;
    };
    if (!(await this.ctx.attach(this, grantNow, request)) && refusal) this.refuseAttach(channel, refusal);
  }

  protected detach(channel: string): void {
    this.release(channel);
    this.send({ action: Action.DETACHED, channel });
  }

  /** The channel's attachment (or ATTACH waiting) goes, and its members leave unless another name of it stays attached. */
  private release(channel: string): void {
    this.attaching.delete(channel);
    this.ctx.detach(this, channel);
    const base = this.attachedBase(channel);
    // Its members leave unless the channel is still attached by another of its names.
    const stillAttached = [...this.attachments.values()].some((a) => a.base === base);
    const waiting = this.presenceWaiting.get(base);
    if (!stillAttached && waiting) {
      // PRESENCE frames before this DETACH still wait for their ATTACH: their members leave after
      // them (left at once, the enter came after the leave and its member stayed).
      const leave = Promise.allSettled([...waiting, this.presenceLeaving.get(base)]).then(() => {
        if (this.presenceLeaving.get(base) === leave) this.presenceLeaving.delete(base);
        if (this.presenceChannels.delete(base) && this.state !== 'ended') this.ctx.leave(this.appId, base, this.id);
      });
      this.presenceLeaving.set(base, leave);
    } else if (!stillAttached && this.presenceChannels.delete(base)) this.ctx.leave(this.appId, base, this.id);
  }

  /** The channel a name refers to (itself when it is not a valid qualified name). */
  protected attachedBase(channel: string): string {
    try {
      return qualifiedName(channel).base;
    } catch {
      return channel;
    }
  }

  /**
   * Whether the attachment of the channel a frame names, if any, was granted `mode`: an attach
   * that asked for fewer modes (ATTACH flags) cannot publish or enter presence (§4.1). Publishing
   * without attaching goes by the capability alone (RTL6c5).
   */
  protected checkMode(pm: ProtocolMessage, mode: number, what: string): void {
    const attachment = typeof pm.channel === 'string' ? this.attachments.get(pm.channel) : undefined;
    if (attachment && !(attachment.modes & mode)) {
      throw new ServiceError('capabilityDenied', `cannot ${what} on channel "${attachment.channel}": it was attached without the ${mode === Flag.PUBLISH ? 'publish' : 'presence'} mode`);
    }
  }

  /** A client asks for the presence set again (§5.4): it gets the whole set. */
  protected resync(channel: string): void {
    const attachment = this.attachments.get(channel);
    if (attachment) this.ctx.sync(attachment);
  }

  /**
   * `work` once an ATTACH of the frame's channel sent before it is done (see `attachWork`); at once
   * (in this turn, as before) when none is pending.
   */
  protected afterAttach<T>(pm: ProtocolMessage, work: () => Promise<T>): Promise<T> {
    const pending = typeof pm.channel === 'string' ? this.attachWork.get(pm.channel) : undefined;
    return pending ? pending.then(work) : work();
  }
}
