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
import { channelKey } from '../log/partitioner.js';
import type { Publisher } from '../messages/publisher.js';
import type { PresenceChange, PresenceProducer } from '../presence/presence-producer.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { PresenceProjection } from '../../projections/presence/presence-projection.js';
import type { HistoryProjection } from '../../projections/history/history-projection.js';
import type { UsageMeter } from '../stats/usage-meter.js';
import type { RealtimeNumbers } from '../metrics/metrics.js';
import type { Attachment, Subscriber } from './attachment.js';
import { Backlog, type BacklogRecord } from './backlog.js';
import { ChannelResume, type ChannelResumeDeps } from './channel-resume.js';
import { channelSerial } from '../channels/channel-serial.js';
import type { ConnectionEvents } from './connection-events.js';
import type { Connection } from './connection.js';
import type { ConnectionContext } from './context.js';
import { Delivery } from './delivery.js';
import { Handshake } from './handshake.js';
import { FloodCooldown } from './flood-cooldown.js';
import { WebSocketTransport } from './transport.js';
import { CometTransport } from './comet/comet-transport.js';
import { PresenceReservations } from './presence-reservations.js';
import { PresenceSync } from './presence-sync.js';
import { Action, Flag, toWireError, type ProtocolMessage } from './protocol.js';
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
 * - channel-resume.ts: whether an ATTACH's channelSerial resumes (RESUMED, or 90003);
 * - backlog.ts: replay from the log on a resume, rewind from history;
 * - presence-sync.ts: SYNC pages, and the leaves of connections gone.
 */
export class Gateway {
  private readonly sessions: Sessions;
  private readonly delivery: Delivery;
  private readonly backlog: Backlog;
  /** What a channel's resume reads: each ATTACH makes its ChannelResume with it. */
  private readonly resumeDeps: ChannelResumeDeps;
  private readonly presenceSync: PresenceSync;
  private readonly handshake: Handshake;
  private readonly webSockets: WebSocketTransport;
  /** The comet transport, which the routes (src/routes/comet.ts) carry requests to. */
  readonly comet: CometTransport;
  private readonly occupancy: InbandOccupancy;
  /** Presence members entered here that the presence projection has not applied yet. */
  private readonly reservations = new PresenceReservations(RESERVATION_MAX_AGE_MS);
  private readonly unsubscribe: (() => void)[] = [];
  /** ATTACHes reading the log before they register, by connection and channel: a DETACH meanwhile (detach) cancels one. */
  private readonly pendingAttaches = new WeakMap<Subscriber, Map<string, object>>();
  private closing = false;
  /** The leave of the members of the previous run whose connections did not come back (removeMembersOfPreviousRun). */
  private previousRunTimer: NodeJS.Timeout | undefined;
  /** Arms previousRunTimer: set by removeMembersOfPreviousRun, called once the server listens. */
  private previousRun: (() => void) | undefined;
  private previousRunDone!: () => void;
  /** The resume windows of dead instances' members (removeMembersOfDeadInstance). */
  private readonly deadInstanceTimers = new Set<NodeJS.Timeout>();
  /**
   * Settles once the previous run's members whose connections did not come back have been made to
   * leave (their drops appended), or at once when there were none; never rejects.
   */
  readonly previousRunSettled = new Promise<void>((resolve) => (this.previousRunDone = resolve));

  constructor(private readonly deps: GatewayDeps) {
    const { settings, clock, logger, instanceId, usage } = deps;
    this.sessions = new Sessions({ settings, clock, logger, apps: deps.apps, events: deps.events, onTick: (now) => this.reservations.expire(now) });
    this.delivery = new Delivery({ log: deps.log, consumerName: deps.consumerName, consume: deps.consume, clock, limits: deps.limits, settings, logger, usage, ownWrites: deps.ownWrites });
    this.backlog = new Backlog({ log: deps.log, history: deps.history, clock, settings, closing: () => this.closing });
    this.resumeDeps = { log: deps.log, backlog: this.backlog, delivery: this.delivery, logger };
    this.occupancy = new InbandOccupancy({
      source: deps.occupancy,
      clock,
      logger,
      instanceId,
      intervalMs: settings.occupancyIntervalMs,
      send: (attachment, message) => this.delivery.sendOccupancy(attachment, message),
    });
    this.presenceSync = new PresenceSync({ presence: deps.presence, presenceProducer: deps.presenceProducer, settings, instanceId, logger, usage });
    this.handshake = new Handshake({
      authenticator: deps.authenticator,
      apps: deps.apps,
      sessions: this.sessions,
      context: this.context(),
      events: deps.events,
      takeOverPresence: (conn) => this.takeOverPresence(conn),
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
        instanceDead: (instanceId) => this.removeMembersOfDeadInstance(instanceId),
      },
      holders,
    );
    // Reservations settle as the projection applies the changes; then the changes go to the attachments here.
    this.unsubscribe.push(presence.onApplied((appId, channel, entries) => this.reservations.settle(appId, channel, entries)));
    this.unsubscribe.push(presence.onApplied((appId, channel, entries) => this.delivery.deliverPresence(appId, channel, entries)));
    this.occupancy.start();
    this.webSockets.listen(server);
    this.sessions.start();
    this.armPreviousRun(server);
  }

  /**
   * Shutdown: every client is told to reconnect (DISCONNECTED, which the SDK answers by resuming,
   * here after a restart or on another instance), and delivery stops.
   */
  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.previousRunTimer);
    this.previousRunDone();
    for (const timer of this.deadInstanceTimers) clearTimeout(timer);
    this.deadInstanceTimers.clear();
    this.sessions.close();
    this.comet.shutdown();
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe();
    this.occupancy.close();
    await this.delivery.stop();
    await this.deps.events.close();
    this.webSockets.close();
  }

  // ---- attachments (REALTIME-PROTOCOL.md §4)

  /**
   * An attach: registered with delivery at the position delivery has reached, its presence set
   * taken in the same tick; ATTACHED with the position the client reads it at, then the SYNC, the
   * backlog (a resume's replay, or `rewind`) and what delivery held meanwhile, in log order.
   * The modes are `grant`'s in the tick it registers; false, nothing sent, when it grants none.
   */
  async attach(conn: Subscriber, grant: () => number, request: AttachRequest): Promise<boolean> {
    const { delivery } = this;
    const { serial, rewind, filter } = request;
    const { name: channel, base } = request.channel;
    const recordKey = channelKey(conn.appId, base);
    const partition = delivery.partitionOf(recordKey);
    const resume = new ChannelResume(this.resumeDeps, { serial, channel, recordKey, partition });
    if (resume.aheadOfDelivery()) {
      const epoch = conn.socketEpoch;
      const ticket = {};
      let pending = this.pendingAttaches.get(conn);
      if (!pending) this.pendingAttaches.set(conn, (pending = new Map()));
      pending.set(channel, ticket);
      await resume.checkLogEnd();
      // The socket gone meanwhile (a CLOSE right behind the ATTACH): its attachments were let go,
      // and one made now would stay in delivery, and in the channel's occupancy, for good. A DETACH
      // (answered DETACHED) or another ATTACH of the channel meanwhile: this one is answered no more.
      if (pending.get(channel) !== ticket) return true;
      pending.delete(channel);
      if (conn.socketEpoch !== epoch) return true;
    }
    // The modes of the credentials the connection holds now (an AUTH may have come meanwhile).
    const modes = grant();
    if (modes === 0) return false;
    this.detach(conn, channel);
    const target = delivery.position(partition);
    resume.plan(target);
    const attachment: Attachment = { conn, channel, base, recordKey, partition, modes, filter, occupancy: request.params.occupancy, from: resume.from ?? 0 };
    // Whether the channel has members, and the registration, in the same tick: every change after
    // it reaches the attachment. The SYNC reads the set as its pages go (not a copy): a change in
    // both it and a PRESENCE, the SDK merges by newness.
    const members = modes & Flag.PRESENCE_SUBSCRIBE ? this.presenceSync.members(conn.appId, base) : undefined;
    const hasPresence = members !== undefined && members.size > 0;
    if (resume.replays || rewind) attachment.held = [];
    delivery.add(attachment);
    conn.attachments.set(channel, attachment);
    this.deps.events.attached(conn.appId, base, conn.id, modes);

    let backlog: BacklogRecord[] = [];
    if (resume.replays) {
      backlog = await resume.replay(conn, () => conn.attachments.get(channel) !== attachment);
      if (conn.attachments.get(channel) !== attachment) return true; // detached meanwhile
    } else if (rewind) {
      try {
        backlog = await this.backlog.rewind(conn.appId, base, partition, target, rewind);
      } catch (err) {
        this.deps.logger.warn({ err, channel }, 'channel rewind not available; attaching without it');
      }
      if (conn.attachments.get(channel) !== attachment) return true; // detached meanwhile
    }
    let flags = modes;
    if (rewind && backlog.length > 0) flags |= Flag.HAS_BACKLOG;
    if (hasPresence) flags |= Flag.HAS_PRESENCE;
    if (resume.resumed) flags |= Flag.RESUMED;
    const attached: ProtocolMessage = { action: Action.ATTACHED, channel, flags, channelSerial: channelSerial(partition, resume.attachedAt) };
    // The params granted are echoed (RTL4k); the connection refused any other.
    if (Object.keys(request.params.granted).length > 0) attached.params = request.params.granted;
    if (resume.error) attached.error = toWireError(resume.error);
    conn.send(attached);
    if (attachment.occupancy) this.occupancy.attached(attachment);
    if (hasPresence) this.presenceSync.send(attachment, members);
    // The held deliveries are taken off first: the backlog goes out before them, in log order
    // (sent while `held` was still set, it would have queued behind the live messages that came
    // during its read: a resume on another instance delivered newer messages before older ones).
    const held = attachment.held;
    attachment.held = undefined;
    if (attachment.overflowed) {
      conn.slowConsumer();
      return true;
    }
    delivery.sendBacklog(attachment, backlog);
    for (const send of held ?? []) send();
    return true;
  }

  detach(conn: Subscriber, channel: string): void {
    this.pendingAttaches.get(conn)?.delete(channel);
    const attachment = conn.attachments.get(channel);
    if (!attachment) return;
    conn.attachments.delete(channel);
    // The log knows one attachment per connection and channel: one by another name of it stays.
    if (![...conn.attachments.values()].some((a) => a.base === attachment.base)) this.deps.events.detached(conn.appId, attachment.base, conn.id);
    this.delivery.remove(attachment);
    if (attachment.occupancy) this.occupancy.detached(attachment);
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

  /**
   * The members of an instance silent for three alive intervals leave once the resume window
   * (presenceDropMs) has passed, as a dropped connection's do: its clients may be resuming
   * elsewhere meanwhile (a restart longer than three intervals, a crash). Those that resumed on
   * another instance are held by it by then (takeOverPresence); those that resumed here are kept
   * even if their `held` change is not applied yet (a drop applied after it would still remove them).
   * An instance that came back meanwhile under the same id deals with its previous run's members itself.
   */
  private removeMembersOfDeadInstance(instanceId: string): void {
    const timer = setTimeout(() => {
      this.deadInstanceTimers.delete(timer);
      // Back meanwhile (a restart under the same id): its own start keeps or removes what its previous run held.
      if (this.deps.events.isAlive(instanceId)) return;
      this.presenceSync
        .removeMembersHeldBy((id) => id === instanceId, (connectionId) => this.sessions.get(connectionId) !== undefined)
        .catch((err: unknown) => this.deps.logger.error({ err, instanceId }, 'presence leave for a gone instance failed'));
    }, this.deps.settings.presenceDropMs);
    timer.unref();
    this.deadInstanceTimers.add(timer);
  }

  /**
   * A connection resumed here that this instance did not hold: its members (on whichever instance
   * entered them) stay present. They leave when it goes from here, and a `held` change on each
   * channel says this instance holds them now, so the cleanup after the one that held them before
   * (its restart's resume window, or its death) leaves them alone. Nobody sees a change.
   */
  private takeOverPresence(conn: Connection): void {
    const { presence, presenceProducer, instanceId, logger } = this.deps;
    const channels = presence.channelsOfConnection(conn.appId, conn.id);
    if (channels.length === 0) return;
    conn.holdsPresenceOn(channels);
    presenceProducer
      .appendAcross(
        conn.appId,
        channels.map((channel) => ({ channel, changes: [{ action: 'held' as const, connectionId: conn.id, instanceId }] })),
      )
      .catch((err: unknown) => logger.error({ err, connectionId: conn.id }, 'presence members of a connection resumed here not taken over; the instance that held them may make them leave'));
  }

  /**
   * The members of every connection held by an instance `held` matches leave: one that died, or
   * this one's previous run after a restart.
   */
  removeMembersHeldBy(held: (instanceId: string) => boolean): Promise<void> {
    return this.presenceSync.removeMembersHeldBy(held);
  }

  /**
   * After a restart, the members this instance's previous run held stay for the resume window
   * (presenceDropMs), as a dropped connection's do: a client that resumes its connection here
   * meanwhile keeps its members without a leave (its SDK enters them again on attach, which
   * refreshes them). Then those of the connections that did not come back here leave, unless
   * entered again elsewhere meanwhile (they are held by that instance now).
   *
   * The window counts from when this instance takes connections (its server listens), not from
   * its start: in production mode a start waits on Kafka and ClickHouse for seconds, and a window
   * counted from there could end before any client could resume (the members then flapped: a
   * leave, then an enter as the SDK entered them again).
   */
  removeMembersOfPreviousRun(held: (instanceId: string) => boolean): void {
    const previous = new Set(this.deps.presence.connectionsHeldBy(held).map((c) => c.connectionId));
    if (previous.size === 0) return this.previousRunDone();
    this.previousRun = () => {
      this.previousRunTimer = setTimeout(() => {
        this.presenceSync
          .removeMembersHeldBy(held, (connectionId) => !previous.has(connectionId) || this.sessions.get(connectionId) !== undefined)
          .catch((err: unknown) => this.deps.logger.error({ err }, "the previous run's members could not be made to leave; they stay until the next restart"))
          .finally(() => this.previousRunDone());
      }, this.deps.settings.presenceDropMs);
      this.previousRunTimer.unref();
    };
  }

  /** Starts the previous run's resume window (removeMembersOfPreviousRun) once `server` listens. */
  private armPreviousRun(server: Server): void {
    const arm = this.previousRun;
    if (!arm) return;
    this.previousRun = undefined;
    if (server.listening) return arm();
    const onListening = (): void => {
      if (!this.closing) arm();
    };
    server.once('listening', onListening);
    this.unsubscribe.push(() => server.off('listening', onListening));
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
