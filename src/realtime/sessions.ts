import type { Logger } from 'pino';
import { secretsEqual } from '../auth/authenticate.js';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import { RecentKeys } from '../recent-keys.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import type { Connection, ConnectionIdentity } from './connection.js';
import { connectionIdOf, verifyConnectionKey } from './connection-key.js';
import type { ConnectionEvents } from './connection-events.js';
import type { ConnectionCounter, PeerSocket } from './context.js';
import { Action, serviceError } from './protocol.js';
import type { RealtimeSettings } from './settings.js';

/** Housekeeping ticks per second, each visiting that share of the connections. */
const TICK_SLICES = 20;

export interface SessionsDeps {
  settings: RealtimeSettings;
  clock: Clock;
  logger: Logger;
  apps: AppRegistry;
  events: ConnectionEvents;
  /** Called on every housekeeping tick. */
  onTick?: (now: number) => void;
}

/**
 * The registry of this instance's connections, by the state table (connection-state.ts): the open
 * and the dropped ones (resumable, bounded by maxConnections, the one dropped longest ago first to
 * go), and the ids of those that ended, here or on another instance. Beside it: the housekeeping
 * tick, token revocation and key changes, and the in-flight budget of all connections together.
 */
export class Sessions {
  private readonly connections = new Map<string, Connection>();
  /** Connections that ended for good, here or on another instance: a resume of one fails (80008). */
  private readonly ended: RecentKeys<true>;
  /** Dropped connections waiting for a resume, the one dropped longest ago first. */
  private readonly waiting = new Set<Connection>();
  private sockets = 0;
  private opened = 0;
  private closed = 0;
  readonly counters: Record<ConnectionCounter, number> = { framesRefused: 0, inboundBudgetDisconnects: 0, slowConsumers: 0, cooledConnections: 0 };
  private ticker: NodeJS.Timeout | undefined;
  /** Where housekeeping goes on at the next tick (a Map iterator sees entries added meanwhile). */
  private tickCursor: IterableIterator<Connection> = new Map<string, Connection>().values();
  /** Bytes of publishes and presence changes not answered yet, all connections together. */
  private inflightTotal = 0;
  /** Over maxTotalInflightBytes: no socket is read until the total is back under three quarters of it. */
  private throttled = false;

  constructor(private readonly deps: SessionsDeps) {
    this.ended = new RecentKeys(2 * deps.settings.maxEndedConnections, Number.MAX_SAFE_INTEGER, () => deps.clock.now());
  }

  start(): void {
    this.ticker = setInterval(() => this.tick(), 1000 / TICK_SLICES);
    this.ticker.unref();
  }

  get(connectionId: string): Connection | undefined {
    return this.connections.get(connectionId);
  }

  /** A socket upgraded: counted until it closes (what maxConnections bounds); returns the count. */
  socketOpened(socket: { once(event: 'close', listener: () => void): unknown }): number {
    this.sockets++;
    socket.once('close', () => this.sockets--);
    return this.sockets;
  }

  /** A connection made here (`fresh`: new, not resumed from another instance). */
  add(conn: Connection, fresh: boolean): void {
    this.connections.set(conn.id, conn);
    if (fresh) this.opened++;
  }

  /** A connection of this registry resumed on a new socket. */
  resume(conn: Connection, socket: PeerSocket, identity: ConnectionIdentity): void {
    this.waiting.delete(conn);
    conn.resume(socket, identity);
  }

  // ---- the connections' moves, as they tell them (ConnectionContext)

  connectionDropped(connectionId: string): void {
    const conn = this.connections.get(connectionId);
    if (!conn) return;
    // Bounded like open ones: a client opening and dropping sockets in a loop would otherwise leave
    // one for every socket, each kept for connectionStateTtl. Over maxConnections, the one that
    // has waited longest ends, as if its window had ended (its members leave).
    this.waiting.add(conn);
    if (this.waiting.size > this.deps.settings.maxConnections) this.waiting.values().next().value!.end('evicted');
  }

  connectionEnded(connectionId: string): void {
    const conn = this.connections.get(connectionId);
    if (!conn) return;
    this.waiting.delete(conn);
    this.connections.delete(connectionId);
    this.closed++;
    this.ended.set(connectionId, true);
    this.deps.events.closed(conn.appId, connectionId);
  }

  /** Resumed on another instance: that one holds it (and its members) now. */
  movedAway(connectionId: string): void {
    const conn = this.connections.get(connectionId);
    if (!conn) return;
    this.connections.delete(connectionId);
    this.waiting.delete(conn);
    conn.end('movedAway');
  }

  /** A connection ended on another instance (the log says). */
  endedElsewhere(connectionId: string): void {
    this.ended.set(connectionId, true);
  }

  /** Whether a connection ended for good, here or (as the log says) on another instance. */
  hasEnded(connectionId: string): boolean {
    return this.ended.has(connectionId);
  }

  // ---- the in-flight budget of all connections

  holdInflight(bytes: number): void {
    this.inflightTotal += bytes;
    if (this.throttled || this.inflightTotal <= this.deps.settings.maxTotalInflightBytes) return;
    // Every socket, not only those with frames in flight: each one read could bring one more frame.
    this.throttled = true;
    this.deps.logger.warn({ inflightBytes: this.inflightTotal }, 'realtime publishes in flight over their total budget; no connection is read until the log catches up');
    for (const conn of this.connections.values()) conn.pauseReading();
  }

  releaseInflight(bytes: number): void {
    this.inflightTotal -= bytes;
    if (!this.throttled || this.inflightTotal > 0.75 * this.deps.settings.maxTotalInflightBytes) return;
    this.throttled = false;
    for (const conn of this.connections.values()) conn.resumeReading();
  }

  get readingThrottled(): boolean {
    return this.throttled;
  }

  // ---- housekeeping

  /**
   * Heartbeats where the gateway was silent, pings where the client was, and dead sockets closed
   * (§6.1). Each tick visits one slice of the connections, so each is visited once a second: one
   * tick for all of them sent the HEARTBEATs and pings of connections made together in one go, and
   * with 10,000 such connections delivery stalled for 140-240 ms every 16 s (test/bench/README.md: Realtime).
   */
  private tick(): void {
    const now = this.deps.clock.now();
    this.deps.onTick?.(now);
    let budget = Math.ceil(this.connections.size / TICK_SLICES);
    while (budget-- > 0) {
      let next = this.tickCursor.next();
      if (next.done) {
        this.tickCursor = this.connections.values();
        next = this.tickCursor.next();
        if (next.done) return;
      }
      next.value.housekeep(now);
    }
  }

  // ---- revocation and key changes

  /**
   * Token revocation: each open connection whose credentials `revoked` matches gets DISCONNECTED
   * 40141 (it may renew its token and resume), or with `hint` an AUTH asking it to renew now.
   */
  revokeConnections(revoked: (credentials: Credentials) => boolean, hint = false): number {
    let n = 0;
    for (const conn of [...this.connections.values()]) {
      if (conn.state !== 'open' || !revoked(conn.credentials)) continue;
      n++;
      if (hint) conn.send({ action: Action.AUTH });
      else conn.disconnect(serviceError('tokenRevoked', 'the token of this connection has been revoked; renew it and resume'));
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
      if (conn.state !== 'open' || conn.credentials.keyName !== keyName) continue;
      const basic = conn.credentials.method === 'basic';
      if (!change.revoked) {
        if (basic) conn.takeCapability(change.capability);
        continue;
      }
      n++;
      if (basic) conn.fail(serviceError('keyRevoked', `key "${keyName}" has been revoked`));
      else conn.disconnect(serviceError('tokenRevoked', `the key that issued this token ("${keyName}") has been revoked`));
    }
    return n;
  }

  /** An app deleted (sandbox DELETE /apps/<appId>): its connections fail (ERROR 40400), on every instance. */
  appDeleted(appId: string): number {
    let n = 0;
    for (const conn of [...this.connections.values()]) {
      if (conn.state !== 'open' || conn.credentials.app.appId !== appId) continue;
      n++;
      conn.fail(serviceError('notFound', `app "${appId}" has been deleted`));
    }
    return n;
  }

  // ---- what others read

  /**
   * The connection a REST publish names by its connectionKey (spec: Message): one held here, or
   * one any instance made for this app (the key's mac checks out under one of the app's keys).
   */
  connectionForKey(appId: string, key: string): { connectionId: string; clientId?: string } | undefined {
    const local = this.connections.get(connectionIdOf(key));
    if (local && local.appId === appId && secretsEqual(local.key, key)) return { connectionId: local.id, clientId: local.clientId };
    for (const k of this.deps.apps.app(appId)?.keys ?? []) {
      const id = verifyConnectionKey(key, k.keySecret, appId);
      if (id !== undefined) return { connectionId: id };
    }
    return undefined;
  }

  /** Open connections (with a socket), per app. */
  connectionsByApp(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const conn of this.connections.values()) if (conn.state === 'open') counts.set(conn.appId, (counts.get(conn.appId) ?? 0) + 1);
    return counts;
  }

  /** Sockets upgraded and not closed yet. */
  get socketCount(): number {
    return this.sockets;
  }

  numbers(): { sockets: number; connections: number; opened: number; closed: number } {
    return { sockets: this.sockets, connections: this.connections.size, opened: this.opened, closed: this.closed };
  }

  /** Shutdown: every connection is told to reconnect (DISCONNECTED) and ends here, its members kept for its resume elsewhere. */
  close(): void {
    clearInterval(this.ticker);
    for (const conn of this.connections.values()) conn.end('shutdown');
    this.connections.clear();
    this.waiting.clear();
  }
}
