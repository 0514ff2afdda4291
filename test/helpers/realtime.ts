import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import * as Ably from 'ably';

/**
 * An `Ably.Realtime` client of the service listening on 127.0.0.1:`port`. `endpoint` is an IP
 * address, so the SDK uses no fallback hosts (REC1b2); `tls: false` makes it use `port` as is.
 * `autoConnect` stays on unless the options turn it off.
 */
export function realtimeClient(port: number, useBinaryProtocol: boolean, options: Ably.ClientOptions): Ably.Realtime {
  return new Ably.Realtime({
    endpoint: '127.0.0.1',
    port,
    tls: false,
    useBinaryProtocol,
    logLevel: 0,
    ...options,
  });
}

/** Rejects after `ms` with a message saying what was awaited, instead of hanging until the test timeout. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Resolves once the connection is in `state`; rejects if it reaches failed/closed first
 * (with the connection's error, so a failed connect shows why).
 */
export async function connectionState(client: Ably.Realtime, state: Ably.ConnectionState, ms = 15_000): Promise<void> {
  const conn = client.connection;
  if (conn.state === state) return;
  await within(
    new Promise<void>((resolve, reject) => {
      const listener = (change: Ably.ConnectionStateChange): void => {
        if (change.current === state) {
          conn.off(listener);
          resolve();
        } else if (change.current === 'failed' || change.current === 'closed') {
          conn.off(listener);
          const reason = change.reason ? ` (${change.reason.code} ${change.reason.message})` : '';
          reject(new Error(`connection went ${change.current}${reason} while waiting for ${state}`));
        }
      };
      conn.on(listener);
    }),
    ms,
    `connection state ${state} (it is ${conn.state}${conn.errorReason ? `, ${conn.errorReason.code} ${conn.errorReason.message}` : ''})`,
  );
}

type StateChange = { current: string; reason?: Ably.ErrorInfo; resumed?: boolean };
type StateEmitter = { on(listener: (change: StateChange) => void): void };
/** One state change: the state, the reason's code if any, and for a channel whether it resumed. */
export type LoggedState = { current: string; code?: number; resumed?: boolean };

/** Every state change of a connection or channel, in order, from now on (an `update` event shows as its unchanged state). */
export function stateLog(emitter: Ably.Connection | Ably.RealtimeChannel): LoggedState[] {
  const log: LoggedState[] = [];
  (emitter as unknown as StateEmitter).on((change) => {
    const entry: LoggedState = { current: change.current };
    if (change.reason) entry.code = change.reason.code;
    if (change.resumed !== undefined) entry.resumed = change.resumed;
    log.push(entry);
  });
  return log;
}

/** Items (messages or presence events) as they arrive, with a wait for a condition on them. */
export class Arrivals<T> {
  readonly items: T[] = [];
  private waiters: { check: () => boolean; resolve: () => void }[] = [];

  readonly push = (item: T): void => {
    this.items.push(item);
    this.waiters = this.waiters.filter((w) => {
      if (!w.check()) return true;
      w.resolve();
      return false;
    });
  };

  /** Resolves once `predicate` holds for the items received so far. */
  until(predicate: (items: T[]) => boolean, what: string, ms = 15_000): Promise<T[]> {
    if (predicate(this.items)) return Promise.resolve(this.items);
    return within(
      new Promise<T[]>((resolve) => {
        this.waiters.push({ check: () => predicate(this.items), resolve: () => resolve(this.items) });
      }),
      ms,
      `${what} (got ${this.items.length} so far)`,
    );
  }

  /** Resolves once at least `n` items arrived. */
  count(n: number, ms = 15_000): Promise<T[]> {
    return this.until((items) => items.length >= n, `${n} items`, ms);
  }
}

/** Subscribes to every message of a channel (attaching it) and collects them. */
export async function collectMessages(channel: Ably.RealtimeChannel): Promise<Arrivals<Ably.InboundMessage>> {
  const arrivals = new Arrivals<Ably.InboundMessage>();
  await channel.subscribe(arrivals.push);
  return arrivals;
}

/** Subscribes to every presence event of a channel (attaching it) and collects them. */
export async function collectPresence(channel: Ably.RealtimeChannel): Promise<Arrivals<Ably.PresenceMessage>> {
  const arrivals = new Arrivals<Ably.PresenceMessage>();
  await channel.presence.subscribe(arrivals.push);
  return arrivals;
}

/** The clients a test made, closed (and awaited) in its teardown. */
export class Clients {
  private readonly all: Ably.Realtime[] = [];

  add(client: Ably.Realtime): Ably.Realtime {
    this.all.push(client);
    return client;
  }

  async closeAll(): Promise<void> {
    const open = this.all.splice(0);
    await Promise.all(
      open.map(async (client) => {
        const state = client.connection.state;
        if (state === 'closed' || state === 'failed') return;
        client.close();
        await within(client.connection.whenState('closed'), 10_000, 'a client to close').catch(() => undefined);
      }),
    );
  }
}

/**
 * A TCP relay between SDK clients and the service, to break connections as a network does: `cut()`
 * destroys every relayed socket on both sides at once (no WebSocket close frame, no DISCONNECT from
 * the SDK, the service sees the TCP connection end) and holds the connections made after it (the
 * SDK's reconnection attempts wait, unanswered) until `release()` relays them to the service.
 */
export class NetworkCut {
  private holding = false;
  private readonly open = new Set<Socket>();
  private readonly held: Socket[] = [];
  private heldWaiters: (() => void)[] = [];
  /** The service-to-client half of every relayed connection, to mute. */
  private readonly downstreams = new Map<Socket, Socket>();

  private constructor(
    private readonly server: Server,
    private readonly targetPort: number,
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  static async start(targetPort: number): Promise<NetworkCut> {
    const server = createServer();
    const cut = new NetworkCut(server, targetPort);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return cut;
  }

  /** The port SDK clients connect to. */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Connections the relay has accepted and holds, not yet relayed. */
  get waiting(): number {
    return this.held.length;
  }

  private accept(client: Socket): void {
    this.open.add(client);
    client.on('close', () => this.open.delete(client));
    client.on('error', () => client.destroy());
    if (this.holding) {
      client.pause();
      this.held.push(client);
      for (const wake of this.heldWaiters.splice(0)) wake();
      return;
    }
    this.relay(client);
  }

  private relay(client: Socket): void {
    if (client.destroyed) return;
    const upstream = connect(this.targetPort, '127.0.0.1');
    this.open.add(upstream);
    upstream.on('close', () => {
      this.open.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => {
      upstream.destroy();
      this.downstreams.delete(upstream);
    });
    client.pipe(upstream);
    upstream.pipe(client);
    this.downstreams.set(upstream, client);
  }

  /**
   * Stops relaying what the service sends (it is kept back, never delivered) while the clients'
   * frames still reach it: an ACK the service sends now is lost with the next `cut()`.
   */
  mute(): void {
    for (const [upstream, client] of this.downstreams) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  /** Breaks every relayed connection and holds new ones. */
  cut(): void {
    this.holding = true;
    this.downstreams.clear();
    for (const socket of [...this.open]) if (!this.held.includes(socket)) socket.destroy();
  }

  /** Relays the held connections and every new one. */
  release(): void {
    this.holding = false;
    for (const client of this.held.splice(0)) this.relay(client);
  }

  /** Resolves once a connection is held (the SDK is trying to reconnect). */
  async untilHolding(ms = 15_000): Promise<void> {
    if (this.held.length > 0) return;
    await within(new Promise<void>((resolve) => this.heldWaiters.push(resolve)), ms, 'a reconnection attempt to reach the relay');
  }

  async close(): Promise<void> {
    for (const socket of [...this.open]) socket.destroy();
    this.held.splice(0);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The token the SDK holds now (`auth.tokenDetails`, which the SDK's typings leave out). */
export const currentToken = (client: Ably.Realtime): string | undefined =>
  (client.auth as unknown as { tokenDetails?: Ably.TokenDetails }).tokenDetails?.token;
