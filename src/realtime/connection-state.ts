/**
 * A connection's state on the gateway, and the moves allowed between them (README: The realtime
 * interface, Connection states). One connection outlives its sockets: the client that lost one
 * resumes with its connectionKey within connectionStateTtl and finds its identity, its ACK order
 * and its presence members here.
 *
 *   open ──socket lost, DISCONNECTED sent──▶ dropped ──resumed with a new socket──▶ open
 *    │  ╰──resumed on a new socket (the old one terminated)──▶ open                  │
 *    ╰──CLOSE, fatal ERROR, resumed elsewhere, shutdown──▶ ended ◀──connectionStateTtl over,
 *                                                                  evicted, resumed elsewhere
 *
 * Against the SDK's connection states (RTN4, seen from the client):
 * - `open` is the SDK's `connected`.
 * - `dropped` is the SDK's `disconnected` (and `connecting` on a retry): the client resumes with
 *   its key and keeps its connectionId (RESUMED). Its presence members leave after
 *   presenceDropMs, earlier than the state ends when that is shorter than connectionStateTtl.
 * - `ended` covers the SDK's `closed` (CLOSE answered with CLOSED), `failed` (ERROR without a
 *   channel) and `suspended` (the TTL passed: a resume then gets a new connection and 80008). An
 *   ended connection is remembered by id so that such a resume is told why.
 * The SDK's `initialized`, `connecting` and `closing` have no counterpart: a connection exists
 * here from its first socket to its end.
 */
export type ConnectionState = 'open' | 'dropped' | 'ended';

/** Why a connection ended: what the gateway does about its members and the log depends on it. */
export type EndReason =
  /** CLOSE from the client: CLOSED, members leave at once. */
  | 'closed'
  /** A fatal error: ERROR, members leave at once. */
  | 'failed'
  /** Not resumed within connectionStateTtl. */
  | 'expired'
  /** Dropped connections over maxConnections: the one waiting longest goes as if expired. */
  | 'evicted'
  /** Resumed on another instance, which holds it (and its members) now. */
  | 'movedAway'
  /** The service stops: DISCONNECTED, the client resumes after the restart or elsewhere. */
  | 'shutdown';

/** The moves each state allows. */
export const TRANSITIONS: Readonly<Record<ConnectionState, readonly ConnectionState[]>> = {
  open: ['open', 'dropped', 'ended'],
  dropped: ['open', 'ended'],
  ended: [],
};

export const canMove = (from: ConnectionState, to: ConnectionState): boolean => TRANSITIONS[from].includes(to);

/** Whether the members of a connection that ended this way leave now, and the log learns it ended. */
export const endsForGood = (reason: EndReason): boolean => reason !== 'movedAway' && reason !== 'shutdown';
