import type { Logger } from 'pino';
import type { AppendBatcher } from '../log/append-batcher.js';
import type { ConsumeOptions, Log, Subscription } from '../log/port.js';
import { isLogClosed, lagOf, Topics } from '../log/port.js';
import { channelKey } from '../log/partitioner.js';
import { decodeEvent, encodeEvent } from '../log/event-codec.js';
import type { ConnectionEvent } from '../domain/events.js';
import type { Clock } from '../clock.js';
import { ChannelUse } from './channel-use.js';

export interface ConnectionEventsOptions {
  log: Log;
  batcher: AppendBatcher;
  clock: Clock;
  logger: Logger;
  instanceId: string;
  consumerName: string;
  /**
   * How it reads the log: the projection runner's join (projections/runner.ts), which hands it the
   * records the projections' consumer of the topic fetched and decoded; default Log.consume. Either
   * way its lag is its own (lag(): GET /ready, GET /metrics as `connection-events`).
   */
  consume?: (options: ConsumeOptions) => Subscription;
  /** Instances say they are alive this often (production mode only; 0: never). */
  aliveIntervalMs: number;
  /**
   * The only instance on this log (the embedded mode): its start ends every earlier run's
   * attachments, as its presence members leave (src/service.ts), not only those of its own id.
   */
  soleInstance: boolean;
  /**
   * `channel.attached` events one connection may append: `rate` a second on average, bursts of
   * `burst` (REALTIME_ATTACHMENT_EVENTS_RATE; README: Resource limits).
   */
  attachmentEvents: { rate: number; burst: number };
}

/** One connection's attachments as this instance appended them, and its budget for more. */
interface ConnectionAttachments {
  appId: string;
  tokens: number;
  refilledAt: number;
  /** channel -> modes: attachments appended and not ended */
  logged: Map<string, number>;
  /** channel -> modes: attachments not appended yet (no token left), oldest first */
  pending: Map<string, number>;
}

/** How often attachments held back are appended as the budget refills. */
const FLUSH_MS = 250;
/** Every this many flushes, connections with nothing appended and a full budget are forgotten. */
const SWEEP_EVERY = 20;

export interface ConnectionEventHandlers {
  /** Another instance made or resumed this connection: it is no longer this one's. */
  movedAway(connectionId: string): void;
  /** An instance has not said it is alive for three intervals, and this one is to clean up after it. */
  instanceDead(instanceId: string): void;
  /** A connection ended for good on some instance (CLOSE, a fatal error, its resume window over). */
  ended(connectionId: string): void;
}

/**
 * The gateways' connection events on the `connections` topic (ARCHITECTURE: the realtime
 * gateway): which instance holds which connection, and which instances are alive. It is how a
 * connection resumed on another instance stops being dropped by the first, and how the members of
 * an instance that died are removed: the surviving instance with the smallest id removes them.
 *
 * Attach and detach churn is bounded per connection (issue 22: 85,000 attaches in 40 s grew
 * DATA_DIR from 0.2 to 54.6 MB and the restart from 3.6 to 9.1 s, since every start reads the
 * whole topic): a `channel.attached` takes a token of the connection's bucket, and one without a
 * token waits, netted per channel, until the bucket refills. A detach of an attachment still
 * waiting cancels it and appends nothing; a detach of an appended one is appended at once, so a
 * resume elsewhere is never overtaken by it. So a connection appends at most twice its bucket's
 * tokens, and occupancy is exact once the waiting attachments are appended.
 */
export class ConnectionEvents {
  private subscription: Subscription | undefined;
  private isReading = false;
  private timer: NodeJS.Timeout | undefined;
  /** Instances known to hold members, and when each was last heard of (this process's clock). */
  private readonly lastSeen = new Map<string, number>();
  private startedAt: number | undefined;
  /** When the reader last applied a batch (checkDead: a stalled reader declares nobody dead). */
  private handledAt: number | undefined;
  private stallReported = false;
  private readonly byConnection = new Map<string, ConnectionAttachments>();
  /** Connections with attachments waiting for a token. */
  private readonly waiting = new Set<string>();
  private flusher: NodeJS.Timeout | undefined;
  private flushes = 0;
  /**
   * Connections this instance opened or resumed whose `connection.opened` it has not read back yet:
   * another instance's `connection.opened` of one of them before it in the log (both are keyed by
   * the connection: one partition, in order) is older, not a move away. A consumer behind by a
   * moment read the previous holder's open after the client had resumed here, and ended it.
   */
  private readonly ownOpens = new Map<string, number>();

  /** The stats' mark of an attached channel (on the messages topic). */
  private readonly channelUse: ChannelUse;

  constructor(private readonly options: ConnectionEventsOptions) {
    this.channelUse = new ChannelUse(options);
  }

  /**
   * Starts reading from the topic's end. `suspects` are instances that hold members now (from the
   * presence projection): each has three intervals to say it is alive.
   */
  async start(handlers: ConnectionEventHandlers, suspects: Iterable<string>): Promise<void> {
    const { log, instanceId, clock } = this.options;
    this.startedAt = clock.now();
    // Before any attachment of this run: the attachments of an earlier run end (projections/channels).
    this.append({ type: 'instance.started', instanceId, ...(this.options.soleInstance ? { endsAll: true } : {}) }, instanceId);
    for (const id of suspects) if (id !== instanceId) this.lastSeen.set(id, clock.now());
    const consume = this.options.consume ?? ((options: ConsumeOptions) => log.consume(options));
    this.subscription = consume({
      topic: Topics.connections,
      consumer: this.options.consumerName,
      from: await log.endOffsets(Topics.connections),
      handle: (records) => {
        this.handledAt = clock.now();
        for (const r of records) {
          // Per record: a record this cannot apply is logged and passed over, never retried, so it
          // cannot hold back the readers sharing this feed (the channels and stats projections).
          try {
            this.apply(decodeEvent(r.value) as ConnectionEvent, handlers);
          } catch (err) {
            this.options.logger.error({ err, partition: r.partition, offset: r.offset }, 'connection events: a record could not be applied; passed over');
          }
        }
      },
      onError: (err) => this.options.logger.error({ err }, 'connection events consumer failed on a batch; retrying'),
    });
    const reading = this.subscription.reading;
    if (reading) void reading.then(() => (this.isReading = true));
    else this.isReading = true;
    await this.subscription.caughtUp;
    this.handledAt = clock.now();
    this.flusher = setInterval(() => this.flush(), FLUSH_MS);
    this.flusher.unref();
    const every = this.options.aliveIntervalMs;
    if (every > 0) {
      this.alive();
      this.timer = setInterval(() => {
        this.alive();
        this.checkDead(handlers);
      }, every);
      this.timer.unref();
    }
  }

  /**
   * Records of the topic it has yet to read: the log's end as its consumer last saw it, minus
   * where it is (GET /ready's `consumers` check, GET /metrics: `connection-events`); 0 before it started.
   */
  /** Whether its consumer reads the log (Subscription.reading: on Kafka, once its group is joined; GET /ready). */
  get reading(): boolean {
    return this.isReading;
  }

  lag(): number {
    return this.subscription ? lagOf(this.subscription) : 0;
  }

  /**
   * Whether this instance is the one that acts for all (the alive instance with the smallest id,
   * as for cleaning up after a dead one): always, in the embedded mode; in production mode, never
   * during its first alive interval, while it learns which others are alive.
   */
  leads(): boolean {
    if (this.options.aliveIntervalMs === 0) return true;
    const now = this.options.clock.now();
    // Not before it has heard the others (they answer its first alive at once): for one interval.
    if (this.startedAt === undefined || now - this.startedAt < this.options.aliveIntervalMs) return false;
    const deadline = 3 * this.options.aliveIntervalMs;
    for (const [id, seen] of this.lastSeen) if (id < this.options.instanceId && now - seen <= deadline) return false;
    return true;
  }

  /** Whether another instance said it is alive within the last three intervals (one declared dead may come back: a restart under the same id). */
  isAlive(instanceId: string): boolean {
    const seen = this.lastSeen.get(instanceId);
    return seen !== undefined && this.options.clock.now() - seen <= 3 * this.options.aliveIntervalMs;
  }

  private apply(event: ConnectionEvent, handlers: ConnectionEventHandlers): void {
    const { instanceId, clock } = this.options;
    if (event.type === 'connection.opened' && event.instanceId === instanceId) {
      const left = (this.ownOpens.get(event.connectionId) ?? 1) - 1;
      if (left > 0) this.ownOpens.set(event.connectionId, left);
      else this.ownOpens.delete(event.connectionId);
    }
    if (event.type === 'connection.opened' && event.instanceId !== instanceId && !this.ownOpens.has(event.connectionId)) {
      // The other instance attaches it now: this one's detaches would end its attachments.
      this.forgetConnection(event.connectionId);
      handlers.movedAway(event.connectionId);
    }
    if (event.type === 'connection.closed') {
      this.forgetConnection(event.connectionId);
      handlers.ended(event.connectionId);
    }
    if (event.type === 'instance.alive' && event.instanceId !== instanceId) {
      // A new instance learns of this one at once, not an interval later (leads()).
      if (!this.lastSeen.has(event.instanceId) && this.options.aliveIntervalMs > 0) this.alive();
      this.lastSeen.set(event.instanceId, clock.now());
    }
  }

  private checkDead(handlers: ConnectionEventHandlers): void {
    const now = this.options.clock.now();
    const deadline = 3 * this.options.aliveIntervalMs;
    // This instance reads its own alive records back every interval: a reader that has applied
    // nothing for two intervals is stalled (the log unreachable, or a reader sharing its feed
    // failing on a batch), and what it has not read says nothing about the others.
    if (this.handledAt !== undefined && now - this.handledAt > 2 * this.options.aliveIntervalMs) {
      if (!this.stallReported) this.options.logger.warn({ sinceMs: now - this.handledAt, lag: this.lag() }, 'connection events: the reader has applied nothing for two alive intervals; no instance is declared dead until it reads again');
      this.stallReported = true;
      return;
    }
    this.stallReported = false;
    const alive = [this.options.instanceId];
    const dead: string[] = [];
    for (const [id, seen] of this.lastSeen) (now - seen > deadline ? dead : alive).push(id);
    // One instance cleans up: the alive one with the smallest id. Should two disagree for a
    // moment, both append the same leaves, and a leave of a member already gone changes nothing.
    const leader = alive.sort()[0] === this.options.instanceId;
    for (const id of dead) {
      this.lastSeen.delete(id);
      if (leader) {
        this.append({ type: 'instance.gone', instanceId: id }, id);
        handlers.instanceDead(id);
      }
    }
  }

  opened(appId: string, connectionId: string, resumed: boolean): void {
    // Bounded by the connections opening now: each is removed as it is read back (or on failure).
    this.ownOpens.set(connectionId, (this.ownOpens.get(connectionId) ?? 0) + 1);
    this.append({ type: 'connection.opened', appId, connectionId, instanceId: this.options.instanceId, resumed }, connectionId);
  }

  closed(appId: string, connectionId: string): void {
    // It ends every attachment of the connection (projections/channels): none waits any more.
    this.forgetConnection(connectionId);
    this.append({ type: 'connection.closed', appId, connectionId, instanceId: this.options.instanceId }, connectionId);
  }

  /** An attachment began (channel occupancy and activity: projections/channels), within the connection's budget. */
  attached(appId: string, channel: string, connectionId: string, modes: number): void {
    const c = this.attachmentsOf(appId, connectionId);
    c.pending.delete(channel);
    if (c.logged.get(channel) === modes) return;
    if (this.take(c)) return this.appendAttached(connectionId, c, channel, modes);
    c.pending.set(channel, modes);
    this.waiting.add(connectionId);
  }

  detached(appId: string, channel: string, connectionId: string): void {
    const c = this.byConnection.get(connectionId);
    if (!c) return;
    c.pending.delete(channel);
    if (c.logged.delete(channel)) this.append({ type: 'channel.detached', appId, channel, connectionId }, channelKey(appId, channel));
  }

  private appendAttached(connectionId: string, c: ConnectionAttachments, channel: string, modes: number): void {
    c.logged.set(channel, modes);
    this.channelUse.attached(c.appId, channel);
    this.append({ type: 'channel.attached', appId: c.appId, channel, connectionId, instanceId: this.options.instanceId, modes }, channelKey(c.appId, channel));
  }

  private attachmentsOf(appId: string, connectionId: string): ConnectionAttachments {
    let c = this.byConnection.get(connectionId);
    if (!c) {
      c = { appId, tokens: this.options.attachmentEvents.burst, refilledAt: this.options.clock.now(), logged: new Map(), pending: new Map() };
      this.byConnection.set(connectionId, c);
    }
    return c;
  }

  /** Refills the bucket for the time passed; takes a token if there is one. */
  private take(c: ConnectionAttachments): boolean {
    const { rate, burst } = this.options.attachmentEvents;
    const now = this.options.clock.now();
    c.tokens = Math.min(burst, c.tokens + (Math.max(0, now - c.refilledAt) * rate) / 1000);
    c.refilledAt = now;
    if (c.tokens < 1) return false;
    c.tokens--;
    return true;
  }

  /**
   * Appends the waiting attachments the budgets allow; marks the attached channels in a new stats
   * interval; now and then forgets idle connections.
   */
  private flush(): void {
    this.channelUse.refresh(() => this.attachedChannels());
    for (const id of this.waiting) {
      const c = this.byConnection.get(id);
      if (c) {
        for (const [channel, modes] of c.pending) {
          if (!this.take(c)) break;
          c.pending.delete(channel);
          this.appendAttached(id, c, channel, modes);
        }
      }
      if (!c || c.pending.size === 0) this.waiting.delete(id);
    }
    if (++this.flushes % SWEEP_EVERY !== 0) return;
    // A full bucket is what a new one would have: forgetting it frees nothing a churn could reuse.
    const { rate, burst } = this.options.attachmentEvents;
    const now = this.options.clock.now();
    for (const [id, c] of this.byConnection) {
      if (c.logged.size === 0 && c.pending.size === 0 && c.tokens + ((now - c.refilledAt) * rate) / 1000 >= burst) this.byConnection.delete(id);
    }
  }

  /** Every channel a connection of this instance has an attachment on (logged), as appId and channel. */
  private *attachedChannels(): Iterable<[string, string]> {
    for (const c of this.byConnection.values()) for (const channel of c.logged.keys()) yield [c.appId, channel];
  }

  private forgetConnection(connectionId: string): void {
    this.byConnection.delete(connectionId);
    this.waiting.delete(connectionId);
  }

  private alive(): void {
    this.append({ type: 'instance.alive', instanceId: this.options.instanceId }, this.options.instanceId);
  }

  private append(event: ConnectionEvent, key: string): void {
    this.options.batcher
      .append(Topics.connections, [{ key, build: () => encodeEvent(event) }])
      .catch((err) => {
        // Never read back: an open not appended stops shielding its connection.
        if (event.type === 'connection.opened') this.ownOpens.delete(event.connectionId);
        // The log closed under it: the service is stopping (a stop during the start included).
        if (isLogClosed(err)) this.options.logger.debug({ event: event.type }, 'connection event not appended: the log is closed');
        else this.options.logger.warn({ err, event: event.type }, 'connection event not appended');
      });
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.flusher);
    await this.subscription?.stop();
  }
}
