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

/**
 * The size of message data. Binary data that travels as base64 (outer encoding `base64`, as JSON
 * clients send bytes) counts by its bytes, as the SDKs count it and as the same bytes sent in
 * MessagePack count (spec TO3l8; ably-js sizes data before its wire base64).
 */
export function dataSize(data: MessageData | undefined, encoding?: string): number {
  if (data === undefined || data === null) return 0;
  if (typeof data === 'string') return encoding !== undefined && /(^|\/)base64$/.test(encoding) ? Buffer.byteLength(data, 'base64') : Buffer.byteLength(data);
  if (data instanceof Uint8Array) return data.byteLength;
  return Buffer.byteLength(JSON.stringify(data));
}

/** Size as counted against the message size limit: name, clientId, data and extras. */
export function messageSize(m: StoredMessage): number {
  return (
    dataSize(m.data, m.encoding) +
    (m.name ? Buffer.byteLength(m.name) : 0) +
    (m.clientId ? Buffer.byteLength(m.clientId) : 0) +
    (m.extras ? Buffer.byteLength(JSON.stringify(m.extras)) : 0)
  );
}
