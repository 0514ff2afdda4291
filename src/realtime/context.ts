import type { Logger } from 'pino';
import type { Credentials } from '../auth/credentials.js';
import type { Clock } from '../clock.js';
import type { Limits } from '../limits.js';
import type { StoredMessage } from '../domain/message.js';
import type { PresenceChange } from '../presence/presence-producer.js';
import type { Attachment, Subscriber } from './attachment.js';
import type { Frame } from './protocol.js';
import type { AttachRequest } from './channel-requests.js';
import type { RealtimeSettings } from './settings.js';
import type { FloodCooldown } from './flood-cooldown.js';

/** What a connection uses of its socket: a `ws` WebSocket is one (unit tests use one of their own). */
export interface PeerSocket {
  send(frame: Frame, written?: (err?: Error) => void): void;
  close(code?: number): void;
  terminate(): void;
  pause(): void;
  resume(): void;
  ping(): void;
  readonly isPaused: boolean;
  readonly readyState: number;
  readonly OPEN: number;
  readonly bufferedAmount: number;
}

/** Counters of the gateway's metrics a connection moves. */
export type ConnectionCounter = 'framesRefused' | 'inboundBudgetDisconnects' | 'slowConsumers' | 'cooledConnections';

/**
 * What a connection may ask of the gateway (the context port): a Connection talks to nothing
 * else, so unit tests drive one through a fake context, without sockets or a log.
 */
export interface ConnectionContext {
  readonly settings: RealtimeSettings;
  readonly limits: Limits;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly instanceId: string;

  /**
   * Credentials of a token (an AUTH's); throws (or rejects with) a ServiceError when it is not
   * valid. A promise only for a token whose check is asynchronous (a JWT not seen yet).
   */
  authenticateToken(token: string): Credentials | Promise<Credentials>;

  // ---- the registry (sessions): told of each move of the connection's state

  /** The connection lost its socket and may resume (it is counted against maxConnections). */
  dropped(connectionId: string): void;
  /** The connection ended for good (CLOSE, fatal error, expiry): it is forgotten and remembered as ended. */
  ended(connectionId: string): void;

  // ---- the global in-flight budget

  /** Counts a connection's unanswered frame against the total of all connections. */
  holdInflight(bytes: number): void;
  releaseInflight(bytes: number): void;
  /** Whether no socket is read because the total in flight is over its budget. */
  readonly readingThrottled: boolean;
  count(counter: ConnectionCounter): void;
  /** Origins recently sent away over their inbound budget: a new connection from one starts with a smaller burst. */
  readonly floodCooldown: FloodCooldown;

  // ---- channels

  /**
   * What an ATTACH waits for (Delivery.readyToAttach): undefined when nothing, that is when delivery
   * reads the log and, for a fresh attach (`ownWrites`), passed this instance's own messages on the
   * channel; else resolves once it has (false: it gave up waiting).
   */
  readyToAttach(appId: string, channel: string, ownWrites: boolean): Promise<boolean> | undefined;
  /**
   * Attaches (ATTACHED, SYNC, backlog): the attachment goes into `conn.attachments`, with the modes
   * `grant` gives in the tick it registers; false, with nothing sent, when that is none.
   */
  attach(conn: Subscriber, grant: () => number, request: AttachRequest): Promise<boolean>;
  /** Takes the attachment off delivery and out of `conn.attachments`; nothing is sent. */
  detach(conn: Subscriber, channel: string): void;
  /** Sends the whole presence set again (a client's SYNC). */
  sync(attachment: Attachment): void;
  /** Appends the messages (a MESSAGE's), resolving once durable; `keyName`: whose credentials published (the audit replay names it). */
  publish(appId: string, channel: string, messages: StoredMessage[], keyName?: string): Promise<void>;
  /** Throws a ServiceError (40114) when an attach or presence change may not begin the channel: too many in use. */
  admitChannel(appId: string, channel: string): void;

  // ---- presence

  /** Whether a member is present here with that id (an automatic re-enter then changes nothing). */
  isPresentWithId(appId: string, channel: string, clientId: string, connectionId: string, id: string): boolean;
  /** Members present (and reserved), of every app or of one: what the limits on members count. */
  presenceMembers(appId?: string): number;
  /**
   * Appends presence changes, with `joining` (clientIds entering) counted against the limits until
   * applied; resolves once this instance applied them (or gave up waiting).
   */
  changePresence(appId: string, channel: string, connectionId: string, joining: Set<string>, changes: PresenceChange[]): Promise<void>;
  /** The members the connection entered on the channel leave (a `drop` on the log). */
  leave(appId: string, channel: string, connectionId: string): void;
}
