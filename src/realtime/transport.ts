import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from 'pino';
import { upgradedConnection } from '../http/connection-limit.js';
import type { PeerSocket } from './context.js';
import type { Connection } from './connection.js';
import type { RealtimeSettings } from './settings.js';

/**
 * A transport's socket as the handshake takes it: what a connection sends on (PeerSocket), and a
 * close the registry counts sockets by. A `ws` WebSocket is one; a comet transport
 * (src/realtime/comet/comet-socket.ts) is one made of HTTP requests.
 */
export interface TransportSocket extends PeerSocket {
  once(event: 'close', listener: () => void): unknown;
}

/** Opens (or resumes) the connection a transport's connect asks for: the handshake (handshake.ts). */
export type OpenConnection = (socket: TransportSocket, params: URLSearchParams, address?: string) => Connection | undefined;

export interface WebSocketTransportDeps {
  settings: RealtimeSettings;
  logger: Logger;
  open: OpenConnection;
  /** Settles once the connect query's credentials can be checked (a JWT not seen yet is checked asynchronously). */
  credentialsPending: (params: URLSearchParams) => Promise<void> | undefined;
  /** Whether the gateway is closing (upgrades are refused with 503). */
  closing: () => boolean;
}

/**
 * The WebSocket transport (REALTIME-PROTOCOL.md §1): upgrades on `/` of the REST port, one
 * ProtocolMessage a frame. What the connection makes of the frames is the handshake's and the
 * Connection's, as for every transport.
 */
export class WebSocketTransport {
  private readonly wss: WebSocketServer;

  constructor(private readonly deps: WebSocketTransportDeps) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: deps.settings.maxFrameBytes, perMessageDeflate: false, clientTracking: false });
  }

  /** Takes WebSocket upgrades on `server`. */
  listen(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(server, req, socket, head));
  }

  close(): void {
    this.wss.close();
  }

  private upgrade(server: Server, req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      url = new URL('http://localhost/invalid');
    }
    const closing = this.deps.closing();
    if (url.pathname !== '/' || closing) {
      // Destroyed once written, as ws's own refusals are: a client that never closes its end
      // would otherwise hold the socket open.
      socket.once('finish', () => socket.destroy());
      socket.end(`HTTP/1.1 ${closing ? '503 Service Unavailable' : '404 Not Found'}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      upgradedConnection(server, socket);
      this.accept(ws, url.searchParams, req.socket.remoteAddress);
    });
  }

  private accept(ws: WebSocket, params: URLSearchParams, address: string | undefined): void {
    ws.binaryType = 'nodebuffer';
    ws.on('error', (err) => this.deps.logger.debug({ err }, 'realtime socket error'));
    // A JWT seen for the first time is checked asynchronously (src/auth/jwt.ts) before the rest.
    const pending = this.deps.credentialsPending(params);
    if (pending) {
      void pending.then(() => {
        if (ws.readyState === ws.OPEN) this.open(ws, params, address);
      });
    } else {
      this.open(ws, params, address);
    }
  }

  private open(ws: WebSocket, params: URLSearchParams, address: string | undefined): void {
    const conn = this.deps.open(ws, params, address);
    if (!conn) return;
    ws.on('message', (data: Buffer, isBinary: boolean) => conn.receive(ws, data, isBinary));
    ws.on('pong', () => conn.heard(ws));
    ws.once('close', () => conn.socketClosed(ws));
  }
}
