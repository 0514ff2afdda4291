import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Bounds the open HTTP connections (MAX_CONNECTIONS) without counting the ones upgraded to
 * WebSocket, which the realtime gateway bounds itself (REALTIME_MAX_CONNECTIONS, refused in band
 * with 42910). Node's `server.maxConnections` counts every TCP connection, upgraded or not: with it,
 * the socket after MAX_CONNECTIONS realtime clients was reset before the gateway saw it, which the
 * SDK takes for a network failure and retries for ever. A connection over the limit is closed at
 * once, as Node's limit does.
 */
export function limitHttpConnections(server: Server, max: number): void {
  let open = 0;
  const upgraded = new WeakSet<Socket>();
  server.on('connection', (socket: Socket) => {
    open++;
    socket.once('close', () => {
      if (!upgraded.has(socket)) open--;
    });
    if (open > max) socket.destroy();
  });
  // Listeners run in the order they were added: this one is added before the gateway's.
  server.on('upgrade', (_req, socket: Socket) => {
    if (upgraded.has(socket)) return;
    upgraded.add(socket);
    open--;
  });
}
