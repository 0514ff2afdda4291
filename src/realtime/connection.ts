import type { WebSocket } from 'ws';
import { ServiceError } from '../errors.js';
import { checkChannelName, isMetachannel } from '../channels/channel-name.js';
import { permits } from '../auth/capability.js';
import type { Credentials } from '../auth/credentials.js';
import { parsePublishBody, wellFormed, messageSize, type MessageData } from '../messages/message.js';
import type { PresenceChange } from '../presence/presence-producer.js';
import { Action, Flag, MODES, encodeFrame, serviceError, toWireError, type Frame, type ProtocolMessage, type WireError, type WireFormat } from './protocol.js';
import type { Attachment, Gateway } from './gateway.js';
import { parseRewind, type Rewind } from './rewind.js';
import { InboundBudget } from './inbound-budget.js';

/** A publish or presence change waiting for its ACK or NACK, in msgSerial order. */
interface PendingAck {
  msgSerial: number;
  result?: { ok: true; serials: (string | null)[] } | { ok: false; error: WireError };
}

const PRESENCE_ACTIONS: Record<number, PresenceChange['action'] | undefined> = { 2: 'enter', 3: 'leave', 4: 'update' };

/**
 * One realtime connection: its identity, its attachments, its acknowledgements. It outlives its
 * socket for connectionStateTtl so that a client that lost its socket can resume it; what it
 * missed meanwhile is replayed from the log when it re-attaches (Gateway.attach).
 */
export class Connection {
  socket: WebSocket | undefined;
  readonly attachments = new Map<string, Attachment>();
  /** Channels where this connection entered presence: their members leave when it goes. */
  readonly presenceChannels = new Set<string>();
  lastSent = 0;
  lastReceived = 0;
  /** Set while the socket is gone: when the members leave, and when the connection is forgotten. */
  dropTimer: NodeJS.Timeout | undefined;
  expiryTimer: NodeJS.Timeout | undefined;
  private tokenTimer: NodeJS.Timeout | undefined;
  private readonly acks: PendingAck[] = [];
  /** Bytes of the frames whose publish or presence change is not answered yet (see hold). */
  private inflightBytes = 0;
  /** The clientIds this connection entered, by channel, and how many in all (see countMembers). */
  private readonly entered = new Map<string, Set<string>>();
  private enteredCount = 0;
  /** What this connection may send: frames and bytes a second (counted before decoding). */
  readonly budget: InboundBudget;
  /** ATTACHes waiting for delivery to pass this instance's own messages (a DETACH cancels one). */
  private readonly attaching = new Map<string, object>();

  constructor(
    readonly gateway: Gateway,
    readonly id: string,
    readonly key: string,
    public credentials: Credentials,
    /** The identity this connection acts as: a clientId, `*` (any) or undefined (anonymous). */
    public clientId: string | undefined,
    public format: WireFormat,
    public echo: boolean,
  ) {
    const s = gateway.settings;
    // A frame of the largest size must fit in a burst.
    this.budget = new InboundBudget(s.maxInboundRate, Math.max(s.maxInboundBytesRate, s.maxFrameBytes / 2), gateway.clock.now());
  }

  get appId(): string {
    return this.credentials.app.appId;
  }

  /** Sends a frame now (true); a client that does not read is disconnected instead of buffered for. */
  sendFrame(frame: Frame, written?: (err?: Error) => void): boolean {
    const socket = this.socket;
    if (!socket || socket.readyState !== socket.OPEN) return false;
    if (socket.bufferedAmount > this.gateway.settings.maxBufferedBytes) {
      this.gateway.slowConsumer(this);
      return false;
    }
    this.lastSent = this.gateway.clock.now();
    socket.send(frame, written);
    return true;
  }

  /** Encodes and sends a frame; `written`, when given, is called once it is written out (or failed). */
  send(pm: ProtocolMessage, written?: (err?: Error) => void): boolean {
    return this.sendFrame(encodeFrame(pm, this.format), written);
  }

  /** CONNECTED, for a new connection, a resume, or an AUTH that renewed the credentials. */
  sendConnected(error?: WireError): void {
    const s = this.gateway.settings;
    const details: Record<string, unknown> = {
      connectionKey: this.key,
      connectionStateTtl: s.connectionStateTtlMs,
      maxIdleInterval: s.maxIdleIntervalMs,
      maxMessageSize: this.gateway.limits.maxMessageSize,
      maxFrameSize: s.maxFrameBytes,
      maxInboundRate: s.maxInboundRate,
      serverId: this.gateway.instanceId,
    };
    if (this.clientId !== undefined) details.clientId = this.clientId;
    const pm: ProtocolMessage = { action: Action.CONNECTED, connectionId: this.id, connectionDetails: details };
    if (error) pm.error = error;
    this.send(pm);
    this.scheduleTokenExpiry();
  }

  /** A token's end: the client is told to renew (40142) and may resume with a new one. */
  private scheduleTokenExpiry(): void {
    clearTimeout(this.tokenTimer);
    const expires = this.credentials.expires;
    if (expires === undefined) return;
    const delay = Math.max(0, expires - this.gateway.clock.now());
    // setTimeout holds at most 2^31-1 ms; a later expiry is checked again then.
    this.tokenTimer = setTimeout(() => {
      if (this.credentials.expires !== expires) return;
      if (expires > this.gateway.clock.now()) return this.scheduleTokenExpiry();
      this.gateway.disconnect(this, serviceError('tokenExpired', 'token expired; renew it and resume'));
    }, Math.min(delay, 2 ** 31 - 1));
    this.tokenTimer.unref();
  }

  clearTimers(): void {
    clearTimeout(this.tokenTimer);
    clearTimeout(this.dropTimer);
    clearTimeout(this.expiryTimer);
    this.dropTimer = this.expiryTimer = this.tokenTimer = undefined;
  }

  /**
   * Counts a frame's bytes until it is answered. Over maxInflightBytes, or with all connections
   * together over maxTotalInflightBytes, the socket is not read until answers bring it back under,
   * so TCP pushes back on the client: one sending faster than the log appends holds that much (and
   * a frame) in memory here, not everything it sent.
   */
  private hold(bytes: number): () => void {
    this.inflightBytes += bytes;
    this.gateway.holdInflight(bytes);
    if (this.inflightBytes > this.gateway.settings.maxInflightBytes) this.pauseReading();
    return () => {
      this.inflightBytes -= bytes;
      this.gateway.releaseInflight(bytes);
      this.resumeReading();
    };
  }

  pauseReading(): void {
    this.socket?.pause();
  }

  /** Reads the socket again once this connection is under its budget and the gateway reads sockets. */
  resumeReading(): void {
    if (this.inflightBytes <= this.gateway.settings.maxInflightBytes && !this.gateway.readingThrottled && this.socket?.isPaused) this.socket.resume();
  }

  /**
   * One ProtocolMessage from the client (`size`: its frame's bytes; `refusal`: why its content is
   * refused, answered as a NACK for a publish or presence change). Never throws: every problem is
   * answered on the wire.
   */
  handle(pm: ProtocolMessage, size = 0, refusal?: ServiceError): void {
    if (refusal && pm.action !== Action.MESSAGE && pm.action !== Action.PRESENCE) return this.gateway.fail(this, toWireError(refusal));
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
          this.gateway.logger.error({ err, connectionId: this.id }, 'realtime attach failed');
          this.channelError(pm.channel, toWireError(err));
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
        return this.gateway.closeConnection(this);
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
    this.gateway.fail(this, serviceError('protocolError', `${action} needs a channel (a string)`));
    return false;
  }

  private channelError(channel: unknown, error: WireError): void {
    if (typeof channel === 'string') this.send({ action: Action.ERROR, channel, error });
  }

  /** The channel a ProtocolMessage names, checked. */
  private channelOf(pm: ProtocolMessage): string {
    if (typeof pm.channel !== 'string') throw new ServiceError('invalidChannelName', 'the ProtocolMessage names no channel');
    return checkChannelName(pm.channel);
  }

  // ---- attach and detach (REALTIME-PROTOCOL.md §4)

  /** Modes the credentials allow on a channel, within the requested ones (all four when none asked). */
  private modesFor(channel: string, requested: number | undefined): number {
    const cap = this.credentials.capability;
    let granted = 0;
    const meta = isMetachannel(channel);
    if (permits(cap, channel, 'subscribe')) granted |= Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE;
    if (!meta && permits(cap, channel, 'publish')) granted |= Flag.PUBLISH;
    if (!meta && permits(cap, channel, 'presence')) granted |= Flag.PRESENCE | Flag.PRESENCE_SUBSCRIBE;
    const asked = requested === undefined ? MODES : requested & MODES;
    return granted & (asked === 0 ? MODES : asked);
  }

  private async attach(pm: ProtocolMessage): Promise<void> {
    let channel: string;
    try {
      channel = this.channelOf(pm);
    } catch (err) {
      return this.channelError(pm.channel, toWireError(err));
    }
    if (!this.attachments.has(channel) && this.attachments.size >= this.gateway.settings.maxChannelsPerConnection) {
      return this.channelError(channel, serviceError('tooManyChannels', `a connection may attach at most ${this.gateway.settings.maxChannelsPerConnection} channels`));
    }
    const modes = this.modesFor(channel, typeof pm.flags === 'number' ? pm.flags : undefined);
    if (modes === 0) {
      return this.channelError(channel, serviceError('capabilityDenied', `the credentials allow no operation on channel "${channel}"`));
    }
    const params = pm.params && typeof pm.params === 'object' ? pm.params : undefined;
    const serial = typeof pm.channelSerial === 'string' ? pm.channelSerial : undefined;
    let rewind: Rewind | undefined;
    try {
      rewind = parseRewind(params && Object.hasOwn(params, 'rewind') ? (params as Record<string, unknown>).rewind : undefined);
    } catch (err) {
      return this.channelError(channel, toWireError(err));
    }
    // A re-attach (ATTACH_RESUME, or a channelSerial to go on from) is not rewound again (§4).
    const clean = serial === undefined && !(typeof pm.flags === 'number' && pm.flags & Flag.ATTACH_RESUME);
    // A fresh attach starts where delivery is: after this instance's own messages, once it passed
    // them. A resume goes on from the client's position, which they do not move.
    const delivered = serial === undefined ? this.gateway.ownMessagesDelivered(this.appId, channel) : undefined;
    if (delivered) {
      const ticket = {};
      const socket = this.socket;
      this.attaching.set(channel, ticket);
      const caughtUp = await delivered;
      // Detached, attached again, or the socket gone meanwhile: this ATTACH is answered no more.
      if (this.attaching.get(channel) !== ticket || this.socket !== socket) return;
      this.attaching.delete(channel);
      if (!caughtUp) this.gateway.logger.warn({ connectionId: this.id, channel }, 'attached before delivery passed the messages this instance acknowledged: it lags');
    }
    await this.gateway.attach(this, channel, modes, serial, params, clean ? rewind : undefined);
  }

  private detach(channel: string): void {
    this.attaching.delete(channel);
    this.gateway.detach(this, channel);
    if (this.presenceChannels.delete(channel)) this.gateway.leaveAll(this, channel);
    this.send({ action: Action.DETACHED, channel });
  }

  /** A client asks for the presence set again (§5.4): it gets the whole set. */
  private resync(channel: string): void {
    const attachment = this.attachments.get(channel);
    if (attachment) this.gateway.sendSync(attachment);
  }

  // ---- AUTH (§7.3)

  private reauthenticate(pm: ProtocolMessage): void {
    const token = pm.auth?.accessToken;
    let credentials: Credentials;
    try {
      if (typeof token !== 'string' || token.length === 0) throw new ServiceError('invalidCredentials', 'AUTH carries no accessToken');
      credentials = this.gateway.authenticateToken(token);
    } catch (err) {
      return this.gateway.fail(this, toWireError(err));
    }
    if (credentials.app.appId !== this.appId) {
      return this.gateway.fail(this, serviceError('incompatibleCredentials', 'the new token is for another app'));
    }
    const clientId = credentials.clientId;
    if (this.clientId !== undefined && this.clientId !== '*' && clientId !== this.clientId) {
      return this.gateway.fail(this, serviceError('incompatibleCredentials', `the new token's clientId does not match the connection's ("${this.clientId}")`));
    }
    this.credentials = credentials;
    if (this.clientId === undefined || this.clientId === '*') this.clientId = clientId ?? this.clientId;
    // Channels the new capability no longer allows fail; the others stay attached (RTC8a1).
    for (const [channel, attachment] of [...this.attachments]) {
      const modes = this.modesFor(channel, undefined) & attachment.modes;
      if (modes === 0) {
        this.gateway.detach(this, channel);
        this.channelError(channel, serviceError('capabilityDenied', `the new token allows no operation on channel "${channel}"`));
      } else {
        attachment.modes = modes;
      }
    }
    this.sendConnected();
  }

  // ---- publish and presence, acknowledged in msgSerial order (§3.2)

  private ackable(pm: ProtocolMessage, size: number, refusal: ServiceError | undefined): void {
    const msgSerial = pm.msgSerial;
    if (typeof msgSerial !== 'number' || !Number.isSafeInteger(msgSerial) || msgSerial < 0) {
      return this.gateway.fail(this, serviceError('protocolError', `a ${pm.action === Action.MESSAGE ? 'MESSAGE' : 'PRESENCE'} needs a msgSerial`));
    }
    const pending: PendingAck = { msgSerial };
    this.acks.push(pending);
    const release = this.hold(size);
    const done = (result: PendingAck['result']): void => {
      release();
      pending.result = result;
      this.flushAcks();
    };
    const fail = (err: unknown): void => {
      if (!(err instanceof ServiceError)) this.gateway.logger.error({ err, connectionId: this.id }, 'realtime publish failed');
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

  /** Sends every ACK and NACK now due, in order; consecutive ACKs go as one. */
  private flushAcks(): void {
    while (this.acks.length > 0 && this.acks[0].result) {
      const first = this.acks.shift()!;
      const result = first.result!;
      if (!result.ok) {
        this.send({ action: Action.NACK, msgSerial: first.msgSerial, count: 1, error: result.error });
        continue;
      }
      const res = [{ serials: result.serials }];
      let next = first.msgSerial + 1;
      while (this.acks.length > 0 && this.acks[0].result?.ok && this.acks[0].msgSerial === next) {
        const r = this.acks.shift()!.result as { ok: true; serials: (string | null)[] };
        res.push({ serials: r.serials });
        next++;
      }
      this.send({ action: Action.ACK, msgSerial: first.msgSerial, count: res.length, res });
    }
  }

  private async publish(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    const channel = this.channelOf(pm);
    if (isMetachannel(channel)) throw new ServiceError('capabilityDenied', `publishing is never possible on a metachannel ("${channel}")`);
    if (!permits(this.credentials.capability, channel, 'publish')) {
      throw new ServiceError('capabilityDenied', `the credentials lack the "publish" capability on channel "${channel}"`);
    }
    if (!Array.isArray(pm.messages) || pm.messages.length === 0) throw new ServiceError('invalidRequestBody', 'a MESSAGE needs a non-empty messages array');
    // Ids the client left out are `connectionId:msgSerial:index`, as the platform assigns them: a
    // MESSAGE the SDK sends again after a resume has the same ids, so the idempotent-publish rule
    // drops the repeat wherever it lands.
    const raw = pm.messages.map((m, index) => {
      if (typeof m !== 'object' || m === null || Array.isArray(m)) return m;
      const item = { ...(m as Record<string, unknown>) };
      delete item.connectionKey;
      if (item.id === undefined || item.id === null) item.id = `${this.id}:${msgSerial}:${index}`;
      return item;
    });
    const messages = parsePublishBody(raw, this.gateway.limits, this.clientId);
    for (const m of messages) m.connectionId = this.id;
    await this.gateway.publisher.publish(this.appId, channel, messages, 'realtime', this.credentials.keyName);
    return messages.map((m) => m.id);
  }

  private async presence(pm: ProtocolMessage, msgSerial: number): Promise<(string | null)[]> {
    const channel = this.channelOf(pm);
    if (isMetachannel(channel)) throw new ServiceError('capabilityDenied', `presence is never possible on a metachannel ("${channel}")`);
    if (!permits(this.credentials.capability, channel, 'presence')) {
      throw new ServiceError('capabilityDenied', `the credentials lack the "presence" capability on channel "${channel}"`);
    }
    if (!Array.isArray(pm.presence) || pm.presence.length === 0) throw new ServiceError('invalidRequestBody', 'a PRESENCE needs a non-empty presence array');
    const limits = this.gateway.limits;
    if (pm.presence.length > limits.maxMessagesPerPublish) throw new ServiceError('tooManyMessages', `a PRESENCE may hold at most ${limits.maxMessagesPerPublish} changes`);
    const changes: PresenceChange[] = [];
    const ids: (string | null)[] = [];
    pm.presence.forEach((value, index) => {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ServiceError('invalidRequestBody', `presence message ${index} is not an object`);
      const item = value as Record<string, unknown>;
      // Only a number indexes the table: an object as a key throws when made a string, and
      // "__proto__" or "constructor" found Object.prototype's own members.
      const action = typeof item.action === 'number' ? PRESENCE_ACTIONS[item.action] : undefined;
      if (!action) throw new ServiceError('invalidRequestBody', `presence message ${index}: action must be 2 (enter), 3 (leave) or 4 (update)`);
      const clientId = this.presenceClientId(item.clientId, index);
      const id = typeof item.id === 'string' && item.id.length > 0 && item.id.length <= 256 ? item.id : `${this.id}:${msgSerial}:${index}`;
      const change: PresenceChange = { action, id, clientId, connectionId: this.id, instanceId: this.gateway.instanceId };
      if (item.data !== undefined && item.data !== null) {
        const d = item.data;
        if (!(typeof d === 'string' || d instanceof Uint8Array || (typeof d === 'object' && wellFormed(d, limits.maxDataDepth)))) {
          throw new ServiceError('invalidDataOrEncoding', `presence message ${index}: data must be a string, a JSON object or array, or bytes, nested at most ${limits.maxDataDepth} levels`);
        }
        change.data = d as MessageData;
      }
      if (typeof item.encoding === 'string' && item.encoding !== '') change.encoding = item.encoding;
      if (item.extras !== undefined && item.extras !== null) {
        if (typeof item.extras !== 'object' || Array.isArray(item.extras) || !wellFormed(item.extras, limits.maxDataDepth)) {
          throw new ServiceError('invalidExtras', `presence message ${index}: extras must be an object nested at most ${limits.maxDataDepth} levels`);
        }
        change.extras = item.extras as Record<string, unknown>;
      }
      const size = messageSize({ id, timestamp: 0, data: change.data, encoding: change.encoding, clientId, extras: change.extras });
      if (size > limits.maxMessageSize) throw new ServiceError('messageTooLarge', `presence message ${index} is ${size} bytes; the maximum is ${limits.maxMessageSize}`);
      ids.push(id);
      // An automatic re-enter (§5.6) of a member present with the same id changes nothing.
      if (action === 'enter' && this.gateway.isPresentWithId(this.appId, channel, clientId, this.id, id)) return;
      changes.push(change);
    });
    const joining = this.countMembers(channel, changes);
    if (changes.some((c) => c.action !== 'leave')) this.presenceChannels.add(channel);
    if (changes.length === 0) return ids;
    // Counted against the limits until the presence projection applies them (PresenceReservations).
    const reservations = this.gateway.reservations;
    const reserved = reservations.reserve(this.appId, channel, this.id, joining, this.gateway.clock.now());
    let positions;
    try {
      positions = await this.gateway.presenceProducer.append(this.appId, channel, changes);
    } catch (err) {
      reservations.release(reserved);
      throw err;
    }
    // The ACK follows the change's own PRESENCE: a presence.get() once enter() resolves has it.
    await this.gateway.presenceApplied(positions);
    return ids;
  }

  /**
   * Bounds the members this connection holds (maxMembersPerConnection, 91003) and the channels it
   * holds them on (maxChannelsPerConnection, 90010): each member costs memory in the presence
   * projection as long as the connection lives. Channels whose members the gateway made leave (a
   * detach, a drop, the connection forgotten) are out of presenceChannels and stop counting.
   */
  private countMembers(channel: string, changes: PresenceChange[]): Set<string> {
    const { maxMembersPerConnection, maxChannelsPerConnection } = this.gateway.settings;
    for (const [held, clientIds] of this.entered) {
      if (this.presenceChannels.has(held)) continue;
      this.enteredCount -= clientIds.size;
      this.entered.delete(held);
    }
    const clientIds = this.entered.get(channel) ?? new Set<string>();
    const joining = new Set(changes.filter((c) => c.action !== 'leave' && !clientIds.has(c.clientId ?? '')).map((c) => c.clientId ?? ''));
    if (joining.size > 0 && clientIds.size === 0 && this.entered.size >= maxChannelsPerConnection) {
      throw new ServiceError('tooManyChannels', `a connection may hold presence members on at most ${maxChannelsPerConnection} channels`);
    }
    if (this.enteredCount + joining.size > maxMembersPerConnection) {
      throw new ServiceError('tooManyPresenceMembers', `a connection may hold at most ${maxMembersPerConnection} presence members; this one holds ${this.enteredCount}`);
    }
    // Every instance holds every member in its presence projection: bounded for the service, and
    // per app so that one app's members cannot refuse another's. The counts include the members
    // entered here and not yet applied (reserved), so racing enters cannot pass a limit.
    const { maxPresenceMembers, maxPresenceMembersPerApp } = this.gateway.settings;
    if (joining.size > 0 && this.gateway.presenceMembers() + joining.size > maxPresenceMembers) {
      throw new ServiceError('tooManyPresenceMembers', `the service holds its maximum of ${maxPresenceMembers} presence members; retry once some have left`);
    }
    if (joining.size > 0 && this.gateway.presenceMembers(this.appId) + joining.size > maxPresenceMembersPerApp) {
      throw new ServiceError('tooManyPresenceMembers', `this app has its maximum of ${maxPresenceMembersPerApp} presence members; retry once some have left`);
    }
    for (const { action, clientId = '' } of changes) {
      if (action === 'leave') {
        if (clientIds.delete(clientId)) this.enteredCount--;
      } else if (!clientIds.has(clientId)) {
        clientIds.add(clientId);
        this.enteredCount++;
      }
    }
    if (clientIds.size > 0) this.entered.set(channel, clientIds);
    else this.entered.delete(channel);
    return joining;
  }

  /**
   * Whose presence an item changes: the connection's identity, or the one it names if the
   * connection may act for anyone (a key, or a token for clientId `*`; an anonymous token may not).
   */
  private presenceClientId(given: unknown, index: number): string {
    const anyone = this.clientId === '*' || (this.clientId === undefined && this.credentials.method === 'basic');
    if (given !== undefined && given !== null) {
      if (typeof given !== 'string' || given.length === 0 || given === '*') {
        throw new ServiceError('invalidClientId', `presence message ${index}: clientId must be a non-empty string other than "*"`);
      }
      if (!anyone && given !== this.clientId) {
        const own = this.clientId === undefined ? 'has no clientId' : `is "${this.clientId}"`;
        throw new ServiceError('invalidClientId', `presence message ${index}: clientId "${given}" is not this connection's, whose clientId ${own}`);
      }
      return given;
    }
    if (this.clientId === undefined || this.clientId === '*') {
      throw new ServiceError('presenceWithoutClientId', 'cannot enter presence without a clientId: connect with one, or use enterClient');
    }
    return this.clientId;
  }
}
