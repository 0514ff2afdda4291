import type { Logger } from 'pino';
import { ServiceError } from '../errors.js';
import type { Authenticator } from '../auth/authenticate.js';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { Connection, type ConnectionIdentity } from './connection.js';
import { connectionIdOf, connectionKeyFor, newConnectionId, verifyConnectionKey } from './connection-key.js';
import type { ConnectionEvents } from './connection-events.js';
import type { ConnectionContext } from './context.js';
import { Action, encodeFrame, serviceError, toWireError, type WireError, type WireFormat } from './protocol.js';
import { reauthenticationRefusal } from './reauthentication.js';
import type { Sessions } from './sessions.js';
import type { RealtimeSettings } from './settings.js';
import type { TransportSocket } from './transport.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const isTokenError = (code: number): boolean => code >= 40140 && code < 40150;

export interface HandshakeDeps {
  authenticator: Authenticator;
  apps: AppRegistry;
  sessions: Sessions;
  /** What the connections made here may ask of the gateway. */
  context: ConnectionContext;
  events: ConnectionEvents;
  /**
   * A connection resumed here that this instance did not hold (made on another instance, or by
   * this one's previous run): its members stay present, held by this instance now.
   */
  takeOverPresence(conn: Connection): void;
  settings: RealtimeSettings;
  clock: Clock;
  logger: Logger;
}

/**
 * Connecting (REALTIME-PROTOCOL.md §1, §6, §7), whatever the transport (transport.ts: WebSocket;
 * comet/: HTTP long polling): the credentials of the connect query, and the connection it makes or
 * resumes (`resume` or `recover`: the key proves the connection, made here or on another instance,
 * on this transport or another). Every refusal goes in-band.
 */
export class Handshake {
  constructor(private readonly deps: HandshakeDeps) {}

  /**
   * A transport's connect: the connection made or resumed on `socket`, CONNECTED sent on it; or
   * undefined when refused (the refusal is sent on the socket, which then closes). `address`:
   * where the socket came from (part of the connection's origin: flood-cooldown.ts).
   */
  open(socket: TransportSocket, params: URLSearchParams, address?: string): Connection | undefined {
    const { sessions, settings, logger } = this.deps;
    const format: WireFormat = params.get('format') === 'msgpack' ? 'msgpack' : 'json';
    const sockets = sessions.socketOpened(socket);
    // Every refusal goes in-band: an upgrade refused with an HTTP status is only a network
    // failure to the SDK, which retries for ever (§1.1).
    const refuse = (error: WireError, action: number = isTokenError(error.code) ? Action.DISCONNECTED : Action.ERROR): undefined => {
      socket.send(encodeFrame({ action, error }, format));
      socket.close(1000);
      return undefined;
    };
    if (sockets > settings.maxConnections) {
      return refuse(serviceError('connectionsLimit', `this instance holds its maximum of ${settings.maxConnections} realtime connections; retry later`), Action.DISCONNECTED);
    }
    let identity: ConnectionIdentity;
    try {
      const { credentials, clientId } = this.credentialsOf(params);
      identity = { credentials, clientId, format, echo: params.get('echo') !== 'false', address };
    } catch (err) {
      return refuse(toWireError(err));
    }
    const { credentials, clientId } = identity;
    const secret = this.deps.apps.key(credentials.keyName)?.key.keySecret ?? '';
    const appId = credentials.app.appId;
    const resumeKey = params.get('resume') ?? params.get('recover') ?? undefined;
    let conn: Connection | undefined;
    let error: WireError | undefined;
    let refusal: WireError | undefined;
    if (resumeKey !== undefined) {
      const id = verifyConnectionKey(resumeKey, secret, appId);
      const existing = sessions.get(id ?? connectionIdOf(resumeKey));
      if (id === undefined) {
        error = serviceError('invalidConnectionKey', 'the connection key is not valid for these credentials; a new connection was made');
      } else if (!existing && sessions.hasEnded(id)) {
        error = serviceError('connectionExpired', 'unable to resume the connection: it was closed or not resumed within connectionStateTtl; a new connection was made');
      } else if (existing && existing.clientId !== clientId && existing.clientId !== undefined && existing.clientId !== '*') {
        error = serviceError('incompatibleCredentials', "the credentials' clientId does not match the connection's; a new connection was made");
      } else if (existing && (refusal = reauthenticationRefusal(existing, identity))) {
        // As an AUTH's (a connection for any clientId resumed for one could not leave the members it entered for others).
        error = { ...refusal, message: `${refusal.message}; a new connection was made` };
      } else if (existing) {
        sessions.resume(existing, socket, identity);
        conn = existing;
      } else {
        // Resumed on another instance than the one that made it: the key proves it.
        conn = new Connection(this.deps.context, id, resumeKey, identity, socket);
        sessions.add(conn, false);
        this.deps.takeOverPresence(conn);
      }
      if (conn) logger.debug({ connectionId: id, local: existing !== undefined }, 'realtime connection resumed');
    }
    if (!conn) {
      const id = newConnectionId();
      conn = new Connection(this.deps.context, id, connectionKeyFor(secret, appId, id), identity, socket);
      sessions.add(conn, true);
    }
    conn.sendConnected(error);
    this.deps.events.opened(appId, conn.id, conn.key === resumeKey);
    return conn;
  }

  /** Credentials from the connect query: `key` or `access_token`, and the `clientId` asked for. */
  credentialsOf(params: URLSearchParams): { credentials: Credentials; clientId: string | undefined } {
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

  /**
   * For a connect query whose credentials are checked asynchronously (a JWT not seen yet, a key
   * this instance does not know yet), a promise that settles once open() can answer; never rejects. A transport awaits it first.
   */
  credentialsPending(params: URLSearchParams): Promise<void> | undefined {
    const key = params.get('key');
    if (key) return this.deps.authenticator.keyPending(key.slice(0, Math.max(key.indexOf(':'), 0)));
    return this.tokenPending(params.get('access_token') ?? params.get('accessToken'));
  }

  /** For a token whose check is asynchronous (a JWT not seen yet), a promise that settles once authenticateToken can answer; never rejects. */
  tokenPending(token: string | null | undefined): Promise<void> | undefined {
    if (!token) return undefined;
    return this.deps.authenticator.pending(`Bearer ${b64(token)}`, undefined, this.deps.clock.now());
  }
}
