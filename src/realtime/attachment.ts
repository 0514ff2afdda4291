import type { Frame, ProtocolMessage, WireFormat } from './protocol.js';
import type { MessageFilter } from './message-filter.js';
import type { OccupancyRequest } from './channel-params.js';

/**
 * What delivery, backlog replay and presence SYNC need of a connection: who it is and how to send
 * to it. The Connection is one; this port keeps them from depending on it.
 */
export interface Subscriber {
  readonly id: string;
  readonly appId: string;
  readonly format: WireFormat;
  /** Whether it gets its own messages back. */
  readonly echo: boolean;
  /** Its attachments by channel name (the gateway's attach and detach keep it). */
  readonly attachments: Map<string, Attachment>;
  /** Changes whenever it gets or loses a socket: paced work (a SYNC) stops when it does. */
  readonly socketEpoch: number;
  /** Bytes its socket holds unwritten (0 without one). */
  readonly bufferedAmount: number;
  /** Encodes and sends a frame now (true); `written` is called once it is written out. */
  send(pm: ProtocolMessage, written?: (err?: Error) => void): boolean;
  /** Sends an encoded frame now (true). */
  sendFrame(frame: Frame): boolean;
  /** Cut off for not reading what it is sent (it resumes, and the log replays the rest). */
  slowConsumer(): void;
}

/** One connection's attachment to one channel. */
export interface Attachment {
  conn: Subscriber;
  /** The channel's name as the client attached it: frames to it carry this name. */
  channel: string;
  /** The channel whose messages and presence it receives (`room` for `[?rewind=1]room` or `[filter=...]room`). */
  base: string;
  /** The log key of the base channel's events (appId:channel). */
  recordKey: string;
  partition: number;
  modes: number;
  /** A derived channel's filter: only the messages it matches are sent. */
  filter?: MessageFilter;
  /** In-band occupancy asked (the `occupancy` param): `[meta]occupancy` messages as it changes. */
  occupancy?: OccupancyRequest;
  /**
   * The client's own position in the channel's partition when it is ahead of this instance's
   * delivery (a resume on an instance whose consumer lags the one it came from): records before it
   * reached the client already and are not sent again.
   */
  from: number;
  /** Deliveries that came while the attachment's backlog was read from the log, sent after it. */
  held?: (() => void)[];
  overflowed?: boolean;
  /** The SYNC being sent to this attachment, page by page (PresenceSync), on the socket of `epoch`. */
  sync?: { epoch: number };
}
