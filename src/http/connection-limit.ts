import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

/** Per server: takes a socket the realtime gateway accepted out of the HTTP count. */
const upgradeHooks = new WeakMap<Server, (socket: Duplex) => void>();

/**
 * Bounds the open HTTP connections (MAX_CONNECTIONS) without counting the ones the realtime
 * gateway accepted as WebSocket connections, which it bounds itself (REALTIME_MAX_CONNECTIONS,
 * refused in band with 42910). Node's `server.maxConnections` counts every TCP connection: with
 * it, the socket after MAX_CONNECTIONS realtime clients was reset before the gateway saw it, which
 * the SDK takes for a network failure and retries for ever. A socket leaves the count only once
 * the gateway has accepted it (upgradedConnection), so an upgrade the gateway refuses, or one
 * that never completes, still counts. A connection over the limit is closed at once.
 */
export function limitHttpConnections(server: Server, max: number): void {
  let open = 0;
  const upgraded = new WeakSet<Duplex>();
  server.on('connection', (socket: Duplex) => {
    open++;
    socket.once('close', () => {
      if (!upgraded.has(socket)) open--;
    });
    if (open > max) socket.destroy();
  });
  upgradeHooks.set(server, (socket) => {
    if (upgraded.has(socket)) return;
    upgraded.add(socket);
    open--;
  });
}

/** The gateway accepted `socket` as a WebSocket connection: it no longer counts as HTTP. */
export function upgradedConnection(server: Server, socket: Duplex): void {
  upgradeHooks.get(server)?.(socket);
}
