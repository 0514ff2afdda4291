// The realtime gateway's timings and limits (README: The realtime interface). Defaults follow
// what the SDK expects of the platform (REALTIME-PROTOCOL.md §1.4, §6).
import { readFileSync } from 'node:fs';

export interface RealtimeSettings {
  /** How long a dropped connection can be resumed. Sent as connectionDetails.connectionStateTtl. */
  connectionStateTtlMs: number;
  /** The longest the gateway stays silent on a connection; a HEARTBEAT goes out after it. */
  maxIdleIntervalMs: number;
  /**
   * How long the presence members of a connection that dropped without CLOSE stay present, waiting
   * for a resume; then they leave (spec: one minute). REALTIME_PRESENCE_DROP_MS
   */
  presenceDropMs: number;
  /** Largest frame a client may send; above it the socket is closed (1009). REALTIME_MAX_FRAME_BYTES */
  maxFrameBytes: number;
  /** Open realtime connections on one instance. Above: DISCONNECTED 42910. REALTIME_MAX_CONNECTIONS */
  maxConnections: number;
  /** Channels one connection may be attached to. Above: channel ERROR 90010. */
  maxChannelsPerConnection: number;
  /**
   * Frames per second a connection may send, every kind counted, on average (burst: twice this).
   * Above: the frame is dropped undecoded and the client disconnected (DISCONNECTED 42911; it may
   * resume). REALTIME_MAX_INBOUND_RATE
   */
  maxInboundRate: number;
  /** Bytes per second of frames a connection may send (burst: twice this), counted and refused as maxInboundRate. REALTIME_MAX_INBOUND_BYTES_RATE */
  maxInboundBytesRate: number;
  /**
   * After a connection is sent away over its inbound budget, how long a new connection from the
   * same origin (key, address, a token's clientId) starts with a tenth of the burst instead of all
   * of it (flood-cooldown.ts); 0: never. REALTIME_FLOOD_COOLDOWN_MS
   */
  floodCooldownMs: number;
  /** Origins the cool-down remembers, at most (older ones go first; one forgotten gets its whole burst back). */
  maxFloodCooldownOrigins: number;
  /**
   * Levels of arrays and maps nested in one frame, checked on its bytes before it is decoded (a
   * frame nested a million deep took seconds to decode). Above: a publish or presence change gets
   * NACK 40013, any other frame ERROR 80013 (the connection fails). Well above MAX_DATA_DEPTH, whose
   * finer errors (40013, 40032) the frames between the two get. REALTIME_MAX_FRAME_DEPTH
   */
  maxFrameDepth: number;
  /** Entries in one array or map of a frame, checked and refused like maxFrameDepth. REALTIME_MAX_FRAME_WIDTH */
  maxFrameWidth: number;
  /**
   * `channel.attached` events one connection may append to the log a second, on average, in
   * bursts of twice maxChannelsPerConnection (a connect and a resume at once); each may be
   * followed by one `channel.detached`. Attaches above it are ATTACHED at once but reach the log
   * (occupancy, lifecycle) as the budget refills, and one detached meanwhile never does: what one
   * connection's attach and detach churn writes is bounded. REALTIME_ATTACHMENT_EVENTS_RATE
   */
  attachmentEventsRate: number;
  /**
   * Bytes waiting to be written to one socket. Above it the client is not reading fast enough: the
   * gateway disconnects it (80020) rather than buffering without bound; a resume replays from the log.
   * REALTIME_MAX_BUFFERED_BYTES
   */
  maxBufferedBytes: number;
  /**
   * Bytes of one connection's frames whose publish or presence change is not answered yet. Above
   * it the gateway stops reading the socket until answers come back (TCP pushes back on the
   * client): a client sending faster than the log appends costs this much memory, not all it
   * sent. REALTIME_MAX_INFLIGHT_BYTES
   */
  maxInflightBytes: number;
  /**
   * The same, all connections of the instance together: over it, a connection that sends one
   * more publish or presence change is not read until the total is back under.
   * REALTIME_MAX_TOTAL_INFLIGHT_BYTES
   */
  maxTotalInflightBytes: number;
  /**
   * Presence members one connection may hold, all channels together: each costs memory in the
   * presence projection for as long as the connection lives. Above: NACK 91003.
   * REALTIME_MAX_MEMBERS_PER_CONNECTION
   */
  maxMembersPerConnection: number;
  /**
   * Presence members in the service, all apps, and one app's share: each is held in every
   * instance's presence projection (about 660 bytes). Above: NACK 91003.
   * REALTIME_MAX_PRESENCE_MEMBERS, REALTIME_MAX_PRESENCE_MEMBERS_PER_APP
   */
  maxPresenceMembers: number;
  maxPresenceMembersPerApp: number;
  /**
   * Connections that ended for good (CLOSE, a fatal error, not resumed within connectionStateTtl)
   * remembered by every instance, from the connections topic, so that a late resume of one is
   * refused with 80008 instead of bringing it back. The newest are kept.
   */
  maxEndedConnections: number;
  /**
   * Comet (HTTP long polling) requests of one connection that may wait at once: recvs waiting for
   * frames, and sends held while the connection is not read (the in-flight budget). Above: the
   * request is refused, 429 42910. REALTIME_COMET_MAX_PENDING_REQUESTS
   */
  cometMaxPendingRequests: number;
  /**
   * Bytes of one comet send's body (an array of ProtocolMessages, each within maxFrameBytes). Above:
   * 413 40009, and the connection fails as on a WebSocket frame over maxFrameBytes.
   * REALTIME_COMET_MAX_SEND_BYTES
   */
  cometMaxSendBytes: number;
  /**
   * Comet transports from one address with no recv waiting (opened and not polled, or left
   * unpolled). A comet transport holds no TCP connection of its own, so without it one client
   * could open REALTIME_MAX_CONNECTIONS of them over one keep-alive connection in seconds and
   * leave no room for anyone else; a polled one holds a recv (an HTTP connection, bounded by
   * MAX_CONNECTIONS) as a WebSocket holds its socket. Above: the connect is answered
   * DISCONNECTED 42910 (the SDK retries). REALTIME_COMET_MAX_UNPOLLED_PER_ADDRESS
   */
  cometMaxUnpolledPerAddress: number;
  /** Log records held for one attachment while its backlog is read from the log. */
  maxReplayRecords: number;
  /**
   * Log records a resume's replay may read (the channel's partition after its channelSerial, all
   * channels' records in it): a position with more after it attaches without continuity (90003)
   * with nothing read. REALTIME_MAX_REPLAY_SCAN
   */
  maxReplayScanRecords: number;
  /** Members per SYNC page. */
  syncPageSize: number;
  /**
   * Production mode: how often an instance says it is alive on the log; the members of one silent
   * for three intervals are removed by the others. REALTIME_INSTANCE_ALIVE_MS
   */
  instanceAliveIntervalMs: number;
  /**
   * In-band occupancy (the `occupancy` channel param): at most one `[meta]occupancy` message per
   * channel this often. REALTIME_OCCUPANCY_INTERVAL_MS
   */
  occupancyIntervalMs: number;
  /**
   * How long before a token connection's token expires it gets an AUTH (action 17), so that its
   * SDK renews in-band, without a disconnect (the platform sends it about 30 s before); 0: never
   * (it gets DISCONNECTED 40142 at the expiry). A token with less than twice this left gets it at half of
   * what it has left.
   * REALTIME_TOKEN_RENEW_LEAD_MS
   */
  tokenRenewLeadMs: number;
}

export const DEFAULT_REALTIME_SETTINGS: RealtimeSettings = {
  connectionStateTtlMs: 120_000,
  maxIdleIntervalMs: 15_000,
  presenceDropMs: 60_000,
  maxFrameBytes: 1024 * 1024,
  maxConnections: 20_000,
  maxChannelsPerConnection: 200,
  maxInboundRate: 100,
  maxInboundBytesRate: 2 * 1024 * 1024,
  floodCooldownMs: 30_000,
  maxFloodCooldownOrigins: 10_000,
  maxFrameDepth: 128,
  maxFrameWidth: 10_000,
  attachmentEventsRate: 5,
  maxBufferedBytes: 8 * 1024 * 1024,
  maxInflightBytes: 2 * 1024 * 1024,
  maxTotalInflightBytes: 128 * 1024 * 1024,
  maxMembersPerConnection: 10_000,
  maxPresenceMembers: 1_000_000,
  maxPresenceMembersPerApp: 250_000,
  maxEndedConnections: 100_000,
  cometMaxPendingRequests: 2,
  cometMaxSendBytes: 2 * 1024 * 1024,
  cometMaxUnpolledPerAddress: 100,
  maxReplayRecords: 10_000,
  maxReplayScanRecords: 200_000,
  syncPageSize: 100,
  instanceAliveIntervalMs: 10_000,
  occupancyIntervalMs: 1000,
  tokenRenewLeadMs: 30_000,
};

/** File descriptors kept for everything but client sockets: log and store files, Kafka and ClickHouse. */
const RESERVED_FILES = 256;

/**
 * The process's open-file limit (Linux: /proc/self/limits, "Max open files", the soft limit, which
 * Node raises to the hard one at start), or undefined where it cannot be read.
 */
export function openFileLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | undefined {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(read());
    return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * REALTIME_MAX_CONNECTIONS as the process can hold it: every socket is a file, so above the
 * open-file limit less the HTTP connections (MAX_CONNECTIONS) and a reserve, accept fails with
 * EMFILE and the client sees a reset, which the SDK retries as a network failure, instead of the
 * gateway's DISCONNECTED 42910. Realtime keeps at least half of what is left after the reserve.
 */
export function realtimeConnectionsFor(configured: number, httpConnections: number, openFiles: number | undefined): number {
  if (openFiles === undefined) return configured;
  const usable = Math.max(2, openFiles - RESERVED_FILES);
  return Math.min(configured, Math.max(Math.floor(usable / 2), usable - httpConnections));
}
