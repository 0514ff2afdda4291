import type { Capability } from '../auth/capability.js';
import type { Credentials } from '../auth/credentials.js';
import { Action, encodeFrame, serviceError, type Frame, type ProtocolMessage, type WireError, type WireFormat } from './protocol.js';
import type { Attachment, Subscriber } from './attachment.js';
import type { ConnectionContext, PeerSocket } from './context.js';
import { canMove, endsForGood, type ConnectionState, type EndReason } from './connection-state.js';

/** How long the socket of a client sent away (over its budget, a fatal error) stays, unread, for its last frames to go out. */
const HANG_UP_LINGER_MS = 1000;

const isTokenError = (code: number): boolean => code >= 40140 && code < 40150;

/** Who a connection acts as, and how it speaks: set when it opens and on each resume. */
export interface ConnectionIdentity {
  credentials: Credentials;
  /** A clientId, `*` (any) or undefined (anonymous). */
  clientId: string | undefined;
  format: WireFormat;
  /** Whether it gets its own messages back. */
  echo: boolean;
  /** The address its socket came from (its origin's, flood-cooldown.ts), when the transport knows it. */
  address?: string;
}

/**
 * A connection's life (the Connection's base): its state and the moves of the state table
 * (connection-state.ts: open, dropped and resumable, ended), the timers of a dropped one, its
 * socket and what it sends on it. It outlives its socket for connectionStateTtl so that a client
 * that lost its socket can resume it; what it missed meanwhile is replayed from the log when it
 * re-attaches. It asks everything else of its context (context.ts).
 */
export class ConnectionLife implements Subscriber {
  readonly attachments = new Map<string, Attachment>();
  private current: ConnectionState = 'open';
  protected socket: PeerSocket | undefined;
  protected epoch = 0;
  protected identity: ConnectionIdentity;
  private lastSent = 0;
  protected lastReceived = 0;
  /** Set while dropped: when the members leave, and when the connection ends. */
  private dropTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  private tokenTimer: NodeJS.Timeout | undefined;
  /** When the connection is asked to renew its token in-band (AUTH, tokenRenewLeadMs before it expires). */
  private renewTimer: NodeJS.Timeout | undefined;
  /** The expiry an AUTH was sent for: an AUTH answered with the same token is not asked again. */
  private renewAskedFor: number | undefined;
  /** Channels where this connection entered presence: their members leave when it goes. */
  protected readonly presenceChannels = new Set<string>();

  constructor(
    protected readonly ctx: ConnectionContext,
    readonly id: string,
    /** The connectionKey a client resumes with. */
    readonly key: string,
    identity: ConnectionIdentity,
    socket: PeerSocket,
  ) {
    this.identity = identity;
    this.openOn(socket);
  }

  get state(): ConnectionState {
    return this.current;
  }
  get appId(): string {
    return this.identity.credentials.app.appId;
  }
  get credentials(): Credentials {
    return this.identity.credentials;
  }
  get clientId(): string | undefined {
    return this.identity.clientId;
  }
  get format(): WireFormat {
    return this.identity.format;
  }
  get echo(): boolean {
    return this.identity.echo;
  }
  get socketEpoch(): number {
    return this.epoch;
  }
  get bufferedAmount(): number {
    return this.socket?.bufferedAmount ?? 0;
  }
  /** Whether `socket` is this connection's now (a socket it let go of is closing: what comes on it is not acted on). */
  holds(socket: PeerSocket): boolean {
    return this.socket === socket;
  }

  private move(to: ConnectionState): void {
    if (!canMove(this.current, to)) throw new Error(`connection ${this.id}: no move from ${this.current} to ${to}`);
    this.current = to;
  }

  private openOn(socket: PeerSocket): void {
    this.move('open');
    this.socket = socket;
    this.epoch++;
    this.lastReceived = this.ctx.clock.now();
    if (this.ctx.readingThrottled) socket.pause();
  }

  /**
   * A resume on a new socket (open or dropped): the old socket, if any, goes; the connection keeps
   * its id, ACK order and members, and takes the new identity (renewed credentials, format).
   */
  resume(socket: PeerSocket, identity: ConnectionIdentity): void {
    if (this.socket) this.detachSocket(true);
    clearTimeout(this.dropTimer);
    clearTimeout(this.expiryTimer);
    this.dropTimer = this.expiryTimer = undefined;
    this.identity = identity;
    this.openOn(socket);
  }

  /** Channels where this connection has members already (resumed from another instance): they leave when it goes. */
  holdsPresenceOn(channels: Iterable<string>): void {
    for (const channel of channels) this.presenceChannels.add(channel);
  }

  /** A pong on `from`. */
  heard(from: PeerSocket): void {
    if (this.socket === from) this.lastReceived = this.ctx.clock.now();
  }

  /** `from` closed: if it was this connection's socket, the connection is dropped and may resume. */
  socketClosed(from: PeerSocket): void {
    if (this.socket === from) this.lostSocket();
  }

  /** Once a second (the gateway's tick): a HEARTBEAT where the gateway was silent, a ping where the client was, a dead socket closed (§6.1). */
  housekeep(now: number): void {
    const socket = this.socket;
    if (!socket || socket.readyState !== socket.OPEN) return;
    const idle = this.ctx.settings.maxIdleIntervalMs;
    // A socket not being read (its publishes wait for the log) is not the client's silence.
    if (socket.isPaused) this.lastReceived = now;
    else if (now - this.lastReceived > 2 * idle + 10_000) {
      this.ctx.logger.debug({ connectionId: this.id }, 'realtime client silent; socket closed');
      socket.terminate();
      return;
    }
    if (now - this.lastSent >= idle) this.send({ action: Action.HEARTBEAT });
    if (now - this.lastReceived >= idle) socket.ping();
  }

  pauseReading(): void {
    this.socket?.pause();
  }


  /** Sends a frame now (true); a client that does not read is disconnected instead of buffered for. */
  sendFrame(frame: Frame, written?: (err?: Error) => void): boolean {
    const socket = this.socket;
    if (!socket || socket.readyState !== socket.OPEN) return false;
    if (socket.bufferedAmount > this.ctx.settings.maxBufferedBytes) {
      this.slowConsumer();
      return false;
    }
    this.lastSent = this.ctx.clock.now();
    socket.send(frame, written);
    return true;
  }

  /** Encodes and sends a frame; `written`, when given, is called once it is written out (or failed). */
  send(pm: ProtocolMessage, written?: (err?: Error) => void): boolean {
    return this.sendFrame(encodeFrame(pm, this.format), written);
  }

  /** CONNECTED, for a new connection, a resume, or an AUTH that renewed the credentials. */
  sendConnected(error?: WireError): void {
    const s = this.ctx.settings;
    const details: Record<string, unknown> = {
      connectionKey: this.key,
      connectionStateTtl: s.connectionStateTtlMs,
      maxIdleInterval: s.maxIdleIntervalMs,
      maxMessageSize: this.ctx.limits.maxMessageSize,
      maxFrameSize: s.maxFrameBytes,
      maxInboundRate: s.maxInboundRate,
      serverId: this.ctx.instanceId,
    };
    if (this.clientId !== undefined) details.clientId = this.clientId;
    const pm: ProtocolMessage = { action: Action.CONNECTED, connectionId: this.id, connectionDetails: details };
    if (error) pm.error = error;
    this.send(pm);
    this.scheduleTokenExpiry();
  }

  /**
   * A token's end: tokenRenewLeadMs before it, an AUTH asks the client to renew in-band (§7.3: the
   * SDK gets a new token and sends AUTH back, which moves the expiry); at it, the client is told
   * to renew (40142) and may resume with a new one. A token with less than twice the lead left is
   * asked at half of what it has left. Not for basic auth: an AUTH would make the SDK
   * switch to token auth.
   */
  private scheduleTokenExpiry(): void {
    clearTimeout(this.tokenTimer);
    clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
    const expires = this.credentials.expires;
    if (expires === undefined) return;
    const lead = this.ctx.settings.tokenRenewLeadMs;
    if (lead > 0 && this.credentials.method === 'token' && this.renewAskedFor !== expires) {
      // A token that lives less than twice the lead is asked at half its remaining life: at once,
      // its renewal would be asked at once again, and so on.
      const left = Math.max(0, expires - this.ctx.clock.now());
      const renewIn = Math.max(left - lead, Math.floor(left / 2));
      // Beyond setTimeout's 2^31-1 ms: the expiry timer below schedules again before then.
      if (renewIn < 2 ** 31 - 1) {
        this.renewTimer = setTimeout(() => {
          this.renewTimer = undefined;
          if (this.credentials.expires !== expires || this.current !== 'open') return;
          this.renewAskedFor = expires;
          this.send({ action: Action.AUTH });
        }, renewIn);
        this.renewTimer.unref();
      }
    }
    const delay = Math.max(0, expires - this.ctx.clock.now());
    // setTimeout holds at most 2^31-1 ms; a later expiry is checked again then.
    this.tokenTimer = setTimeout(() => {
      if (this.credentials.expires !== expires) return;
      if (expires > this.ctx.clock.now()) return this.scheduleTokenExpiry();
      this.disconnect(serviceError('tokenExpired', 'token expired; renew it and resume'));
    }, Math.min(delay, 2 ** 31 - 1));
    this.tokenTimer.unref();
  }

  // ---- the state's moves (connection-state.ts)

  /** A problem the client must act on (a token to renew): DISCONNECTED, and it may resume. */
  disconnect(error: WireError): void {
    this.send({ action: Action.DISCONNECTED, error });
    this.lostSocket();
  }

  /** A fatal problem: ERROR without a channel ends the connection (the SDK goes `failed`). */
  fail(error: WireError): void {
    if (isTokenError(error.code)) return this.disconnect(error);
    const socket = this.socket;
    this.send({ action: Action.ERROR, error });
    this.end('failed');
    if (socket) hangUp(socket);
  }

  /**
   * A client that does not read what it is sent is cut off rather than buffered for without
   * bound (its socket already holds maxBufferedBytes); it resumes, and the log replays what it missed.
   * DISCONNECTED 80020 goes behind what it has not read, then the close: nothing more is queued,
   * a client that reads again learns why, and ws destroys the socket of one that never does when
   * the close handshake times out (30 s).
   */
  slowConsumer(): void {
    const socket = this.socket;
    this.ctx.count('slowConsumers');
    this.ctx.logger.warn({ connectionId: this.id, buffered: socket?.bufferedAmount }, 'realtime client not reading; disconnected');
    const error = serviceError('deliveryRateExceeded', `the connection did not read what it was sent (more than ${this.ctx.settings.maxBufferedBytes} bytes waiting); resume to get the rest`);
    if (socket && socket.readyState === socket.OPEN) socket.send(encodeFrame({ action: Action.DISCONNECTED, error }, this.format));
    this.lostSocket();
  }

  /** open -> dropped: the socket is gone; members leave after presenceDropMs, the connection ends after connectionStateTtl. */
  protected lostSocket(terminate = false): void {
    this.detachSocket(terminate);
    if (this.current !== 'open') return;
    this.move('dropped');
    const { presenceDropMs, connectionStateTtlMs } = this.ctx.settings;
    this.dropTimer = setTimeout(() => this.leavePresence(), presenceDropMs);
    this.dropTimer.unref();
    this.expiryTimer = setTimeout(() => this.end('expired'), Math.max(connectionStateTtlMs, presenceDropMs));
    this.expiryTimer.unref();
    this.ctx.dropped(this.id);
  }

  /** -> ended. CLOSE, a fatal error, expiry and eviction make its members leave and the registry forget it. */
  end(reason: EndReason): void {
    if (this.current === 'ended') return;
    clearTimeout(this.tokenTimer);
    clearTimeout(this.dropTimer);
    clearTimeout(this.expiryTimer);
    clearTimeout(this.renewTimer);
    this.dropTimer = this.expiryTimer = this.tokenTimer = this.renewTimer = undefined;
    if (reason === 'shutdown') this.send({ action: Action.DISCONNECTED, error: serviceError('serviceShuttingDown', 'the service is restarting; reconnect') });
    this.move('ended');
    if (endsForGood(reason)) {
      this.ctx.ended(this.id);
      this.leavePresence();
    }
    this.detachSocket(reason === 'movedAway');
  }

  private leavePresence(): void {
    for (const channel of this.presenceChannels) this.ctx.leave(this.appId, channel, this.id);
    this.presenceChannels.clear();
  }

  /** Takes the connection off its socket: its attachments stop (a resume attaches again and replays). */
  private detachSocket(terminate = false): void {
    for (const channel of [...this.attachments.keys()]) this.ctx.detach(this, channel);
    const socket = this.socket;
    this.socket = undefined;
    if (!socket) return;
    this.epoch++;
    if (terminate) socket.terminate();
    else if (socket.readyState === socket.OPEN) socket.close(1000);
  }

  // ---- revocation and key changes (the registry's)

  /** The key's new capability, for what the connection does next (attachments made stay). */
  takeCapability(capability: Capability): void {
    this.identity = { ...this.identity, credentials: { ...this.credentials, capability } };
  }
}

/**
 * A socket whose client is being sent away for what it sent: not read any more (a flood goes on
 * arriving during the close handshake, and reading 1 MB frames that are dropped unread still
 * cost their unmasking and UTF-8 checks), so the client's answer to the close is never seen and
 * the socket goes once the last frames are out.
 */
export function hangUp(socket: PeerSocket): void {
  socket.pause();
  setTimeout(() => socket.terminate(), HANG_UP_LINGER_MS).unref();
}
