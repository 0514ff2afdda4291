/** Message data as stored: strings, JSON values (objects, arrays) and bytes stay as they came. */
export type MessageData = string | Uint8Array | Record<string, unknown> | unknown[];

/** A message as it travels on the log and sits in history. */
export interface StoredMessage {
  id: string;
  timestamp: number;
  name?: string;
  data?: MessageData;
  encoding?: string;
  clientId?: string;
  connectionId?: string;
  extras?: Record<string, unknown>;
  /** Presence history entries only: 2 enter, 3 leave, 4 update (spec: PresenceMessage). */
  action?: number;
}

/**
 * How a publish came in: a REST publish, a realtime MESSAGE, one channel of a batch publish, or
 * the service's own (lifecycle events on the metachannel). On the log (and in the stats) every one
 * but realtime is a REST publish, as before; the metrics tell them apart.
 */
export type PublishTransport = 'rest' | 'realtime' | 'batch' | 'service';
