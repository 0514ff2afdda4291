import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { PresenceProducer } from '../presence/presence-producer.js';
import type { PresenceProjection } from '../../projections/presence/presence-projection.js';
import type { ConnectionEvents } from './connection-events.js';
import type { Connection } from './connection.js';
import type { PresenceSync } from './presence-sync.js';
import type { Sessions } from './sessions.js';
import type { RealtimeSettings } from './settings.js';

export interface PresenceHandoverDeps {
  presence: Pick<PresenceProjection, 'connectionsHeldBy' | 'channelsOfConnection'>;
  presenceProducer: PresenceProducer;
  presenceSync: PresenceSync;
  /** The connections here: one resumed here keeps its members. */
  sessions: Pick<Sessions, 'get'>;
  events: Pick<ConnectionEvents, 'isAlive'>;
  settings: RealtimeSettings;
  instanceId: string;
  logger: Logger;
  /** Whether the gateway is closing. */
  closing: () => boolean;
}

/**
 * The presence members of connections whose instance went, for the gateway: those of a dead
 * instance, and of this one's previous run after a restart, leave after the resume window; those
 * of a connection resumed here are taken over.
 */
export class PresenceHandover {
  /** The leave of the members of the previous run whose connections did not come back (removeMembersOfPreviousRun). */
  private previousRunTimer: NodeJS.Timeout | undefined;
  /** Arms previousRunTimer: set by removeMembersOfPreviousRun, called once the server listens. */
  private previousRun: (() => void) | undefined;
  private previousRunDone!: () => void;
  /** The resume windows of dead instances' members (removeMembersOfDeadInstance). */
  private readonly deadInstanceTimers = new Set<NodeJS.Timeout>();
  private readonly unsubscribe: (() => void)[] = [];
  /**
   * Settles once the previous run's members whose connections did not come back have been made to
   * leave (their drops appended), or at once when there were none; never rejects.
   */
  readonly previousRunSettled = new Promise<void>((resolve) => (this.previousRunDone = resolve));

  constructor(private readonly deps: PresenceHandoverDeps) {}

  /** Stops the resume windows: nobody leaves after a close. */
  close(): void {
    clearTimeout(this.previousRunTimer);
    this.previousRunDone();
    for (const timer of this.deadInstanceTimers) clearTimeout(timer);
    this.deadInstanceTimers.clear();
    for (const unsubscribe of this.unsubscribe.splice(0)) unsubscribe();
  }

  /**
   * The members of an instance silent for three alive intervals leave once the resume window
   * (presenceDropMs) has passed, as a dropped connection's do: its clients may be resuming
   * elsewhere meanwhile (a restart longer than three intervals, a crash). Those that resumed on
   * another instance are held by it by then (takeOverPresence); those that resumed here are kept
   * even if their `held` change is not applied yet (a drop applied after it would still remove them).
   * An instance that came back meanwhile under the same id deals with its previous run's members itself.
   */
  removeMembersOfDeadInstance(instanceId: string): void {
    const timer = setTimeout(() => {
      this.deadInstanceTimers.delete(timer);
      // Back meanwhile (a restart under the same id): its own start keeps or removes what its previous run held.
      if (this.deps.events.isAlive(instanceId)) return;
      this.deps.presenceSync
        .removeMembersHeldBy((id) => id === instanceId, (connectionId) => this.deps.sessions.get(connectionId) !== undefined)
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
  takeOverPresence(conn: Connection): void {
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
    return this.deps.presenceSync.removeMembersHeldBy(held);
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
        this.deps.presenceSync
          .removeMembersHeldBy(held, (connectionId) => !previous.has(connectionId) || this.deps.sessions.get(connectionId) !== undefined)
          .catch((err: unknown) => this.deps.logger.error({ err }, "the previous run's members could not be made to leave; they stay until the next restart"))
          .finally(() => this.previousRunDone());
      }, this.deps.settings.presenceDropMs);
      this.previousRunTimer.unref();
    };
  }

  /** Starts the previous run's resume window (removeMembersOfPreviousRun) once `server` listens. */
  armPreviousRun(server: Server): void {
    const arm = this.previousRun;
    if (!arm) return;
    this.previousRun = undefined;
    if (server.listening) return arm();
    const onListening = (): void => {
      if (!this.deps.closing()) arm();
    };
    server.once('listening', onListening);
    this.unsubscribe.push(() => server.off('listening', onListening));
  }
}
