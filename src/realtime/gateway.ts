import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from 'pino';
import { ServiceError } from '../errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import type { Log, LogPosition, LogRecord, Subscription } from '../log/port.js';
import { AppliedPositions, positionsAfter } from '../log/applied-positions.js';
import type { OwnWrites } from '../log/own-writes.js';
import { Topics } from '../log/port.js';
import { partitionFor } from '../log/partitioner.js';
import { channelKey, decodeEvent, type MessagesPublished } from '../log/events.js';
import type { Publisher } from '../messages/publisher.js';
import { dataSize, isAssignedId, type StoredMessage } from '../messages/message.js';
import { messageToWire } from '../messages/wire.js';
import type { PresenceProducer } from '../presence/presence-producer.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { PresenceMember, PresenceProjection } from '../../projections/presence/presence-projection.js';
import type { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryEntry } from '../../projections/history/history-entry.js';
import type { UsageMeter } from '../stats/usage-meter.js';
import { Connection } from './connection.js';
import { connectionIdOf, connectionKeyFor, newConnectionId, verifyConnectionKey } from './connection-key.js';
import { Action, Flag, FrameRefused, decodeFrame, encodeFrame, serviceError, toWireError, type Frame, type ProtocolMessage, type WireError, type WireFormat } from './protocol.js';
import type { RealtimeSettings } from './settings.js';
import type { ShapeLimits } from '../codec/value-shape.js';
import { PresenceReservations } from './presence-reservations.js';
import { upgradedConnection } from '../http/connection-limit.js';
import { pairDigest, RecentKeys } from '../recent-keys.js';
import { MAX_REWIND_MS, type Rewind } from './rewind.js';
import type { ConnectionEvents } from './connection-events.js';
import type { RealtimeNumbers } from '../metrics/metrics.js';

export interface GatewayDeps {
  authenticator: Authenticator;
  apps: AppRegistry;
  publisher: Publisher;
  presenceProducer: PresenceProducer;
  presence: PresenceProjection;
  /** Recent messages for `rewind` (the history projection). */
  history: Pick<HistoryProjection, 'applied' | 'query'>;
  log: Log;
  clock: Clock;
  limits: Limits;
  settings: RealtimeSettings;
  instanceId: string;
  logger: Logger;
  usage?: UsageMeter;
  /** Names the delivery consumer (the Kafka adapter makes a consumer group of it). */
  consumerName: string;
  /** Connection events on the log: resumes on other instances, instances that died. */
  events: ConnectionEvents;
  /** What this instance appended: an attach waits for delivery to pass it (README: Consistency of reads). */
  ownWrites?: Pick<OwnWrites, 'of'>;
}

/** One connection's attachment to one channel. */
export interface Attachment {
  conn: Connection;
  channel: string;
  /** The log key of the channel's events (appId:channel). */
  recordKey: string;
  partition: number;
  modes: number;
  /**
   * The client's own position in the channel's partition when it is ahead of this instance's
   * delivery (a resume on an instance whose consumer lags the one it came from): records before it
   * reached the client already and are not sent again.
   */
  from: number;
  /** Deliveries that came while the attachment's backlog was read from the log, sent after it. */
  held?: (() => void)[];
  overflowed?: boolean;
  /** The SYNC being sent to this attachment, page by page (sendSyncPages). */
  sync?: object;
}

/** How long a delivered client-supplied id is remembered: the idempotency window of history's tail. */
const DELIVERED_IDS_WINDOW_MS = 120_000;

/** How long an attach with `rewind` waits for the history projection to reach its position. */
const REWIND_WAIT_MS = 5_000;

/** How long the socket of a client sent away (over its budget, a fatal error) stays, unread, for its last frames to go out. */
const HANG_UP_LINGER_MS = 1000;

/** How long a presence enter counts as reserved without the projection applying it (see PresenceReservations). */
const RESERVATION_MAX_AGE_MS = 60_000;

/** Bytes a socket may hold unwritten before the next SYNC page waits for them to be written. */
const SYNC_HIGH_WATER_BYTES = 256 * 1024;

/** Housekeeping ticks per second, each visiting that share of the connections. */
const TICK_SLICES = 20;

interface BacklogRecord {
  event: MessagesPublished;
  offset: number;
}

/** At most `n` holders at once; the others wait in order. */
class Slots {
  private readonly waiting: (() => void)[] = [];
  constructor(private free: number) {}

  take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/** A channel position: everything in the channel's partition before `offset` was delivered. */
const serialOf = (partition: number, offset: number): string => `${partition}:${offset}`;

function parseSerial(serial: string, partition: number): number | undefined {
  const m = /^(\d+):(\d+)$/.exec(serial);
  if (!m || Number(m[1]) !== partition) return undefined;
  const offset = Number(m[2]);
  return Number.isSafeInteger(offset) ? offset : undefined;
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const isTokenError = (code: number): boolean => code >= 40140 && code < 40150;

/** A log record's messages as a MESSAGE frame, encoded at most once per format however many receive it. */
class OutgoingMessages {
  private json?: Frame;
  private msgpack?: Frame;
  readonly connectionId: string | undefined;

  constructor(
    readonly event: MessagesPublished,
    /** The record's offset in its partition. */
    readonly offset: number,
    readonly channelSerial: string,
  ) {
    this.connectionId = event.messages[0]?.connectionId;
  }

  frame(format: WireFormat): Frame {
    if (format === 'json') return (this.json ??= this.build('json'));
    return (this.msgpack ??= this.build('msgpack'));
  }

  /** Payload bytes of the messages, for stats (counted once however many receive them). */
  get data(): number {
    return (this.bytes ??= sizeOf(this.event.messages));
  }
  private bytes?: number;

  private build(format: WireFormat): Frame {
    const e = this.event;
    return encodeFrame({ action: Action.MESSAGE, channel: e.channel, channelSerial: this.channelSerial, messages: e.messages.map((m) => messageToWire(m, format)) }, format);
  }
}

const sizeOf = (items: readonly { data?: StoredMessage['data']; encoding?: string }[]): number => items.reduce((n, m) => n + dataSize(m.data, m.encoding), 0);

function presenceToWire(m: StoredMessage | PresenceMember, format: WireFormat, action?: number): Record<string, unknown> {
  const wire = messageToWire(m as StoredMessage, format);
  if (action !== undefined) wire.action = action;
  return wire;
}

/**
 * The realtime gateway (ARCHITECTURE: The realtime gateway): WebSocket connections on the REST
 * port, speaking the SDK's realtime protocol. Publishes and presence changes go to the log like
 * REST's; delivery is one more consumer of the log, sending each record to the connections
 * attached to its channel here, in log order, whichever instance or route appended it.
 */
export class Gateway {
  readonly settings: RealtimeSettings;
  readonly limits: Limits;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly instanceId: string;
  readonly publisher: Publisher;
  readonly presenceProducer: PresenceProducer;
  private readonly connections = new Map<string, Connection>();
  /** Connections that ended for good, here or on another instance: a resume of one fails (80008). */
  private readonly ended: RecentKeys<true>;
  /** Connections without a socket, waiting for a resume, the one dropped longest ago first. */
  private readonly waiting = new Set<Connection>();
  /** Attachments by channel log key. */
  private readonly index = new Map<string, Set<Attachment>>();
  /** Client-supplied message ids delivered lately, per channel (digests): repeats are not delivered again. */
  private readonly deliveredIds: RecentKeys<number>;
  /** Next offset of the messages topic to deliver, per partition. */
  private delivered: number[] = [];
  /** `delivered`, for waits (ownMessagesDelivered). */
  private readonly deliveryProgress = new AppliedPositions();
  private partitions = 1;
  private sockets = 0;
  private subscription: Subscription | undefined;
  private readonly wss: WebSocketServer;
  private ticker: NodeJS.Timeout | undefined;
  /** Where housekeeping goes on at the next tick (a Map iterator sees entries added meanwhile). */
  private tickCursor: IterableIterator<Connection> = new Map<string, Connection>().values();
  private closing = false;
  /** Ends delivery's subscription to the presence projection's changes. */
  private unsubscribePresence: (() => void) | undefined;
  private readonly replaySlots = new Slots(4);
  /** Presence members entered here that the presence projection has not applied yet. */
  readonly reservations = new PresenceReservations(RESERVATION_MAX_AGE_MS);
  /** Counted for GET /metrics (metrics()). */
  private messagesDelivered = 0;
  private opened = 0;
  private closed = 0;
  private slowConsumers = 0;
  private inboundBudgetDisconnects = 0;
  private framesRefused = 0;
  /** What a client frame may nest and hold, checked before it is decoded. */
  private readonly shape: ShapeLimits;

  constructor(private readonly deps: GatewayDeps) {
    this.settings = deps.settings;
    this.limits = deps.limits;
    this.clock = deps.clock;
    this.logger = deps.logger;
    this.instanceId = deps.instanceId;
    this.publisher = deps.publisher;
    this.presenceProducer = deps.presenceProducer;
    // Kept by count: a client may come back with a key at any time (`recover` from a saved page).
    this.deliveredIds = new RecentKeys(2 * deps.limits.maxRecentIdsPerApp, DELIVERED_IDS_WINDOW_MS, () => this.clock.now());
    this.ended = new RecentKeys(2 * deps.settings.maxEndedConnections, Number.MAX_SAFE_INTEGER, () => this.clock.now());
    this.shape = { maxDepth: deps.settings.maxFrameDepth, maxWidth: deps.settings.maxFrameWidth };
    this.wss = new WebSocketServer({ noServer: true, maxPayload: deps.settings.maxFrameBytes, perMessageDeflate: false, clientTracking: false });
  }

  /** Starts delivering from the log's current end and takes WebSocket upgrades on `server`. */
  async start(server: Server): Promise<void> {
    const { log } = this.deps;
    this.partitions = await log.partitions(Topics.messages);
    const ends = await log.endOffsets(Topics.messages);
    this.delivered = Array.from({ length: this.partitions }, (_, p) => ends.get(p) ?? 0);
    this.subscription = log.consume({
      topic: Topics.messages,
      consumer: this.deps.consumerName,
      from: ends,
      handle: (records) => this.deliverMessages(records),
      onError: (err) => this.logger.error({ err }, 'realtime delivery failed on a batch; retrying'),
    });
    await this.subscription.caughtUp;
    // A resume reads its channel's backlog from the log: the first one should not wait for the
    // reader to start.
    log.prepareReads?.(Topics.messages).catch((err) => this.logger.warn({ err }, 'the log reader for resumes did not start; the first resume starts it'));
    const holders = new Set(this.deps.presence.connectionsHeldBy(() => true).map((c) => c.instanceId));
    await this.deps.events.start(
      {
        movedAway: (connectionId) => {
          const conn = this.connections.get(connectionId);
          if (!conn) return;
          // Resumed on another instance: that one holds it (and its members) now.
          this.connections.delete(connectionId);
          this.waiting.delete(conn);
          conn.clearTimers();
          this.detachSocket(conn, true);
        },
        ended: (connectionId) => this.ended.set(connectionId, true),
        instanceDead: (instanceId) =>
          void this.removeMembersHeldBy((id) => id === instanceId).catch((err) => this.logger.error({ err, instanceId }, 'presence leave for a gone instance failed')),
      },
      holders,
    );
    this.unsubscribePresence = this.deps.presence.onApplied((appId, channel, entries) => this.deliverPresence(appId, channel, entries));
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(server, req, socket, head));
    this.ticker = setInterval(() => this.tick(), 1000 / TICK_SLICES);
    this.ticker.unref();
  }

  /** Bytes of publishes and presence changes not answered yet, all connections together. */
  private inflightTotal = 0;
  /** Over maxTotalInflightBytes: no socket is read until the total is back under three quarters of it. */
  private throttled = false;

  /** Counts a connection's unanswered frame against the total. */
  holdInflight(bytes: number): void {
    this.inflightTotal += bytes;
    if (this.throttled || this.inflightTotal <= this.settings.maxTotalInflightBytes) return;
    // Every socket, not only those with frames in flight: each one read could bring one more frame.
    this.throttled = true;
    this.logger.warn({ inflightBytes: this.inflightTotal }, 'realtime publishes in flight over their total budget; no connection is read until the log catches up');
    for (const conn of this.connections.values()) conn.pauseReading();
  }

  releaseInflight(bytes: number): void {
    this.inflightTotal -= bytes;
    if (!this.throttled || this.inflightTotal > 0.75 * this.settings.maxTotalInflightBytes) return;
    this.throttled = false;
    for (const conn of this.connections.values()) conn.resumeReading();
  }

  /** Whether sockets are not being read because the total in flight went over its budget. */
  get readingThrottled(): boolean {
    return this.throttled;
  }

  /**
   * Presence members of all apps, or of one: in the presence projection (every instance's), and
   * those this instance let enter that it has not applied yet. Enters racing on other instances
   * are seen once applied: the limits may be passed by what they have in flight.
   */
  presenceMembers(appId?: string): number {
    return this.deps.presence.memberCount(appId) + this.reservations.count(appId);
  }

  /**
   * Resolves once the presence projection has applied these changes, so that their PRESENCE
   * messages went to this instance's attachments (and the member set holds them) before the ACK
   * does (README: Consistency of reads). Past limits.readYourWritesMs the ACK goes anyway: the
   * change is durable and applies later.
   */
  async presenceApplied(positions: readonly LogPosition[]): Promise<void> {
    const target = positionsAfter(positions);
    if (await this.deps.presence.progress.until(Topics.presence, target, this.limits.readYourWritesMs)) return;
    this.logger.warn(
      { behind: this.deps.presence.progress.behind(Topics.presence, target), waitedMs: this.limits.readYourWritesMs },
      'presence change acknowledged before this instance applied it: the presence projection lags',
    );
  }

  /** Whether a connection ended for good, here or (as the log says) on another instance. */
  hasEnded(connectionId: string): boolean {
    return this.ended.has(connectionId);
  }

  get connectionCount(): number {
    return this.sockets;
  }

  /** The gateway's numbers for GET /metrics (src/metrics/metrics.ts), read when scraped. */
  metrics(): RealtimeNumbers {
    let attachments = 0;
    for (const set of this.index.values()) attachments += set.size;
    let deliveryLag = 0;
    for (const [p, end] of this.subscription?.highWatermarks() ?? []) deliveryLag += Math.max(0, end - (this.delivered[p] ?? 0));
    return { sockets: this.sockets, connections: this.connections.size, opened: this.opened, closed: this.closed, attachments, delivered: this.messagesDelivered, slowConsumerDisconnects: this.slowConsumers, inboundBudgetDisconnects: this.inboundBudgetDisconnects, framesRefused: this.framesRefused, deliveryLag };
  }

  /** Connections open here (with a socket), per app: the usage meter reads it for stats. */
  connectionsByApp(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const conn of this.connections.values()) if (conn.socket) counts.set(conn.appId, (counts.get(conn.appId) ?? 0) + 1);
    return counts;
  }

  // ---- connecting (REALTIME-PROTOCOL.md §1, §6, §7)

  private upgrade(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      url = new URL('http://localhost/invalid');
    }
    if (url.pathname !== '/' || this.closing) {
      // Destroyed once written, as ws's own refusals are: a client that never closes its end
      // would otherwise hold the socket open.
      socket.once('finish', () => socket.destroy());
      socket.end(`HTTP/1.1 ${this.closing ? '503 Service Unavailable' : '404 Not Found'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      upgradedConnection(server, socket);
      this.accept(ws, url.searchParams);
    });
  }

  private accept(ws: WebSocket, params: URLSearchParams): void {
    const format: WireFormat = params.get('format') === 'msgpack' ? 'msgpack' : 'json';
    ws.binaryType = 'nodebuffer';
    ws.on('error', (err) => this.logger.debug({ err }, 'realtime socket error'));
    this.sockets++;
    ws.once('close', () => this.sockets--);
    // Every refusal goes in-band: an upgrade refused with an HTTP status is only a network
    // failure to the SDK, which retries for ever (§1.1).
    const refuse = (error: WireError, action: number = isTokenError(error.code) ? Action.DISCONNECTED : Action.ERROR): void => {
      ws.send(encodeFrame({ action, error }, format));
      ws.close(1000);
    };
    if (this.sockets > this.settings.maxConnections) {
      return refuse(serviceError('connectionsLimit', `this instance holds its maximum of ${this.settings.maxConnections} realtime connections; retry later`), Action.DISCONNECTED);
    }
    let credentials: Credentials;
    let clientId: string | undefined;
    try {
      ({ credentials, clientId } = this.authenticate(params));
    } catch (err) {
      return refuse(toWireError(err));
    }
    const secret = this.deps.apps.key(credentials.keyName)?.key.keySecret ?? '';
    const appId = credentials.app.appId;
    const echo = params.get('echo') !== 'false';
    const resumeKey = params.get('resume') ?? params.get('recover') ?? undefined;
    let conn: Connection | undefined;
    let error: WireError | undefined;
    if (resumeKey !== undefined) {
      const id = verifyConnectionKey(resumeKey, secret, appId);
      const existing = this.connections.get(id ?? connectionIdOf(resumeKey));
      if (id === undefined) {
        error = serviceError('invalidConnectionKey', 'the connection key is not valid for these credentials; a new connection was made');
      } else if (!existing && this.ended.has(id)) {
        error = serviceError('connectionExpired', 'unable to resume the connection: it was closed or not resumed within connectionStateTtl; a new connection was made');
      } else if (existing && existing.clientId !== clientId && existing.clientId !== undefined && existing.clientId !== '*') {
        error = serviceError('incompatibleCredentials', "the credentials' clientId does not match the connection's; a new connection was made");
      } else {
        // Resumed here, or on another instance than the one that made it: the key proves it.
        conn = existing ?? new Connection(this, id, resumeKey, credentials, clientId, format, echo);
        if (existing) {
          this.detachSocket(existing, true);
          existing.credentials = credentials;
          existing.clientId = clientId;
          existing.format = format;
          existing.echo = echo;
        }
        this.logger.debug({ connectionId: id, local: existing !== undefined }, 'realtime connection resumed');
      }
    }
    if (!conn) {
      const id = newConnectionId();
      conn = new Connection(this, id, connectionKeyFor(secret, appId, id), credentials, clientId, format, echo);
      this.opened++;
    }
    clearTimeout(conn.dropTimer);
    clearTimeout(conn.expiryTimer);
    conn.dropTimer = conn.expiryTimer = undefined;
    this.waiting.delete(conn);
    this.connections.set(conn.id, conn);
    conn.socket = ws;
    conn.lastReceived = this.clock.now();
    if (this.throttled) ws.pause();
    const c = conn;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      // A socket the connection let go of (ERROR, DISCONNECTED, CLOSED, a resume elsewhere) is
      // closing: what the client still sends on it is not acted on, with credentials perhaps expired.
      if (c.socket !== ws) return;
      const now = this.clock.now();
      c.lastReceived = now;
      // Every frame counts, before anything is decoded: one client's flood of cheap frames
      // (HEARTBEAT, DETACH, unknown actions) stalled every other connection (issue 22).
      if (!c.budget.admit(data.length, now)) return this.overBudget(c);
      let pm: ProtocolMessage;
      try {
        pm = decodeFrame(data, isBinary, c.format, this.shape);
      } catch (err) {
        this.framesRefused++;
        if (err instanceof FrameRefused) return this.handle(c, err.pm, data.length, err);
        return this.fail(c, toWireError(err));
      }
      this.handle(c, pm, data.length);
    });
    ws.on('pong', () => {
      if (c.socket === ws) c.lastReceived = this.clock.now();
    });
    ws.once('close', () => this.socketClosed(c, ws));
    conn.sendConnected(error);
    this.deps.events.opened(appId, conn.id, conn.key === resumeKey);
  }

  private handle(c: Connection, pm: ProtocolMessage, size: number, refusal?: ServiceError): void {
    try {
      c.handle(pm, size, refusal);
    } catch (err) {
      // A bug, not the client's fault; thrown here it would end the process and every connection.
      this.logger.error({ err, connectionId: c.id, action: pm.action }, 'realtime frame handling failed');
      this.fail(c, toWireError(err));
    }
  }

  /**
   * A client over its inbound budget (frames or bytes a second): its socket is not read any more
   * (what it still sends costs nothing here), it is told why, and it may resume; the SDK then
   * sends its unacknowledged publishes again.
   */
  private overBudget(conn: Connection): void {
    this.framesRefused++;
    this.inboundBudgetDisconnects++;
    const socket = conn.socket;
    const { maxInboundRate, maxInboundBytesRate } = this.settings;
    this.logger.warn({ connectionId: conn.id, appId: conn.appId }, 'realtime client over its inbound budget; disconnected');
    this.disconnect(conn, serviceError('inboundRateExceeded', `more than ${maxInboundRate} frames or ${maxInboundBytesRate} bytes a second (bursts of twice that) on this connection; resume, and slow down`));
    if (socket) this.hangUp(socket);
  }

  /**
   * A socket whose client is being sent away for what it sent: not read any more (a flood goes on
   * arriving during the close handshake, and reading 1 MB frames that are dropped unread still
   * cost their unmasking and UTF-8 checks), so the client's answer to the close is never seen and
   * the socket goes once the last frames are out.
   */
  private hangUp(socket: WebSocket): void {
    socket.pause();
    setTimeout(() => socket.terminate(), HANG_UP_LINGER_MS).unref();
  }

  /**
   * The connection a REST publish names by its connectionKey (spec: Message): one held here, or
   * one any instance made for this app (the key's mac checks out under one of the app's keys).
   */
  connectionForKey(appId: string, key: string): { connectionId: string; clientId?: string } | undefined {
    const local = this.connections.get(connectionIdOf(key));
    if (local && local.key === key && local.appId === appId) return { connectionId: local.id, clientId: local.clientId };
    for (const k of this.deps.apps.app(appId)?.keys ?? []) {
      const id = verifyConnectionKey(key, k.keySecret, appId);
      if (id !== undefined) return { connectionId: id };
    }
    return undefined;
  }

  /**
   * The members of every connection held by an instance `held` matches leave: one that died, or
   * this one's previous run after a restart.
   */
  async removeMembersHeldBy(held: (instanceId: string) => boolean): Promise<void> {
    const found = this.deps.presence.connectionsHeldBy(held);
    if (found.length === 0) return;
    this.logger.info({ connections: found.length, instances: [...new Set(found.map((c) => c.instanceId))] }, 'presence members of connections an instance lost leave');
    await Promise.all(found.map((c) => this.drop(c.appId, c.channel, c.connectionId, c.instanceId)));
  }

  /** A connection's members on a channel leave: a `drop` on the log (one leave per member). */
  private async drop(appId: string, channel: string, connectionId: string, instanceId: string): Promise<void> {
    const id = `${this.instanceId}-${randomBytes(6).toString('base64url')}`;
    await this.presenceProducer.append(appId, channel, [{ action: 'drop', id, connectionId, instanceId }]);
  }

  /** Credentials from the connect query: `key` or `access_token`, and the `clientId` asked for. */
  private authenticate(params: URLSearchParams): { credentials: Credentials; clientId: string | undefined } {
    const now = this.clock.now();
    const key = params.get('key');
    const token = params.get('access_token') ?? params.get('accessToken');
    const asked = params.get('clientId') ?? undefined;
    if (asked === '*' || asked === '') throw new ServiceError('invalidClientId', 'clientId must be a non-empty string other than "*"');
    if (key) {
      const credentials = this.deps.authenticator.authenticate(`Basic ${b64(key)}`, asked === undefined ? undefined : b64(asked), now);
      return { credentials, clientId: credentials.clientId };
    }
    if (token) {
      const credentials = this.authenticateToken(token);
      const held = credentials.clientId;
      if (asked === undefined) return { credentials, clientId: held };
      if (held === '*' || held === asked) return { credentials, clientId: asked };
      throw new ServiceError('incompatibleCredentials', `clientId "${asked}" does not match the token's clientId${held === undefined ? ' (none)' : ` "${held}"`}`);
    }
    throw new ServiceError('noAuthentication', 'no credentials: connect with key=<key> or access_token=<token>');
  }

  authenticateToken(token: string): Credentials {
    return this.deps.authenticator.authenticate(`Bearer ${b64(token)}`, undefined, this.clock.now());
  }

  // ---- ending connections

  /** The socket is gone but the connection may resume: its members stay for presenceDropMs. */
  private socketClosed(conn: Connection, ws: WebSocket): void {
    if (conn.socket === ws) this.lostSocket(conn);
  }

  private lostSocket(conn: Connection, terminate = false): void {
    this.detachSocket(conn, terminate);
    if (this.connections.get(conn.id) !== conn || this.closing || conn.dropTimer) return;
    conn.dropTimer = setTimeout(() => {
      for (const channel of conn.presenceChannels) this.leaveAll(conn, channel);
      conn.presenceChannels.clear();
    }, this.settings.presenceDropMs);
    conn.dropTimer.unref();
    conn.expiryTimer = setTimeout(() => this.forget(conn), Math.max(this.settings.connectionStateTtlMs, this.settings.presenceDropMs));
    conn.expiryTimer.unref();
    // Bounded like open ones: a client opening and dropping sockets in a loop would otherwise leave
    // one for every socket, each kept for connectionStateTtl. Over maxConnections, the one that
    // has waited longest is forgotten, as if its window had ended (its members leave).
    this.waiting.add(conn);
    if (this.waiting.size > this.settings.maxConnections) this.forget(this.waiting.values().next().value!);
  }

  /** Takes a connection off its socket: its attachments stop (a resume attaches again and replays). */
  private detachSocket(conn: Connection, terminate = false): void {
    for (const channel of [...conn.attachments.keys()]) this.detach(conn, channel);
    const socket = conn.socket;
    conn.socket = undefined;
    if (!socket) return;
    if (terminate) socket.terminate();
    else if (socket.readyState === socket.OPEN) socket.close(1000);
  }

  private forget(conn: Connection): void {
    this.waiting.delete(conn);
    if (this.connections.get(conn.id) !== conn) return;
    this.connections.delete(conn.id);
    this.closed++;
    this.ended.set(conn.id, true);
    this.deps.events.closed(conn.appId, conn.id);
    conn.clearTimers();
    for (const channel of conn.presenceChannels) this.leaveAll(conn, channel);
    conn.presenceChannels.clear();
  }

  /** CLOSE: CLOSED, then the connection is gone and its members leave at once. */
  closeConnection(conn: Connection): void {
    conn.send({ action: Action.CLOSED });
    this.forget(conn);
    this.detachSocket(conn);
  }

  /** A problem the client must act on (a token to renew): DISCONNECTED, and it may resume. */
  disconnect(conn: Connection, error: WireError): void {
    conn.send({ action: Action.DISCONNECTED, error });
    this.lostSocket(conn);
  }

  /**
   * Token revocation: each open connection whose credentials `revoked` matches gets DISCONNECTED
   * 40141 (it may renew its token and resume), or with `hint` an AUTH asking it to renew now.
   */
  revokeConnections(revoked: (credentials: Credentials) => boolean, hint = false): number {
    let n = 0;
    for (const conn of this.connections.values()) {
      if (!conn.socket || !revoked(conn.credentials)) continue;
      n++;
      if (hint) conn.send({ action: Action.AUTH });
      else this.disconnect(conn, serviceError('tokenRevoked', 'the token of this connection has been revoked; renew it and resume'));
    }
    return n;
  }

  /**
   * A key changed (key management): with `revoked`, the connections on its basic credentials end
   * with ERROR 40131 (the SDK goes `failed`) and those on its tokens get DISCONNECTED 40141 (a
   * renewal through the revoked key then fails); otherwise the connections on its basic
   * credentials take its new capability for what they do next (attachments made stay).
   */
  keyChanged(keyName: string, change: { revoked: true } | { revoked: false; capability: Credentials['capability'] }): number {
    let n = 0;
    for (const conn of [...this.connections.values()]) {
      if (!conn.socket || conn.credentials.keyName !== keyName) continue;
      const basic = conn.credentials.method === 'basic';
      if (!change.revoked) {
        if (basic) conn.credentials = { ...conn.credentials, capability: change.capability };
        continue;
      }
      n++;
      if (basic) this.fail(conn, serviceError('keyRevoked', `key "${keyName}" has been revoked`));
      else this.disconnect(conn, serviceError('tokenRevoked', `the key that issued this token ("${keyName}") has been revoked`));
    }
    return n;
  }

  /** A fatal problem: ERROR without a channel ends the connection (the SDK goes `failed`). */
  fail(conn: Connection, error: WireError): void {
    if (isTokenError(error.code)) return this.disconnect(conn, error);
    const socket = conn.socket;
    conn.send({ action: Action.ERROR, error });
    this.forget(conn);
    this.detachSocket(conn);
    if (socket) this.hangUp(socket);
  }

  /**
   * A client that does not read what it is sent is cut off rather than buffered for without
   * bound (its socket already holds maxBufferedBytes); it resumes, and the log replays what it missed.
   * DISCONNECTED 80020 goes behind what it has not read, then the close: nothing more is queued,
   * a client that reads again learns why, and ws destroys the socket of one that never does when
   * the close handshake times out (30 s).
   */
  slowConsumer(conn: Connection): void {
    const socket = conn.socket;
    this.slowConsumers++;
    this.logger.warn({ connectionId: conn.id, buffered: socket?.bufferedAmount }, 'realtime client not reading; disconnected');
    const error = serviceError('deliveryRateExceeded', `the connection did not read what it was sent (more than ${this.settings.maxBufferedBytes} bytes waiting); resume to get the rest`);
    if (socket && socket.readyState === socket.OPEN) socket.send(encodeFrame({ action: Action.DISCONNECTED, error }, conn.format));
    this.lostSocket(conn);
  }

  /** The members `conn` entered on `channel` leave (a `drop` on the log: one leave per member). */
  leaveAll(conn: Connection, channel: string): void {
    this.drop(conn.appId, channel, conn.id, this.instanceId).catch((err) => this.logger.error({ err, connectionId: conn.id, channel }, 'presence leave of a gone connection failed; its members stay until the instance restarts'));
  }

  // ---- attachments and delivery

  async attach(conn: Connection, channel: string, modes: number, serial: string | undefined, params: Record<string, string> | undefined, rewind?: Rewind): Promise<void> {
    const recordKey = channelKey(conn.appId, channel);
    const partition = partitionFor(recordKey, this.partitions);
    let position = serial === undefined ? undefined : parseSerial(serial, partition);
    if (position !== undefined && position > this.delivered[partition]) {
      // Ahead of this instance's delivery: a position from another instance further on, believed
      // only up to the log's end (a log made anew since has not reached it: no continuity).
      const end = (await this.deps.log.endOffsets(Topics.messages).catch(() => undefined))?.get(partition);
      if (end === undefined || position > end) position = undefined;
    }
    const from = position;
    this.detach(conn, channel);
    const target = this.delivered[partition];
    const attachment: Attachment = { conn, channel, recordKey, partition, modes, from: from ?? 0 };
    // The presence set and the registration in the same tick: every change after the snapshot
    // reaches the attachment, none before it (no gap, no duplicate).
    const members = modes & Flag.PRESENCE_SUBSCRIBE ? this.members(conn.appId, channel) : [];
    // Behind the client's position (it comes from an instance whose delivery is further on): live
    // delivery brings everything after it, and skips what the client has.
    const ahead = from !== undefined && from > target;
    const replay = from !== undefined && from < target;
    if (replay || rewind) attachment.held = [];
    let set = this.index.get(recordKey);
    if (!set) this.index.set(recordKey, (set = new Set()));
    set.add(attachment);
    conn.attachments.set(channel, attachment);
    this.deps.events.attached(conn.appId, channel, conn.id, modes);

    let backlog: BacklogRecord[] = [];
    let resumed = ahead || from === target;
    if (replay) {
      try {
        backlog = await this.readBacklog(recordKey, partition, from, target);
        resumed = true;
      } catch (err) {
        this.logger.debug({ err, channel, serial }, 'channel backlog not available; attaching without continuity');
      }
      if (conn.attachments.get(channel) !== attachment) return; // detached meanwhile
    } else if (rewind) {
      try {
        backlog = await this.rewindBacklog(conn.appId, channel, partition, target, rewind);
      } catch (err) {
        this.logger.warn({ err, channel }, 'channel rewind not available; attaching without it');
      }
      if (conn.attachments.get(channel) !== attachment) return; // detached meanwhile
    }
    let flags = modes;
    if (rewind && backlog.length > 0) flags |= Flag.HAS_BACKLOG;
    if (members.length > 0) flags |= Flag.HAS_PRESENCE;
    if (resumed) flags |= Flag.RESUMED;
    // The client's position as it reads this frame: the backlog and the held deliveries follow it,
    // each with its own. Past them, a resume from here (the client cut off before they reach it)
    // would skip them with RESUMED (issue 22: messages missed in silence).
    const attachedAt = resumed && from !== undefined ? from : target;
    const attached: ProtocolMessage = { action: Action.ATTACHED, channel, flags, channelSerial: serialOf(partition, attachedAt) };
    // The params served are echoed (RTL4k): `rewind`, which the connection checked; no others.
    if (params && Object.keys(params).length > 0) attached.params = Object.hasOwn(params, 'rewind') ? { rewind: String(params.rewind) } : {};
    conn.send(attached);
    if (members.length > 0) this.sendSyncPages(attachment, members);
    // The held deliveries are taken off first: the backlog goes out before them, in log order
    // (sent while `held` was still set, it would have queued behind the live messages that came
    // during its read: a resume on another instance delivered newer messages before older ones).
    const held = attachment.held;
    attachment.held = undefined;
    if (attachment.overflowed) return this.slowConsumer(conn);
    for (const { event, offset } of backlog) this.sendMessages(attachment, new OutgoingMessages(event, offset, serialOf(partition, offset + 1)));
    for (const send of held ?? []) send();
  }

  /**
   * The channel's most recent messages before `target` (the attach position) as `rewind` asks,
   * from the history projection once it has applied everything before `target`: what live
   * delivery sends from `target` on follows them with no gap and no repeat.
   */
  private async rewindBacklog(appId: string, channel: string, partition: number, target: number, rewind: Rewind): Promise<BacklogRecord[]> {
    const deadline = this.clock.now() + REWIND_WAIT_MS;
    while ((this.deps.history.applied().get(partition) ?? 0) < target) {
      if (this.clock.now() > deadline || this.closing) throw new Error(`history has not caught up with offset ${target} of partition ${partition}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const now = this.clock.now();
    const start = 'sinceMs' in rewind ? now - rewind.sinceMs : now - MAX_REWIND_MS;
    const wanted = 'count' in rewind ? rewind.count : this.settings.maxReplayRecords;
    const found: HistoryEntry[] = [];
    let after: number | undefined;
    // Newest first, leaving out what came after the attach position (live delivery sends it).
    while (found.length < wanted) {
      // The end leaves room for another instance's clock running ahead; `target` bounds the rest.
      const page = await this.deps.history.query({ appId, channel, start, end: now + 600_000, limit: 100, direction: 'backwards', after });
      for (const e of page) if (Math.floor(e.serial / 1024) < target && found.length < wanted) found.push(e);
      if (page.length < 100) break;
      after = page[page.length - 1].serial;
    }
    // One MESSAGE per publish, oldest first.
    const records: BacklogRecord[] = [];
    for (const e of found.reverse()) {
      const offset = Math.floor(e.serial / 1024);
      const last = records[records.length - 1];
      if (last && last.offset === offset) last.event.messages.push(e.message);
      else records.push({ offset, event: { type: 'messages.published', appId, channel, transport: 'rest', messages: [e.message] } });
    }
    return records;
  }

  /** The channel's messages in its partition from `from` up to `to`, read from the log. */
  private async readBacklog(recordKey: string, partition: number, from: number, to: number): Promise<BacklogRecord[]> {
    // A few backlogs at a time, each at most maxBufferedBytes: whatever many clients ask for at
    // once, replay holds a bounded amount of memory.
    await this.replaySlots.take();
    try {
      return await this.readBacklogRange(recordKey, partition, from, to);
    } finally {
      this.replaySlots.give();
    }
  }

  private async readBacklogRange(recordKey: string, partition: number, from: number, to: number): Promise<BacklogRecord[]> {
    const found: BacklogRecord[] = [];
    let offset = from;
    let scanned = 0;
    let bytes = 0;
    while (offset < to) {
      const records = await this.deps.log.read(Topics.messages, partition, offset, Math.min(1000, to - offset));
      if (records.length === 0 || records[0].offset !== offset) throw new Error(`the log no longer holds offset ${offset} of partition ${partition}`);
      for (const r of records) {
        if (r.offset >= to) break;
        if (r.key === recordKey) {
          const event = decodeEvent(r.value);
          if (event.type === 'messages.published') found.push({ event, offset: r.offset });
          bytes += r.value.byteLength;
          if (found.length > this.settings.maxReplayRecords || bytes > this.settings.maxBufferedBytes) throw new Error('the backlog is larger than one client may be sent at once');
        }
      }
      offset = records[records.length - 1].offset + 1;
      scanned += records.length;
      if (scanned > 100 * this.settings.maxReplayRecords) throw new Error('the backlog is too far back in the log');
    }
    return found;
  }

  detach(conn: Connection, channel: string): void {
    const attachment = conn.attachments.get(channel);
    if (!attachment) return;
    conn.attachments.delete(channel);
    this.deps.events.detached(conn.appId, channel, conn.id);
    const set = this.index.get(attachment.recordKey);
    set?.delete(attachment);
    if (set?.size === 0) this.index.delete(attachment.recordKey);
  }

  private deliverMessages(records: LogRecord[]): void {
    for (const r of records) {
      const set = this.index.get(r.key);
      if (set) {
        const decoded = decodeEvent(r.value);
        const event = decoded.type === 'messages.published' ? this.notRepeated(r.key, decoded) : undefined;
        if (event) {
          const out = new OutgoingMessages(event, r.offset, serialOf(r.partition, r.offset + 1));
          for (const attachment of set) this.sendMessages(attachment, out);
        }
      }
      this.delivered[r.partition] = r.offset + 1;
    }
    this.deliveryProgress.advance(records);
  }

  /**
   * Undefined when delivery has passed every message this instance acknowledged on the channel's
   * partition; else resolves once it has, or after limits.readYourWritesMs (false). An attach
   * waits for it, so that what the instance acknowledged before the ATTACH is before the attach
   * position: history untilAttach and rewind have it, live delivery does not send it again.
   */
  ownMessagesDelivered(appId: string, channel: string): Promise<boolean> | undefined {
    const partition = partitionFor(channelKey(appId, channel), this.partitions);
    const next = this.deps.ownWrites?.of(Topics.messages).get(partition);
    if (next === undefined || (this.delivered[partition] ?? 0) >= next) return undefined;
    return this.deliveryProgress.until(Topics.messages, new Map([[partition, next]]), this.limits.readYourWritesMs);
  }

  /**
   * The event without messages whose client-supplied id this instance delivered on the channel
   * lately (undefined when none is left): a repeat that reached the log anyway (appended by two
   * instances, or racing re-sends) is delivered once, as history keeps it once.
   */
  private notRepeated(recordKey: string, event: MessagesPublished): MessagesPublished | undefined {
    if (!event.clientIds) return event;
    const now = this.clock.now();
    const fresh = event.messages.filter((m) => {
      if (isAssignedId(m.id)) return true;
      const key = pairDigest(recordKey, m.id);
      const seen = this.deliveredIds.get(key);
      if (seen !== undefined && now - seen <= DELIVERED_IDS_WINDOW_MS) return false;
      this.deliveredIds.set(key, now);
      return true;
    });
    if (fresh.length === event.messages.length) return event;
    return fresh.length === 0 ? undefined : { ...event, messages: fresh };
  }

  private sendMessages(attachment: Attachment, out: OutgoingMessages): void {
    if (attachment.held) {
      if (attachment.held.length >= this.settings.maxReplayRecords) attachment.overflowed = true;
      else attachment.held.push(() => this.sendMessages(attachment, out));
      return;
    }
    if (out.offset < attachment.from) return;
    const conn = attachment.conn;
    if (!(attachment.modes & Flag.SUBSCRIBE)) return;
    if (!conn.echo && out.connectionId === conn.id) return;
    if (conn.sendFrame(out.frame(conn.format))) {
      this.messagesDelivered += out.event.messages.length;
      this.deps.usage?.realtimeOutbound(conn.appId, 'messages', out.event.messages.length, out.data);
    }
  }

  private deliverPresence(appId: string, channel: string, entries: StoredMessage[]): void {
    this.reservations.settle(appId, channel, entries);
    const set = this.index.get(channelKey(appId, channel));
    if (!set || entries.length === 0) return;
    for (const attachment of set) this.sendPresence(attachment, entries);
  }

  /** `channelSerial`: the position when the change came; held, it goes out behind messages before it. */
  private sendPresence(attachment: Attachment, entries: StoredMessage[], channelSerial = this.serialFor(attachment)): void {
    if (attachment.held) {
      if (attachment.held.length >= this.settings.maxReplayRecords) attachment.overflowed = true;
      else attachment.held.push(() => this.sendPresence(attachment, entries, channelSerial));
      return;
    }
    const conn = attachment.conn;
    // A connection always gets its own members' events: the SDK learns its members from them (§5.2).
    const subscribed = (attachment.modes & Flag.PRESENCE_SUBSCRIBE) !== 0;
    const items = subscribed ? entries : entries.filter((e) => e.connectionId === conn.id);
    if (items.length === 0) return;
    const sent = conn.send({
      action: Action.PRESENCE,
      channel: attachment.channel,
      channelSerial,
      presence: items.map((e) => presenceToWire(e, conn.format)),
    });
    if (sent) this.deps.usage?.realtimeOutbound(conn.appId, 'presence', items.length, sizeOf(items));
  }

  /** The attachment's position: never behind what its client already has. */
  private serialFor(attachment: Attachment): string {
    return serialOf(attachment.partition, Math.max(attachment.from, this.delivered[attachment.partition]));
  }

  private members(appId: string, channel: string): PresenceMember[] {
    return this.deps.presence.query({ appId, channel, limit: Number.MAX_SAFE_INTEGER }).members;
  }

  /** Whether a member is present here with that id (held by this instance, not one it moved from). */
  isPresentWithId(appId: string, channel: string, clientId: string, connectionId: string, id: string): boolean {
    const member = this.deps.presence.query({ appId, channel, clientId, connectionId, limit: 1 }).members[0];
    return member?.id === id && member.instanceId === this.instanceId;
  }

  /** The whole presence set, again (a client's SYNC request). */
  sendSync(attachment: Attachment): void {
    if (!(attachment.modes & Flag.PRESENCE_SUBSCRIBE)) return;
    this.sendSyncPages(attachment, this.members(attachment.conn.appId, attachment.channel));
  }

  /**
   * SYNC pages of `present` members; the last page's cursor is empty (§5.4). Paced by the socket:
   * a page waits while the socket holds more than a high-water mark unwritten, so a set of any
   * size reaches a client that reads (written in one burst, 130,000 members went over the
   * slow-reader cut-off, maxBufferedBytes, for a client reading promptly: issue 22). Changes that
   * come meanwhile go out as they come; the SDK's sync merges them by newness (§5.4). A newer SYNC
   * of the attachment, a detach or a lost socket ends this one.
   */
  private sendSyncPages(attachment: Attachment, members: PresenceMember[]): void {
    const { conn, channel } = attachment;
    const socket = conn.socket;
    if (!socket) return;
    const syncId = randomBytes(6).toString('base64url');
    const sync = (attachment.sync = {});
    const size = this.settings.syncPageSize;
    const pages = Math.max(1, Math.ceil(members.length / size));
    const highWater = Math.min(SYNC_HIGH_WATER_BYTES, this.settings.maxBufferedBytes / 4);
    let page = 0;
    const next = (): void => {
      while (page < pages) {
        if (conn.socket !== socket || conn.attachments.get(channel) !== attachment || attachment.sync !== sync) return;
        const last = page === pages - 1;
        const present = members.slice(page * size, (page + 1) * size);
        const pm: ProtocolMessage = { action: Action.SYNC, channel, channelSerial: `${syncId}:${last ? '' : page + 1}`, presence: present.map((m) => presenceToWire(m, conn.format, 1)) };
        page++;
        let waiting = false;
        const sent = conn.send(pm, () => {
          if (waiting) setImmediate(next);
        });
        if (!sent) return;
        // Each `present` member sent counts as a presence message (spec: Events, `present`).
        this.deps.usage?.realtimeOutbound(conn.appId, 'presence', present.length, sizeOf(present));
        // Over the mark, the rest goes on once this page is written out.
        if (socket.bufferedAmount > highWater) {
          waiting = true;
          return;
        }
      }
      if (attachment.sync === sync) attachment.sync = undefined;
    };
    next();
  }

  // ---- housekeeping

  /**
   * Heartbeats where the gateway was silent, pings where the client was, and dead sockets closed
   * (§6.1). Each tick visits one slice of the connections, so each is visited once a second: one
   * tick for all of them sent the HEARTBEATs and pings of connections made together in one go, and
   * with 10,000 such connections delivery stalled for 140-240 ms every 16 s (test/bench/README.md: Realtime).
   */
  private tick(): void {
    const now = this.clock.now();
    this.reservations.expire(now);
    const idle = this.settings.maxIdleIntervalMs;
    let budget = Math.ceil(this.connections.size / TICK_SLICES);
    while (budget-- > 0) {
      let next = this.tickCursor.next();
      if (next.done) {
        this.tickCursor = this.connections.values();
        next = this.tickCursor.next();
        if (next.done) return;
      }
      const conn = next.value;
      const socket = conn.socket;
      if (!socket || socket.readyState !== socket.OPEN) continue;
      // A socket the gateway is not reading (its publishes wait for the log) is not the client's silence.
      if (socket.isPaused) conn.lastReceived = now;
      else if (now - conn.lastReceived > 2 * idle + 10_000) {
        this.logger.debug({ connectionId: conn.id }, 'realtime client silent; socket closed');
        socket.terminate();
        continue;
      }
      if (now - conn.lastSent >= idle) conn.send({ action: Action.HEARTBEAT });
      if (now - conn.lastReceived >= idle) socket.ping();
    }
  }

  /**
   * Shutdown: every client is told to reconnect (DISCONNECTED, which the SDK answers by resuming,
   * here after a restart or on another instance), and delivery stops.
   */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.ticker);
    for (const conn of this.connections.values()) {
      conn.clearTimers();
      if (conn.socket) {
        conn.send({ action: Action.DISCONNECTED, error: serviceError('serviceShuttingDown', 'the service is restarting; reconnect') });
        this.detachSocket(conn);
      }
    }
    this.connections.clear();
    this.waiting.clear();
    this.unsubscribePresence?.();
    await this.subscription?.stop();
    await this.deps.events.close();
    this.wss.close();
  }
}
