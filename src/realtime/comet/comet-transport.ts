import type { Logger } from 'pino';
import { ServiceError, type ErrorBody } from '../../errors.js';
import type { Credentials } from '../../auth/credentials.js';
import type { Connection } from '../connection.js';
import { Action, encodeFrame, serviceError, toWireError, type ProtocolMessage, type WireError, type WireFormat } from '../protocol.js';
import type { RealtimeSettings } from '../settings.js';
import type { OpenConnection } from '../transport.js';
import { CometSocket, type Batch, type Receiver } from './comet-socket.js';
import { splitJsonArray, splitMsgpackArray } from './comet-frames.js';

const isTokenError = (code: number): boolean => code >= 40140 && code < 40150;

/** Whether a request's credentials are the connection's: its key (a renewed token of it), and able to act as its clientId. */
const mayActOn = (credentials: Credentials, conn: Connection): boolean =>
  credentials.keyName === conn.credentials.keyName &&
  // A key acts as any clientId, as does a `*` token; another token only as its own (or none).
  ((credentials.method === 'basic' && credentials.clientId === undefined) || credentials.clientId === '*' || credentials.clientId === conn.clientId);

/**
 * A comet request's answer: protocol messages (in-band, status 200, the SDK reads them as if they
 * came on a WebSocket), or a refusal of the request itself in the spec's error format.
 */
export type CometAnswer = { format: WireFormat; batch: Batch } | { error: ErrorBody } | { empty: true };

export interface CometTransportDeps {
  settings: RealtimeSettings;
  logger: Logger;
  open: OpenConnection;
  /** Credentials of a request's query (`key` or `access_token`, as at connect); throws a ServiceError. */
  credentialsOf: (params: URLSearchParams) => Credentials;
  /** Settles once the connect query's credentials can be checked (a JWT not seen yet is checked asynchronously). */
  credentialsPending: (params: URLSearchParams) => Promise<void> | undefined;
  /** Whether the gateway is closing (requests are answered DISCONNECTED 80003: reconnect elsewhere). */
  closing: () => boolean;
}

interface Held {
  socket: CometSocket;
  conn: Connection;
}

const frameOf = (pm: ProtocolMessage, format: WireFormat): Batch => ({ frames: [encodeFrame(pm, format)], written: () => {} });

/**
 * The comet transport (HTTP long polling, the SDK's fallback where WebSockets are blocked;
 * README: Comet fallback): `GET /comet/connect` opens or resumes a connection as a WebSocket
 * upgrade does (the handshake), and answers its CONNECTED; then the client sends with
 * `POST /comet/<connectionKey>/send` (an array of ProtocolMessages) and long-polls
 * `GET /comet/<connectionKey>/recv` for what the connection sends; `/close` and `/disconnect` are
 * CLOSE and DISCONNECT. The connection is the same Connection as on a WebSocket (its socket is a
 * CometSocket), so ACKs, resume and recover work across transports and instances. The routes
 * (src/routes/comet.ts) carry the requests here.
 */
export class CometTransport {
  /** The comet sockets open here, by their connection's key (a resume on a new one replaces the old). */
  private readonly held = new Map<string, Held>();
  /** Comet transports open with no recv waiting, by the address that opened them (cometMaxUnpolledPerAddress). */
  private readonly unpolled = new Map<string, number>();

  constructor(private readonly deps: CometTransportDeps) {}

  /** `GET /comet/connect` from `address`: the connection made or resumed, and its CONNECTED (or the refusal). */
  async connect(params: URLSearchParams, address?: string): Promise<CometAnswer> {
    const format: WireFormat = params.get('format') === 'msgpack' ? 'msgpack' : 'json';
    // A JWT seen for the first time is checked asynchronously (src/auth/jwt.ts) before the rest.
    await this.deps.credentialsPending(params);
    if (this.deps.closing()) return { format, batch: frameOf({ action: Action.DISCONNECTED, error: serviceError('serviceShuttingDown', 'the service is restarting; reconnect') }, format) };
    const from = address ?? '';
    const max = this.deps.settings.cometMaxUnpolledPerAddress;
    if ((this.unpolled.get(from) ?? 0) >= max) {
      this.deps.logger.debug({ address, max }, 'comet connect refused: too many transports from its address left unpolled');
      const error = serviceError('connectionsLimit', `more than ${max} comet transports from this address have no recv waiting (REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS); poll those open, or retry later`);
      return { format, batch: frameOf({ action: Action.DISCONNECTED, error }, format) };
    }
    const socket = new CometSocket(this.deps.settings.cometMaxPendingRequests, (delta) => {
      const n = (this.unpolled.get(from) ?? 0) + delta;
      if (n > 0) this.unpolled.set(from, n);
      else this.unpolled.delete(from);
    });
    const conn = this.deps.open(socket, params, address);
    if (conn) {
      const entry = { socket, conn };
      this.held.set(conn.key, entry);
      socket.once('close', () => {
        if (this.held.get(conn.key) === entry) this.held.delete(conn.key);
        conn.socketClosed(socket);
      });
    }
    // CONNECTED (or the refusal) is queued: the connect is the first recv.
    const batch = socket.drain();
    if (!conn) socket.terminate();
    return { format, batch };
  }

  /** `POST /comet/<key>/send`: each ProtocolMessage of the body, as a frame on the connection; 204 once read. */
  async send(key: string, params: URLSearchParams, body: Buffer): Promise<CometAnswer> {
    // As recv: a renewed JWT not seen yet is checked first.
    await this.deps.credentialsPending(params);
    const found = this.find(key, params);
    if ('batch' in found) return found;
    const { socket, conn } = found;
    conn.heard(socket);
    const readable = socket.readable();
    if (readable === false) return this.tooMany('sends', conn);
    if (readable !== true) await readable;
    if (!conn.holds(socket)) return this.gone(conn.format);
    const binary = conn.format === 'msgpack';
    const items = binary ? splitMsgpackArray(body, this.deps.settings.maxFrameWidth) : splitJsonArray(body, this.deps.settings.maxFrameWidth);
    if (!items) {
      this.deps.logger.debug({ connectionId: conn.id, bytes: body.length }, 'comet send refused: its body is not one array of ProtocolMessages');
      conn.fail(serviceError('protocolError', `a comet send's body must be one ${binary ? 'MessagePack' : 'JSON'} array of at most ${this.deps.settings.maxFrameWidth} ProtocolMessages`));
      return { empty: true };
    }
    // Each ProtocolMessage within a WebSocket frame's bound, as the CONNECTED's maxFrameSize says:
    // the body's bound alone let one decode twice that (or cometMaxSendBytes, up to 256 MiB).
    const maxFrame = this.deps.settings.maxFrameBytes;
    if (items.some((frame) => frame.length > maxFrame)) {
      this.deps.logger.debug({ connectionId: conn.id, maxFrame }, 'comet send refused: a ProtocolMessage over the frame limit');
      conn.fail(serviceError('messageTooLarge', `each ProtocolMessage of a comet send may hold at most ${maxFrame} bytes (REALTIME_MAX_FRAME_BYTES, the connection's maxFrameSize)`));
      return { empty: true };
    }
    for (const frame of items) {
      // A frame may end the transport (a fatal error, over budget): the rest is not read.
      if (!conn.holds(socket)) break;
      // Read as a binary WebSocket frame (true): a JSON element is checked for UTF-8 as such a
      // frame is (ws checks a text frame's itself); as text, bytes that are not UTF-8 were taken
      // and published with U+FFFD in their place.
      conn.receive(socket, frame, true);
    }
    return { empty: true };
  }

  /**
   * Before a send's body is read: the in-band answer for a request that may not act on the
   * connection its key names (no transport here, or credentials not the connection's), else
   * undefined. Its body is then never read: the route takes bodies of up to cometMaxSendBytes
   * without the service's credentials, and read first they held the service's budget for request
   * bodies (MAX_INFLIGHT_BODY_BYTES) for anyone (a Content-Length of 2 MiB, a body never sent).
   */
  async refusal(key: string, params: URLSearchParams): Promise<CometAnswer | undefined> {
    await this.deps.credentialsPending(params);
    const found = this.find(key, params);
    return 'batch' in found ? found : undefined;
  }

  /**
   * A send refused before its body was read (over cometMaxSendBytes): the connection fails with
   * the error the request is answered with, as the SDK then fails (a WebSocket frame over
   * maxFrameBytes closes the socket).
   */
  refuseSend(key: string, params: URLSearchParams, error: unknown): void {
    const found = this.find(key, params);
    if (!('conn' in found)) return;
    this.deps.logger.warn({ connectionId: found.conn.id, maxBytes: this.deps.settings.cometMaxSendBytes }, 'comet send over its body limit; connection failed');
    found.conn.fail(toWireError(error));
  }

  /** `GET /comet/<key>/recv`: what the connection sent, at once or once it sends something. */
  async recv(key: string, params: URLSearchParams, signal: AbortSignal): Promise<CometAnswer> {
    // A renewed JWT not seen yet (the SDK's comet transport sends it on its requests as soon as it
    // sends the AUTH) is checked first: else the request would be refused while it is checked (40140).
    await this.deps.credentialsPending(params);
    const found = this.find(key, params);
    if ('batch' in found) return found;
    const { socket, conn } = found;
    conn.heard(socket);
    const format = conn.format;
    if (signal.aborted) return { empty: true };
    return new Promise((resolve) => {
      const receiver: Receiver = (batch) => {
        signal.removeEventListener('abort', abort);
        resolve({ format, batch });
      };
      // The client gone: the recv takes nothing, and settles (its handler does not wait for ever).
      const abort = (): void => {
        socket.cancel(receiver);
        resolve({ empty: true });
      };
      if (!socket.recv(receiver)) return resolve(this.tooMany('recvs', conn));
      signal.addEventListener('abort', abort, { once: true });
    });
  }

  /** `GET /comet/<key>/close`: CLOSE (the connection ends, its members leave); answered with CLOSED. */
  close(key: string, params: URLSearchParams): CometAnswer {
    return this.control(key, params, Action.CLOSE);
  }

  /** `GET /comet/<key>/disconnect`: DISCONNECT (the transport goes; the connection stays resumable). */
  disconnect(key: string, params: URLSearchParams): CometAnswer {
    return this.control(key, params, Action.DISCONNECT);
  }

  /** Shutdown: waiting recvs get what their connection was sent (its DISCONNECTED), and every transport goes. */
  shutdown(): void {
    for (const { socket } of [...this.held.values()]) socket.destroy();
    this.held.clear();
  }

  /** Comet transports open here (the cm_realtime_comet_transports gauge). */
  get size(): number {
    return this.held.size;
  }

  private control(key: string, params: URLSearchParams, action: number): CometAnswer {
    const found = this.find(key, params);
    if ('batch' in found) return found;
    const { socket, conn } = found;
    const frame = encodeFrame({ action }, conn.format);
    conn.receive(socket, typeof frame === 'string' ? Buffer.from(frame) : Buffer.from(frame), conn.format === 'msgpack');
    return { format: conn.format, batch: socket.drain() };
  }

  /**
   * The transport a key names, for a request whose credentials are the connection's app's; else the
   * in-band answer: DISCONNECTED when the transport is not here (the SDK resumes, here or wherever
   * its next connect lands), or the credentials' error as at connect.
   */
  private find(key: string, params: URLSearchParams): Held | { format: WireFormat; batch: Batch } {
    const format: WireFormat = params.get('format') === 'msgpack' ? 'msgpack' : 'json';
    if (this.deps.closing()) return { format, batch: frameOf({ action: Action.DISCONNECTED, error: serviceError('serviceShuttingDown', 'the service is restarting; reconnect') }, format) };
    const held = this.held.get(key);
    if (!held || held.socket.closed) return this.gone(format);
    let error: WireError | undefined;
    try {
      const credentials = this.deps.credentialsOf(params);
      if (credentials.app.appId !== held.conn.appId) throw new ServiceError('incompatibleCredentials', "the request's credentials are not for the connection's app");
      // Another key of the app, or a token for another clientId, may not act on the connection
      // (the connection key is bound to the key it was issued to, as a resume checks it).
      if (!mayActOn(credentials, held.conn)) throw new ServiceError('incompatibleCredentials', "the request's credentials are not the connection's: another key, or another clientId");
    } catch (err) {
      error = toWireError(err);
    }
    if (error) return { format, batch: frameOf({ action: isTokenError(error.code) ? Action.DISCONNECTED : Action.ERROR, error }, format) };
    return held;
  }

  private tooMany(what: 'recvs' | 'sends', conn: Connection): CometAnswer {
    const max = this.deps.settings.cometMaxPendingRequests;
    this.deps.logger.debug({ connectionId: conn.id, what, max }, 'comet request refused: too many waiting');
    return { error: new ServiceError('rateLimited', `more than ${max} comet ${what} waiting on this connection (REALTIME_COMET_MAX_PENDING_REQUESTS); wait for one to be answered`).toJSON() };
  }

  private gone(format: WireFormat): { format: WireFormat; batch: Batch } {
    const error = serviceError('connectionClosed', 'no comet transport is open for this connection key here; resume it (GET /comet/connect?resume=<connectionKey>)');
    return { format, batch: frameOf({ action: Action.DISCONNECTED, error }, format) };
  }
}

