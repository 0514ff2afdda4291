import { ServiceError } from '../errors.js';
import { allowedOn, checkAllowedOn } from '../auth/channel-access.js';
import type { Credentials } from '../auth/credentials.js';
import type { ShapeLimits } from '../codec/value-shape.js';
import type { PresenceChange } from '../presence/presence-producer.js';
import { ACKED_NAMES, Action, Flag, FrameRefused, NOT_SERVED, decodeFrame, serviceError, toWireError, type ProtocolMessage } from './protocol.js';
import type { ConnectionContext, PeerSocket } from './context.js';
import { hangUp, type ConnectionIdentity } from './connection-life.js';
import { ConnectionChannels } from './connection-channels.js';
import { AckQueue, type AckResult } from './ack-queue.js';
import { EnteredMembers, presenceChangeOf, presenceItemsOf } from './presence-changes.js';
import { modesFor, publishedMessages, targetChannelOf } from './channel-requests.js';
import { InboundBudget } from './inbound-budget.js';
import { originOf } from './flood-cooldown.js';
import { reauthenticationRefusal } from './reauthentication.js';

/** The share of the inbound burst a new connection starts with when its origin was cut for flooding within the cool-down. */
const COOLED_START = 0.1;

export type { ConnectionIdentity } from './connection-life.js';

/**
 * One realtime connection: frames in, ACKs in msgSerial order, AUTH, its inbound rate and the
 * bytes it has in flight. Its channels (ATTACH, DETACH, SYNC) are its base's (connection-channels.ts);
 * its state, socket and timers that one's base's (connection-life.ts); it asks everything else of
 * its context (context.ts).
 */
export class Connection extends ConnectionChannels {
  private readonly acks = new AckQueue((pm) => this.send(pm));
  /** Bytes of the frames whose publish or presence change is not answered yet (see hold). */
  private inflightBytes = 0;
  private readonly members: EnteredMembers;
  /** What this connection may send: frames and bytes a second (counted before decoding). */
  private readonly budget: InboundBudget;
  /** What a client frame may nest and hold, checked before it is decoded. */
  private readonly shape: ShapeLimits;

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
    if (refusal && pm.action !== Action.MESSAGE && pm.action !== Action.PRESENCE && !(NOT_SERVED[pm.action] && typeof pm.msgSerial === 'number')) return this.fail(toWireError(refusal));
    switch (pm.action) {
      case Action.HEARTBEAT:
        // Only a string id is echoed: String() of what a frame may hold (an object whose toString
        // is not a function, arrays nested 100,000 deep) throws.
        this.send(typeof pm.id === 'string' ? { action: Action.HEARTBEAT, id: pm.id } : { action: Action.HEARTBEAT });
        return;
      case Action.MESSAGE:
      case Action.PRESENCE:
        return this.ackable(pm, size, refusal);
      case Action.OBJECT:
      case Action.ANNOTATION:
        // Counted by the SDK among the frames to ACK: answered in their turn, refused. Without a
        // msgSerial there is no turn to answer in: ignored, as an unknown action.
        if (typeof pm.msgSerial !== 'number') return;
        return this.ackable(pm, size, refusal ?? new ServiceError('invalidPublishRequest', NOT_SERVED[pm.action]!));
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
      return this.fail(serviceError('protocolError', `a ${ACKED_NAMES[pm.action]} needs a msgSerial`));
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
