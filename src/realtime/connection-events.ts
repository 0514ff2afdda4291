import type { Logger } from 'pino';
import type { AppendBatcher } from '../log/append-batcher.js';
import type { Log, Subscription } from '../log/port.js';
import { Topics } from '../log/port.js';
import { channelKey, decodeEvent, encodeEvent, type ConnectionEvent } from '../log/events.js';
import type { Clock } from '../clock.js';

export interface ConnectionEventsOptions {
  log: Log;
  batcher: AppendBatcher;
  clock: Clock;
  logger: Logger;
  instanceId: string;
  consumerName: string;
  /** Instances say they are alive this often (production mode only; 0: never). */
  aliveIntervalMs: number;
  /**
   * The only instance on this log (the embedded mode): its start ends every earlier run's
   * attachments, as its presence members leave (src/service.ts), not only those of its own id.
   */
  soleInstance: boolean;
}

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
 */
export class ConnectionEvents {
  private subscription: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Instances known to hold members, and when each was last heard of (this process's clock). */
  private readonly lastSeen = new Map<string, number>();
  private startedAt: number | undefined;

  constructor(private readonly options: ConnectionEventsOptions) {}

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
    this.subscription = log.consume({
      topic: Topics.connections,
      consumer: this.options.consumerName,
      from: await log.endOffsets(Topics.connections),
      handle: (records) => {
        for (const r of records) {
          const event = decodeEvent(r.value) as ConnectionEvent;
          if (event.type === 'connection.opened' && event.instanceId !== instanceId) handlers.movedAway(event.connectionId);
          if (event.type === 'connection.closed') handlers.ended(event.connectionId);
          if (event.type === 'instance.alive' && event.instanceId !== instanceId) {
            // A new instance learns of this one at once, not an interval later (leads()).
            if (!this.lastSeen.has(event.instanceId) && this.options.aliveIntervalMs > 0) this.alive();
            this.lastSeen.set(event.instanceId, clock.now());
          }
        }
      },
      onError: (err) => this.options.logger.error({ err }, 'connection events consumer failed on a batch; retrying'),
    });
    await this.subscription.caughtUp;
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

  private checkDead(handlers: ConnectionEventHandlers): void {
    const now = this.options.clock.now();
    const deadline = 3 * this.options.aliveIntervalMs;
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
    this.append({ type: 'connection.opened', appId, connectionId, instanceId: this.options.instanceId, resumed }, connectionId);
  }

  closed(appId: string, connectionId: string): void {
    this.append({ type: 'connection.closed', appId, connectionId, instanceId: this.options.instanceId }, connectionId);
  }

  /** An attachment began (channel occupancy and activity: projections/channels). */
  attached(appId: string, channel: string, connectionId: string, modes: number): void {
    this.append({ type: 'channel.attached', appId, channel, connectionId, instanceId: this.options.instanceId, modes }, channelKey(appId, channel));
  }

  detached(appId: string, channel: string, connectionId: string): void {
    this.append({ type: 'channel.detached', appId, channel, connectionId }, channelKey(appId, channel));
  }

  private alive(): void {
    this.append({ type: 'instance.alive', instanceId: this.options.instanceId }, this.options.instanceId);
  }

  private append(event: ConnectionEvent, key: string): void {
    this.options.batcher
      .append(Topics.connections, [{ key, build: () => encodeEvent(event) }])
      .catch((err) => this.options.logger.warn({ err, event: event.type }, 'connection event not appended'));
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.subscription?.stop();
  }
}
