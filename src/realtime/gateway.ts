import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/authenticate.js';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import type { ConsumeOptions, Log, LogPosition, Subscription } from '../log/port.js';
import { isLogClosed, Topics } from '../log/port.js';
import { positionsAfter } from '../log/applied-positions.js';
import type { OwnWrites } from '../log/own-writes.js';
import type { Publisher } from '../messages/publisher.js';
import type { PresenceChange, PresenceProducer } from '../presence/presence-producer.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { PresenceProjection } from '../../projections/presence/presence-projection.js';
import type { HistoryProjection } from '../../projections/history/history-projection.js';
import type { UsageMeter } from '../stats/usage-meter.js';
import type { RealtimeNumbers } from '../metrics/metrics.js';
import type { Subscriber } from './attachment.js';
import { Backlog } from './backlog.js';
import { ChannelAttach } from './channel-attach.js';
import type { ConnectionEvents } from './connection-events.js';
import type { ConnectionContext } from './context.js';
import { Delivery } from './delivery.js';
import { Handshake } from './handshake.js';
import { FloodCooldown } from './flood-cooldown.js';
import { WebSocketTransport } from './transport.js';
import { CometTransport } from './comet/comet-transport.js';
import { PresenceReservations } from './presence-reservations.js';
import { PresenceSync } from './presence-sync.js';
import { PresenceHandover } from './presence-handover.js';
import type { AttachRequest } from './channel-requests.js';
import { InbandOccupancy, type OccupancySource } from './occupancy.js';
import { Sessions } from './sessions.js';
import type { RealtimeSettings } from './settings.js';

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
  /** How delivery reads the messages topic (Delivery's consume; default Log.consume). */
  consume?: (options: ConsumeOptions) => Subscription;
  /** Connection events on the log: resumes on other instances, instances that died. */
  events: ConnectionEvents;
  /** What this instance appended: an attach waits for delivery to pass it (README: Consistency of reads). */
  ownWrites?: Pick<OwnWrites, 'of'>;
  /** Channel occupancy for the `occupancy` param (the channels projection). */
  occupancy: OccupancySource;
  /** Throws when an attach or presence change may not begin its channel (src/channels/channel-admission.ts). */
  admitChannel?: (appId: string, channel: string) => void;
}

/** How long a presence enter counts as reserved without the projection applying it (see PresenceReservations). */
const RESERVATION_MAX_AGE_MS = 60_000;

/**
 * The realtime gateway (ARCHITECTURE: The realtime gateway): WebSocket connections on the REST
 * port, speaking the SDK's realtime protocol. Publishes and presence changes go to the log like
 * REST's; delivery is one more consumer of the log. The gateway starts and stops its parts and
 * orchestrates an attach; each part has one owner:
 * - transport.ts and comet/: the transports (WebSocket; comet, HTTP long polling), each a socket to a connection;
 * - handshake.ts: a transport's connect: credentials, resume and recover;
 * - sessions.ts: the registry of connections by state, housekeeping, revocation, the in-flight budget;
 * - connection.ts (and connection-life.ts): one connection, through the context port (context.ts);
 * - delivery.ts: the log consumer and the fan-out to attachments, presence included;
 * - channel-attach.ts: an attach and a detach (ATTACHED, the SYNC, the backlog, in order);
 * - channel-resume.ts: whether an ATTACH's channelSerial resumes (RESUMED, or 90003);
 * - backlog.ts: replay from the log on a resume, rewind from history;
 * - presence-sync.ts: SYNC pages, and the leaves of connections gone;
 * - presence-handover.ts: the members of connections whose instance went (died, restarted), or that resumed here.
 */
export class Gateway {
  private readonly sessions: Sessions;
  private readonly delivery: Delivery;
  private readonly backlog: Backlog;
  private readonly presenceSync: PresenceSync;
  /** Attaching and detaching (channel-attach.ts). */
  private readonly attachments: ChannelAttach;
  private readonly handshake: Handshake;
  private readonly webSockets: WebSocketTransport;
  /** The comet transport, which the routes (src/routes/comet.ts) carry requests to. */
  readonly comet: CometTransport;
  private readonly occupancy: InbandOccupancy;
  /** Presence members entered here that the presence projection has not applied yet. */
  private readonly reservations = new PresenceReservations(RESERVATION_MAX_AGE_MS);
  private readonly unsubscribe: (() => void)[] = [];
  private closing = false;
  /** The members of connections whose instance went (presence-handover.ts). */
  private readonly handover: PresenceHandover;

  constructor(private readonly deps: GatewayDeps) {
    const { settings, clock, logger, instanceId, usage } = deps;
    this.sessions = new Sessions({ settings, clock, logger, apps: deps.apps, events: deps.events, onTick: (now) => this.reservations.expire(now) });
    this.delivery = new Delivery({ log: deps.log, consumerName: deps.consumerName, consume: deps.consume, clock, limits: deps.limits, settings, logger, usage, ownWrites: deps.ownWrites });
    this.backlog = new Backlog({ log: deps.log, history: deps.history, clock, settings, closing: () => this.closing });
    this.occupancy = new InbandOccupancy({
      source: deps.occupancy,
      clock,
      logger,
      instanceId,
      intervalMs: settings.occupancyIntervalMs,
      send: (attachment, message) => this.delivery.sendOccupancy(attachment, message),
    });
    this.presenceSync = new PresenceSync({ presence: deps.presence, presenceProducer: deps.presenceProducer, settings, instanceId, logger, usage });
    const { presence, presenceProducer } = deps;
    this.handover = new PresenceHandover({ presence, presenceProducer, presenceSync: this.presenceSync, sessions: this.sessions, events: deps.events, settings, instanceId, logger, closing: () => this.closing });
    const resumeDeps = { log: deps.log, backlog: this.backlog, delivery: this.delivery, logger };
    this.attachments = new ChannelAttach({ delivery: this.delivery, backlog: this.backlog, resumeDeps, presenceSync: this.presenceSync, occupancy: this.occupancy, events: deps.events, logger });
    this.handshake = new Handshake({
      authenticator: deps.authenticator,
      apps: deps.apps,
      sessions: this.sessions,
      context: this.context(),
      events: deps.events,
      takeOverPresence: (conn) => this.handover.takeOverPresence(conn),
      settings,
      clock,
      logger,
    });
    const open = this.handshake.open.bind(this.handshake);
    const closing = (): boolean => this.closing;
    const credentialsPending = (params: URLSearchParams): Promise<void> | undefined => this.handshake.credentialsPending(params);
    this.webSockets = new WebSocketTransport({ settings, logger, open, credentialsPending, closing });
    this.comet = new CometTransport({ settings, logger, open, credentialsPending, closing, credentialsOf: (params) => this.handshake.credentialsOf(params).credentials });
  }

  /** What a connection may ask (context.ts), answered by the gateway's parts. */
  private context(): ConnectionContext {
    const { deps, sessions, delivery, presenceSync } = this;
    return {
      settings: deps.settings,
      limits: deps.limits,
      clock: deps.clock,
      logger: deps.logger,
      instanceId: deps.instanceId,
      authenticateToken: (token) => {
        const pending = this.handshake.tokenPending(token);
        return pending ? pending.then(() => this.handshake.authenticateToken(token)) : this.handshake.authenticateToken(token);
      },
      dropped: (id) => sessions.connectionDropped(id),
      ended: (id) => sessions.connectionEnded(id),
      holdInflight: (bytes) => sessions.holdInflight(bytes),
      releaseInflight: (bytes) => sessions.releaseInflight(bytes),
      get readingThrottled() {
        return sessions.readingThrottled;
      },
      count: (counter) => sessions.counters[counter]++,
      floodCooldown: new FloodCooldown(deps.settings.floodCooldownMs, deps.settings.maxFloodCooldownOrigins, () => deps.clock.now()),
      readyToAttach: (appId, channel, ownWrites) => delivery.readyToAttach(appId, channel, ownWrites),
      attach: (conn, grant, request) => this.attach(conn, grant, request),
      detach: (conn, channel) => this.detach(conn, channel),
      sync: (attachment) => presenceSync.resend(attachment),
      publish: async (appId, channel, messages, keyName) => {
        await deps.publisher.publish(appId, channel, messages, 'realtime', keyName);
      },
      admitChannel: (appId, channel) => deps.admitChannel?.(appId, channel),
      isPresentWithId: (appId, channel, clientId, connectionId, id) => presenceSync.isPresentWithId(appId, channel, clientId, connectionId, id),
      presenceMembers: (appId) => this.presenceMembers(appId),
      changePresence: (appId, channel, connectionId, joining, changes) => this.changePresence(appId, channel, connectionId, joining, changes),
      leave: (appId, channel, connectionId) => presenceSync.leave(appId, channel, connectionId),
    };
  }

  /** Starts delivering from the log's current end and takes WebSocket upgrades on `server`. */
  async start(server: Server): Promise<void> {
    const { log, presence, logger } = this.deps;
    await this.delivery.start();
    // A resume reads its channel's backlog from the log: the first one should not wait for the
    // reader to start.
    log.prepareReads?.(Topics.messages).catch((err) => {
      // A stop during the start closed the log: nothing to say.
      if (!isLogClosed(err)) logger.warn({ err }, 'the log reader for resumes did not start; the first resume starts it');
    });
    const holders = new Set(presence.connectionsHeldBy(() => true).map((c) => c.instanceId));
    await this.deps.events.start(
      {
        movedAway: (connectionId) => this.sessions.movedAway(connectionId),
        ended: (connectionId) => this.sessions.endedElsewhere(connectionId),
        instanceDead: (instanceId) => this.handover.removeMembersOfDeadInstance(instanceId),
      },
      holders,
    );
    // Reservations settle as the projection applies the changes; then the changes go to the attachments here.
    this.unsubscribe.push(presence.onApplied((appId, channel, entries) => this.reservations.settle(appId, channel, entries)));
    this.unsubscribe.push(presence.onApplied((appId, channel, entries) => this.delivery.deliverPresence(appId, channel, entries)));
    this.occupancy.start();
    this.webSockets.listen(server);
    this.sessions.start();
    this.handover.armPreviousRun(server);
  }

  /**
   * Shutdown: every client is told to reconnect (DISCONNECTED, which the SDK answers by resuming,
   * here after a restart or on another instance), and delivery stops.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.handover.close();
    this.sessions.close();
    this.comet.shutdown();
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe();
    this.occupancy.close();
    await this.delivery.stop();
    await this.deps.events.close();
    this.webSockets.close();
  }

  // ---- attachments (REALTIME-PROTOCOL.md §4): channel-attach.ts

  attach(conn: Subscriber, grant: () => number, request: AttachRequest): Promise<boolean> {
    return this.attachments.attach(conn, grant, request);
  }

  detach(conn: Subscriber, channel: string): void {
    this.attachments.detach(conn, channel);
  }

  // ---- presence

  /**
   * Presence members of all apps, or of one: in the presence projection (every instance's), and
   * those this instance let enter that it has not applied yet. Enters racing on other instances
   * are seen once applied: the limits may be passed by what they have in flight.
   */
  presenceMembers(appId?: string): number {
    return this.deps.presence.memberCount(appId) + this.reservations.count(appId);
  }

  /** Appends a connection's presence changes, its joining members reserved until applied; resolves once applied here. */
  private async changePresence(appId: string, channel: string, connectionId: string, joining: Set<string>, changes: PresenceChange[]): Promise<void> {
    // Counted against the limits until the presence projection applies them (PresenceReservations).
    const reserved = this.reservations.reserve(appId, channel, connectionId, joining, this.deps.clock.now());
    let positions;
    try {
      positions = await this.deps.presenceProducer.append(appId, channel, changes);
    } catch (err) {
      this.reservations.release(reserved);
      throw err;
    }
    await this.presenceApplied(positions);
  }

  /**
   * Resolves once the presence projection has applied these changes, so that their PRESENCE
   * messages went to this instance's attachments (and the member set holds them) before the ACK
   * does (README: Consistency of reads). Past limits.readYourWritesMs the ACK goes anyway: the
   * change is durable and applies later.
   */
  private async presenceApplied(positions: readonly LogPosition[]): Promise<void> {
    const { presence, limits, logger } = this.deps;
    const target = positionsAfter(positions);
    if (await presence.progress.until(Topics.presence, target, limits.readYourWritesMs)) return;
    logger.warn(
      { behind: presence.progress.behind(Topics.presence, target), waitedMs: limits.readYourWritesMs },
      'presence change acknowledged before this instance applied it: the presence projection lags',
    );
  }

  // ---- the members of connections whose instance went (presence-handover.ts)

  /**
   * The members of every connection held by an instance `held` matches leave: one that died, or
   * this one's previous run after a restart.
   */
  removeMembersHeldBy(held: (instanceId: string) => boolean): Promise<void> {
    return this.handover.removeMembersHeldBy(held);
  }

  /** After a restart, the previous run's members leave after the resume window (PresenceHandover.removeMembersOfPreviousRun). */
  removeMembersOfPreviousRun(held: (instanceId: string) => boolean): void {
    this.handover.removeMembersOfPreviousRun(held);
  }

  /** Settles once the previous run's members that did not come back have left, or at once when there were none; never rejects. */
  get previousRunSettled(): Promise<void> {
    return this.handover.previousRunSettled;
  }

  // ---- what the service reads and asks

  /** Whether a connection ended for good, here or (as the log says) on another instance. */
  hasEnded(connectionId: string): boolean {
    return this.sessions.hasEnded(connectionId);
  }

  /** Sockets upgraded and not closed yet. */
  get connectionCount(): number {
    return this.sessions.socketCount;
  }

  /** The connection a REST publish names by its connectionKey (Sessions.connectionForKey). */
  connectionForKey(appId: string, key: string): { connectionId: string; clientId?: string } | undefined {
    return this.sessions.connectionForKey(appId, key);
  }

  /** Connections open here (with a socket), per app: the usage meter reads it for stats. */
  connectionsByApp(): Map<string, number> {
    return this.sessions.connectionsByApp();
  }

  /** Token revocation (Sessions.revokeConnections). */
  revokeConnections(revoked: (credentials: Credentials) => boolean, hint = false): number {
    return this.sessions.revokeConnections(revoked, hint);
  }

  /** A key changed (Sessions.keyChanged). */
  keyChanged(keyName: string, change: { revoked: true } | { revoked: false; capability: Credentials['capability'] }): number {
    return this.sessions.keyChanged(keyName, change);
  }

  /** An app deleted (Sessions.appDeleted). */
  appDeleted(appId: string): number {
    return this.sessions.appDeleted(appId);
  }

  /** The gateway's numbers for GET /metrics (src/metrics/metrics.ts), read when scraped. */
  /** Whether delivery's consumer reads the log (GET /ready: not before; Delivery.reading). */
  get deliveryReading(): boolean {
    return this.delivery.reading;
  }

  metrics(): RealtimeNumbers {
    const { sockets, connections, opened, closed } = this.sessions.numbers();
    const { attachments, delivered, deliveryLag } = this.delivery.numbers();
    const { framesRefused, inboundBudgetDisconnects, slowConsumers, cooledConnections } = this.sessions.counters;
    return { sockets, cometTransports: this.comet.size, connections, opened, closed, attachments, delivered, slowConsumerDisconnects: slowConsumers, inboundBudgetDisconnects, cooledConnections, framesRefused, deliveryLag };
  }
}
