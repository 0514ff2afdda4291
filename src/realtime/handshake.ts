import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Logger } from 'pino';
import { ServiceError } from '../errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import { upgradedConnection } from '../http/connection-limit.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { Connection, type ConnectionIdentity } from './connection.js';
import { connectionIdOf, connectionKeyFor, newConnectionId, verifyConnectionKey } from './connection-key.js';
import type { ConnectionEvents } from './connection-events.js';
import type { ConnectionContext } from './context.js';
import { Action, encodeFrame, serviceError, toWireError, type WireError, type WireFormat } from './protocol.js';
import type { Sessions } from './sessions.js';
import type { RealtimeSettings } from './settings.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const isTokenError = (code: number): boolean => code >= 40140 && code < 40150;

export interface HandshakeDeps {
  authenticator: Authenticator;
  apps: AppRegistry;
  sessions: Sessions;
  /** What the connections made here may ask of the gateway. */
  context: ConnectionContext;
  events: ConnectionEvents;
  settings: RealtimeSettings;
  clock: Clock;
  logger: Logger;
  /** Whether the gateway is closing (upgrades are refused with 503). */
  closing: () => boolean;
}

/**
 * Connecting (REALTIME-PROTOCOL.md §1, §6, §7): the WebSocket upgrade, the credentials of the
 * connect query, and the connection it makes or resumes (`resume` or `recover`: the key proves
 * the connection, made here or on another instance). Every refusal goes in-band.
 */
export class Handshake {
  private readonly wss: WebSocketServer;

  constructor(private readonly deps: HandshakeDeps) {
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
      this.accept(ws, url.searchParams);
    });
  }

  private accept(ws: WebSocket, params: URLSearchParams): void {
    // A JWT seen for the first time is checked asynchronously (src/auth/jwt.ts) before the rest.
    const pending = params.get('key') ? undefined : this.tokenPending(params.get('access_token') ?? params.get('accessToken'));
    if (pending) {
      void pending.then(() => {
        if (ws.readyState === ws.OPEN) this.accept(ws, params);
      });
      return;
    }
    const { sessions, settings, logger } = this.deps;
    const format: WireFormat = params.get('format') === 'msgpack' ? 'msgpack' : 'json';
    ws.binaryType = 'nodebuffer';
    ws.on('error', (err) => logger.debug({ err }, 'realtime socket error'));
    const sockets = sessions.socketOpened(ws);
    // Every refusal goes in-band: an upgrade refused with an HTTP status is only a network
    // failure to the SDK, which retries for ever (§1.1).
    const refuse = (error: WireError, action: number = isTokenError(error.code) ? Action.DISCONNECTED : Action.ERROR): void => {
      ws.send(encodeFrame({ action, error }, format));
      ws.close(1000);
    };
    if (sockets > settings.maxConnections) {
      return refuse(serviceError('connectionsLimit', `this instance holds its maximum of ${settings.maxConnections} realtime connections; retry later`), Action.DISCONNECTED);
    }
    let identity: ConnectionIdentity;
    try {
      const { credentials, clientId } = this.authenticate(params);
      identity = { credentials, clientId, format, echo: params.get('echo') !== 'false' };
    } catch (err) {
      return refuse(toWireError(err));
    }
    const { credentials, clientId } = identity;
    const secret = this.deps.apps.key(credentials.keyName)?.key.keySecret ?? '';
    const appId = credentials.app.appId;
    const resumeKey = params.get('resume') ?? params.get('recover') ?? undefined;
    let conn: Connection | undefined;
    let error: WireError | undefined;
    if (resumeKey !== undefined) {
      const id = verifyConnectionKey(resumeKey, secret, appId);
      const existing = sessions.get(id ?? connectionIdOf(resumeKey));
      if (id === undefined) {
        error = serviceError('invalidConnectionKey', 'the connection key is not valid for these credentials; a new connection was made');
      } else if (!existing && sessions.hasEnded(id)) {
        error = serviceError('connectionExpired', 'unable to resume the connection: it was closed or not resumed within connectionStateTtl; a new connection was made');
      } else if (existing && existing.clientId !== clientId && existing.clientId !== undefined && existing.clientId !== '*') {
        error = serviceError('incompatibleCredentials', "the credentials' clientId does not match the connection's; a new connection was made");
      } else if (existing) {
        sessions.resume(existing, ws, identity);
        conn = existing;
      } else {
        // Resumed on another instance than the one that made it: the key proves it.
        conn = new Connection(this.deps.context, id, resumeKey, identity, ws);
        sessions.add(conn, false);
      }
      if (conn) logger.debug({ connectionId: id, local: existing !== undefined }, 'realtime connection resumed');
    }
    if (!conn) {
      const id = newConnectionId();
      conn = new Connection(this.deps.context, id, connectionKeyFor(secret, appId, id), identity, ws);
      sessions.add(conn, true);
    }
    const c = conn;
    ws.on('message', (data: Buffer, isBinary: boolean) => c.receive(ws, data, isBinary));
    ws.on('pong', () => c.heard(ws));
    ws.once('close', () => c.socketClosed(ws));
    conn.sendConnected(error);
    this.deps.events.opened(appId, conn.id, conn.key === resumeKey);
  }

  /** Credentials from the connect query: `key` or `access_token`, and the `clientId` asked for. */
  private authenticate(params: URLSearchParams): { credentials: Credentials; clientId: string | undefined } {
    const now = this.deps.clock.now();
    const key = params.get('key');
    const token = params.get('access_token') ?? params.get('accessToken');
    const asked = params.get('clientId') ?? undefined;
    if (asked === '*' || asked === '') throw new ServiceError('invalidClientId', 'clientId must be a non-empty string other than "*"');
    if (key) {
      const credentials = this.deps.authenticator.authenticate(`Basic ${b64(key)}`, asked === undefined ? undefined : b64(asked), now);
      return { credentials, clientId: credentials.clientId };
    }
    if (token) {
      const credentials = this.authenticateToken(token);
      const held = credentials.clientId;
      if (asked === undefined) return { credentials, clientId: held };
      if (held === '*' || held === asked) return { credentials, clientId: asked };
      throw new ServiceError('incompatibleCredentials', `clientId "${asked}" does not match the token's clientId${held === undefined ? ' (none)' : ` "${held}"`}`);
    }
    throw new ServiceError('noAuthentication', 'no credentials: connect with key=<key> or access_token=<token>');
  }

  /** Credentials of a token (the connect query's, or an AUTH's), once tokenPending has settled. */
  authenticateToken(token: string): Credentials {
    return this.deps.authenticator.authenticate(`Bearer ${b64(token)}`, undefined, this.deps.clock.now());
  }

  /** For a token whose check is asynchronous (a JWT not seen yet), a promise that settles once authenticateToken can answer; never rejects. */
  tokenPending(token: string | null | undefined): Promise<void> | undefined {
    if (!token) return undefined;
    return this.deps.authenticator.pending(`Bearer ${b64(token)}`, undefined, this.deps.clock.now());
  }
}
