import { ServiceError } from '../errors.js';
import { allowedOn, checkAllowedOn } from '../auth/channel-access.js';
import type { Credentials } from '../auth/credentials.js';
import type { ShapeLimits } from '../codec/value-shape.js';
import type { PresenceChange } from '../presence/presence-producer.js';
import { Action, Flag, FrameRefused, decodeFrame, serviceError, toWireError, type ProtocolMessage, type WireError } from './protocol.js';
import type { ConnectionContext, PeerSocket } from './context.js';
import { ConnectionLife, hangUp, type ConnectionIdentity } from './connection-life.js';
import { AckQueue, type AckResult } from './ack-queue.js';
import { EnteredMembers, presenceChangeOf, presenceItemsOf } from './presence-changes.js';
import { attachGrant, attachRequestOf, modesFor, publishedMessages, targetChannelOf, type AttachRequest } from './channel-requests.js';
import { qualifiedName } from '../channels/channel-qualifier.js';
import { InboundBudget } from './inbound-budget.js';
import { originOf } from './flood-cooldown.js';
import { reauthenticationRefusal } from './reauthentication.js';

/** The share of the inbound burst a new connection starts with when its origin was cut for flooding within the cool-down. */
const COOLED_START = 0.1;

export type { ConnectionIdentity } from './connection-life.js';

/**
 * One realtime connection: frames in, ACKs in msgSerial order, AUTH, its inbound rate and the
 * bytes it has in flight. Its state, socket and timers are its base's (connection-life.ts); it
 * asks everything else of its context (context.ts).
 */
export class Connection extends ConnectionLife {
  private readonly acks = new AckQueue((pm) => this.send(pm));
  /** Bytes of the frames whose publish or presence change is not answered yet (see hold). */
  private inflightBytes = 0;
  private readonly members: EnteredMembers;
  /** What this connection may send: frames and bytes a second (counted before decoding). */
  private readonly budget: InboundBudget;
  /** What a client frame may nest and hold, checked before it is decoded. */
  private readonly shape: ShapeLimits;
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
  private readonly attachWork = new Map<string, Promise<void>>();
  /** PRESENCE frames waiting for an ATTACH (attachWork), by the channel they act on: a DETACH after them leaves once they are done. */
  private readonly presenceWaiting = new Map<string, Set<Promise<unknown>>>();
  /** A DETACH's leave waiting for the PRESENCE frames before it, by channel: the PRESENCE frames after it wait for it. */
  private readonly presenceLeaving = new Map<string, Promise<void>>();

  constructor(ctx: ConnectionContext, id: string, key: string, identity: ConnectionIdentity, socket: PeerSocket) {
    super(ctx, id, key, identity, socket);
    const s = ctx.settings;
    // A frame of the largest size must fit in a burst. A new connection from an origin cut for
    // flooding within the cool-down starts with a tenth of the burst (and room for one frame of
    // the largest size), refilling at the same rate: a flooder reconnecting each time it is sent
    // away had its whole burst admitted each time (issue 22).
    const cooled = ctx.floodCooldown.cooling(originOf(identity));
    if (cooled) ctx.count('cooledConnections');
    this.budget = new InboundBudget(s.maxInboundRate, Math.max(s.maxInboundBytesRate, s.maxFrameBytes / 2), ctx.clock.now(), cooled ? COOLED_START : 1, s.maxFrameBytes);
    this.shape = { maxDepth: s.maxFrameDepth, maxWidth: s.maxFrameWidth };
    this.members = new EnteredMembers(s, this.presenceChannels, (appId) => ctx.presenceMembers(appId));
  }

  /** A resume, with the credentials it came with: members leave where they allow no presence, as on AUTH. */
  override resume(socket: PeerSocket, identity: ConnectionIdentity): void {
    super.resume(socket, identity);
    this.leaveWhereNotAllowed(new Set());
  }

  /** Members taken over from another instance (a resume here), with the same rule as resume. */
  override holdsPresenceOn(channels: Iterable<string>): void {
    super.holdsPresenceOn(channels);
    this.leaveWhereNotAllowed(new Set());
  }

  /** A frame from `from` (ignored unless it is this connection's socket). */
  receive(from: PeerSocket, data: Buffer, isBinary: boolean): void {
    if (this.socket !== from) return;
    const now = this.ctx.clock.now();
    this.lastReceived = now;
    // Every frame counts, before anything is decoded: one client's flood of cheap frames
    // (HEARTBEAT, DETACH, unknown actions) stalled every other connection (issue 22).
    if (!this.budget.admit(data.length, now)) return this.overBudget();
    let pm: ProtocolMessage;
    try {
      pm = decodeFrame(data, isBinary, this.format, this.shape);
    } catch (err) {
      this.ctx.count('framesRefused');
      if (err instanceof FrameRefused) return this.handleSafely(err.pm, data.length, err);
      return this.fail(toWireError(err));
    }
    this.handleSafely(pm, data.length);
  }

  /** Reads the socket again once this connection is under its budget and the gateway reads sockets. */
  resumeReading(): void {
    if (this.inflightBytes <= this.ctx.settings.maxInflightBytes && !this.ctx.readingThrottled && this.socket?.isPaused) this.socket.resume();
  }

  /**
   * A client over its inbound budget (frames or bytes a second): its socket is not read any more
   * (what it still sends costs nothing here), it is told why, and it may resume; the SDK then
   * sends its unacknowledged publishes again.
   */
  private overBudget(): void {
    this.ctx.count('framesRefused');
    this.ctx.count('inboundBudgetDisconnects');
    const socket = this.socket;
    const { maxInboundRate, maxInboundBytesRate } = this.ctx.settings;
    this.ctx.floodCooldown.cutOff(originOf(this.identity));
    this.ctx.logger.warn({ connectionId: this.id, appId: this.appId }, 'realtime client over its inbound budget; disconnected');
    this.disconnect(serviceError('inboundRateExceeded', `more than ${maxInboundRate} frames or ${maxInboundBytesRate} bytes a second (bursts of twice that) on this connection; resume, and slow down`));
    if (socket) hangUp(socket);
  }

  /**
   * Counts a frame's bytes until it is answered. Over maxInflightBytes, or with all connections
   * together over maxTotalInflightBytes, the socket is not read until answers bring it back under,
   * so TCP pushes back on the client: one sending faster than the log appends holds that much (and
   * a frame) in memory here, not everything it sent.
   */
  private hold(bytes: number): () => void {
    this.inflightBytes += bytes;
    this.ctx.holdInflight(bytes);
    if (this.inflightBytes > this.ctx.settings.maxInflightBytes) this.pauseReading();
    return () => {
      this.inflightBytes -= bytes;
      this.ctx.releaseInflight(bytes);
      this.resumeReading();
    };
  }

  // ---- frames in

  private handleSafely(pm: ProtocolMessage, size: number, refusal?: ServiceError): void {
    try {
      this.handle(pm, size, refusal);
    } catch (err) {
      // A bug, not the client's fault; thrown here it would end the process and every connection.
      this.ctx.logger.error({ err, connectionId: this.id, action: pm.action }, 'realtime frame handling failed');
      this.fail(toWireError(err));
    }
  }

  /**
   * One ProtocolMessage from the client (`size`: its frame's bytes; `refusal`: why its content is
   * refused, answered as a NACK for a publish or presence change). Every problem is answered on the wire.
   */
  private handle(pm: ProtocolMessage, size = 0, refusal?: ServiceError): void {
    if (refusal && pm.action !== Action.MESSAGE && pm.action !== Action.PRESENCE) return this.fail(toWireError(refusal));
    switch (pm.action) {
      case Action.HEARTBEAT:
        // Only a string id is echoed: String() of what a frame may hold (an object whose toString
        // is not a function, arrays nested 100,000 deep) throws.
        this.send(typeof pm.id === 'string' ? { action: Action.HEARTBEAT, id: pm.id } : { action: Action.HEARTBEAT });
        return;
      case Action.MESSAGE:
      case Action.PRESENCE:
        return this.ackable(pm, size, refusal);
      case Action.ATTACH:
        if (!this.namesChannel(pm)) return;
        this.attach(pm).catch((err) => {
          this.ctx.logger.error({ err, connectionId: this.id }, 'realtime attach failed');
          this.refuseAttach(pm.channel, toWireError(err));
        });
        return;
      case Action.DETACH:
        return this.namesChannel(pm) ? this.detach(pm.channel) : undefined;
      case Action.SYNC:
        return this.namesChannel(pm) ? this.resync(pm.channel) : undefined;
      case Action.AUTH:
        return this.reauthenticate(pm);
      case Action.DISCONNECT:
        // The client gives up on this socket; the connection stays resumable.
        this.socket?.close(1000);
        return;
      case Action.CLOSE:
        // CLOSED, then the connection is gone and its members leave at once.
        this.send({ action: Action.CLOSED });
        return this.end('closed');
      default:
        // Unknown actions are ignored, as the SDK ignores ours (forward compatibility).
        return;
    }
  }

  /**
   * Whether an ATTACH, DETACH or SYNC names its channel: without one there is no channel to answer
   * on, so the connection fails (80013), rather than the frame going unanswered.
   */
  private namesChannel(pm: ProtocolMessage): pm is ProtocolMessage & { channel: string } {
    if (typeof pm.channel === 'string') return true;
    const action = pm.action === Action.ATTACH ? 'ATTACH' : pm.action === Action.DETACH ? 'DETACH' : 'SYNC';
    this.fail(serviceError('protocolError', `${action} needs a channel (a string)`));
    return false;
  }

  /**
   * An ATTACH refused: ERROR with the channel, `failed` for the SDK (presence cleared, no retry). An
   * attachment made or waiting before goes too, as on DETACH: it went on receiving, members present.
   */
  private refuseAttach(channel: unknown, error: WireError): void {
    if (typeof channel === 'string' && (this.attachments.has(channel) || this.attaching.has(channel))) this.release(channel);
    this.channelError(channel, error);
  }

  private channelError(channel: unknown, error: WireError): void {
    if (typeof channel === 'string') this.send({ action: Action.ERROR, channel, error });
  }

  // ---- attach and detach (REALTIME-PROTOCOL.md §4)

  private async attach(pm: ProtocolMessage): Promise<void> {
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

  private detach(channel: string): void {
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
  private attachedBase(channel: string): string {
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
  private checkMode(pm: ProtocolMessage, mode: number, what: string): void {
    const attachment = typeof pm.channel === 'string' ? this.attachments.get(pm.channel) : undefined;
    if (attachment && !(attachment.modes & mode)) {
      throw new ServiceError('capabilityDenied', `cannot ${what} on channel "${attachment.channel}": it was attached without the ${mode === Flag.PUBLISH ? 'publish' : 'presence'} mode`);
    }
  }

  /** A client asks for the presence set again (§5.4): it gets the whole set. */
  private resync(channel: string): void {
    const attachment = this.attachments.get(channel);
    if (attachment) this.ctx.sync(attachment);
  }

  // ---- AUTH (§7.3)

  private reauthenticate(pm: ProtocolMessage): void {
    const token = pm.auth?.accessToken;
    let checked: Credentials | Promise<Credentials>;
    try {
      if (typeof token !== 'string' || token.length === 0) throw new ServiceError('invalidCredentials', 'AUTH carries no accessToken');
      checked = this.ctx.authenticateToken(token);
    } catch (err) {
      return this.fail(toWireError(err));
    }
    if (!(checked instanceof Promise)) return this.reauthenticated(checked);
    // A JWT seen for the first time is checked asynchronously; the connection may have gone meanwhile.
    checked.then(
      (credentials) => {
        if (this.state === 'open') this.reauthenticated(credentials);
      },
      (err: unknown) => {
        if (this.state === 'open') this.fail(toWireError(err));
      },
    );
  }

  private reauthenticated(credentials: Credentials): void {
    const refusal = reauthenticationRefusal(this, { credentials, clientId: credentials.clientId });
    if (refusal) return this.fail(refusal);
    // A named connection renewing with a wildcard token keeps its clientId.
    const held = this.clientId;
    this.identity = { ...this.identity, credentials, clientId: held !== undefined && held !== '*' ? held : credentials.clientId };
    // Channels the new capability no longer allows fail; the others stay attached (RTC8a1). So does
    // one whose `occupancy` param the new capability no longer allows (channel-metadata): its
    // [meta]occupancy messages went on.
    const failed = new Set<string>();
    for (const [channel, attachment] of [...this.attachments]) {
      const modes = modesFor(this.credentials.capability, attachment.base, undefined) & attachment.modes;
      const occupancyDenied = attachment.occupancy !== undefined && !allowedOn(this.credentials.capability, attachment.base, 'channel-metadata');
      if (modes === 0 || occupancyDenied) {
        this.ctx.detach(this, channel);
        failed.add(attachment.base);
        const why = modes === 0 ? 'allows no operation' : 'lacks the channel-metadata capability, which its occupancy param needs,';
        this.channelError(channel, serviceError('capabilityDenied', `the new token ${why} on channel "${channel}"`));
      } else {
        attachment.modes = modes;
      }
    }
    this.leaveWhereNotAllowed(failed);
    this.sendConnected();
  }

  /**
   * After new credentials (AUTH, resume): the members leave where the capability allows no presence,
   * or whose channel failed (as on DETACH, unless attached by another name). They stayed until the
   * connection ended, and the client could not leave them: a LEAVE needs the presence capability.
   */
  private leaveWhereNotAllowed(failed: ReadonlySet<string>): void {
    const capability = this.credentials.capability;
    for (const base of [...this.presenceChannels]) {
      const detached = failed.has(base) && ![...this.attachments.values()].some((a) => a.base === base);
      if (!detached && allowedOn(capability, base, 'presence')) continue;
      this.presenceChannels.delete(base);
      this.ctx.leave(this.appId, base, this.id);
    }
  }

  // ---- publish and presence, acknowledged in msgSerial order (§3.2)

  private ackable(pm: ProtocolMessage, size: number, refusal: ServiceError | undefined): void {
    const msgSerial = pm.msgSerial;
    if (typeof msgSerial !== 'number' || !Number.isSafeInteger(msgSerial) || msgSerial < 0) {
      return this.fail(serviceError('protocolError', `a ${pm.action === Action.MESSAGE ? 'MESSAGE' : 'PRESENCE'} needs a msgSerial`));
    }
    const settle = this.acks.enqueue(msgSerial);
    const release = this.hold(size);
    const done = (result: AckResult): void => {
      release();
      settle(result);
    };
    const fail = (err: unknown): void => {
      if (!(err instanceof ServiceError)) this.ctx.logger.error({ err, connectionId: this.id }, 'realtime publish failed');
      done({ ok: false, error: toWireError(err) });
    };
    if (refusal) return fail(refusal);
    try {
      const work = pm.action === Action.MESSAGE ? this.publish(pm, msgSerial) : this.presence(pm, msgSerial);
      work.then((serials) => done({ ok: true, serials }), fail);
    } catch (err) {
      fail(err);
    }
  }

  /**
   * `work` once an ATTACH of the frame's channel sent before it is done (see `attachWork`); at once
   * (in this turn, as before) when none is pending.
   */
  private afterAttach<T>(pm: ProtocolMessage, work: () => Promise<T>): Promise<T> {
    const pending = typeof pm.channel === 'string' ? this.attachWork.get(pm.channel) : undefined;
    return pending ? pending.then(work) : work();
  }

  private publish(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    return this.afterAttach(pm, () => this.publishNow(pm, msgSerial));
  }

  private async publishNow(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    const channel = targetChannelOf(pm, 'publish');
    checkAllowedOn(this.credentials.capability, channel, 'publish');
    this.checkMode(pm, Flag.PUBLISH, 'publish');
    // The connection's clientId, else the credentials' wildcard, else none (an anonymous token's messages claim none).
    const publisher = { clientId: this.clientId ?? this.credentials.clientId, method: this.credentials.method };
    const messages = publishedMessages(pm, this.id, msgSerial, publisher, this.ctx.limits);
    await this.ctx.publish(this.appId, channel, messages, this.credentials.keyName);
    return messages.map((m) => m.id);
  }

  private presence(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    if (typeof pm.channel !== 'string') return this.presenceNow(pm, msgSerial);
    const base = this.attachedBase(pm.channel);
    // What it waits for is what was sent before it: the ATTACH of its channel, a DETACH's leave.
    const before = [this.attachWork.get(pm.channel), this.presenceLeaving.get(base)].filter((p) => p !== undefined);
    if (before.length === 0) return this.presenceNow(pm, msgSerial);
    const work = Promise.all(before).then(() => this.presenceNow(pm, msgSerial));
    let waiting = this.presenceWaiting.get(base);
    if (!waiting) this.presenceWaiting.set(base, (waiting = new Set()));
    waiting.add(work);
    const done = (): void => {
      waiting.delete(work);
      if (waiting.size === 0 && this.presenceWaiting.get(base) === waiting) this.presenceWaiting.delete(base);
    };
    work.then(done, done);
    return work;
  }

  private async presenceNow(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    // Ended while it waited for its ATTACH (a CLOSE behind): a member entered now would stay for good.
    if (this.state === 'ended') throw new ServiceError('connectionClosed', 'the connection ended before the presence change took effect');
    const channel = targetChannelOf(pm, 'enter presence');
    checkAllowedOn(this.credentials.capability, channel, 'presence');
    this.checkMode(pm, Flag.PRESENCE, 'enter presence');
    this.ctx.admitChannel(this.appId, channel);
    const limits = this.ctx.limits;
    const items = presenceItemsOf(pm, this.ctx.settings.maxMembersPerConnection);
    const sender = { connectionId: this.id, instanceId: this.ctx.instanceId, msgSerial, clientId: this.clientId, method: this.credentials.method };
    const changes: PresenceChange[] = [];
    const ids: (string | null)[] = [];
    items.forEach((value, index) => {
      const change = presenceChangeOf(value, index, sender, limits);
      ids.push(change.id);
      // An automatic re-enter (§5.6) of a member present with the same id changes nothing.
      if (change.action === 'enter' && this.ctx.isPresentWithId(this.appId, channel, change.clientId, this.id, change.id)) return;
      changes.push(change);
    });
    const joining = this.members.admit(this.appId, channel, changes);
    if (changes.some((c) => c.action !== 'leave')) this.presenceChannels.add(channel);
    if (changes.length === 0) return ids;
    // The ACK follows the change's own PRESENCE: a presence.get() once enter() resolves has it.
    await this.ctx.changePresence(this.appId, channel, this.id, joining, changes);
    return ids;
  }
}
