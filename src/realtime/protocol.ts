// The realtime wire protocol as the `ably` SDK (v2, protocol version 6) speaks it: one
// ProtocolMessage per WebSocket frame, JSON in text frames or MessagePack in binary frames
// (REALTIME-PROTOCOL.md §1–2).
import { isUtf8 } from 'node:buffer';
import { packValue, unpackValue } from '../codec/msgpack.js';
import { msgpackStringsAreUtf8 } from '../codec/msgpack-utf8.js';
import { ErrorCodes, errorHref, ServiceError, type ErrorKind } from '../errors.js';

export const Action = {
  HEARTBEAT: 0,
  ACK: 1,
  NACK: 2,
  CONNECT: 3,
  CONNECTED: 4,
  DISCONNECT: 5,
  DISCONNECTED: 6,
  CLOSE: 7,
  CLOSED: 8,
  ERROR: 9,
  ATTACH: 10,
  ATTACHED: 11,
  DETACH: 12,
  DETACHED: 13,
  PRESENCE: 14,
  MESSAGE: 15,
  SYNC: 16,
  AUTH: 17,
} as const;

export const Flag = {
  HAS_PRESENCE: 1 << 0,
  HAS_BACKLOG: 1 << 1,
  RESUMED: 1 << 2,
  ATTACH_RESUME: 1 << 5,
  PRESENCE: 1 << 16,
  PUBLISH: 1 << 17,
  SUBSCRIBE: 1 << 18,
  PRESENCE_SUBSCRIBE: 1 << 19,
} as const;

/** The four modes this gateway grants (annotations and objects are not served). */
export const MODES = Flag.PRESENCE | Flag.PUBLISH | Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE;

/** ErrorInfo on the wire: message, code and statusCode are all required by the SDK (§2.4). */
export interface WireError {
  message: string;
  code: number;
  statusCode: number;
  href?: string;
}

export interface ProtocolMessage {
  action: number;
  flags?: number;
  id?: string;
  timestamp?: number;
  count?: number;
  error?: WireError;
  connectionId?: string;
  channel?: string;
  channelSerial?: string | null;
  msgSerial?: number;
  messages?: unknown[];
  presence?: unknown[];
  auth?: { accessToken?: unknown };
  params?: Record<string, string>;
  connectionDetails?: Record<string, unknown>;
  res?: { serials: (string | null)[] }[];
}

export type WireFormat = 'json' | 'msgpack';

export const serviceError = (kind: ErrorKind, message: string): WireError => ({ ...ErrorCodes[kind], message, href: errorHref(ErrorCodes[kind].code) });

/** Any thrown value as an ErrorInfo a client may see (internal causes stay in the service log). */
export function toWireError(err: unknown): WireError {
  if (err instanceof ServiceError) return { code: err.code, statusCode: err.statusCode, message: err.message, href: errorHref(err.code) };
  return serviceError('internal', 'internal error');
}

/** A frame as the socket sends it: a string for JSON (text frame), bytes for MessagePack (binary frame). */
export type Frame = string | Uint8Array;

export function encodeFrame(pm: ProtocolMessage, format: WireFormat): Frame {
  return format === 'json' ? JSON.stringify(pm) : packValue(pm);
}

/**
 * A client frame as a ProtocolMessage, or a protocol error (80013: something the connection cannot
 * interpret as a protocol message): JSON must come in a text frame and MessagePack in a binary
 * one (the SDK's Node client may send JSON as binary: accepted, if it is UTF-8, which ws checks
 * only for text frames), and the result must be an object with a numeric action.
 */
export function decodeFrame(data: Buffer, isBinary: boolean, format: WireFormat): ProtocolMessage {
  let value: unknown;
  if (format === 'json') {
    if (isBinary && !isUtf8(data)) throw new ServiceError('protocolError', 'the frame is not valid UTF-8 (format=json)');
    try {
      value = JSON.parse(data.toString('utf8'));
    } catch {
      throw new ServiceError('protocolError', 'the frame is not valid JSON (format=json)');
    }
  } else {
    if (!isBinary) throw new ServiceError('protocolError', 'format=msgpack frames must be binary');
    try {
      value = unpackValue(data);
    } catch {
      throw new ServiceError('protocolError', 'the frame is not valid MessagePack (format=msgpack)');
    }
    if (!msgpackStringsAreUtf8(data)) throw new ServiceError('protocolError', 'the frame holds a string that is not valid UTF-8');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ServiceError('protocolError', 'a frame must hold one ProtocolMessage object');
  }
  const pm = value as ProtocolMessage;
  if (typeof pm.action !== 'number' || !Number.isInteger(pm.action)) throw new ServiceError('protocolError', 'the ProtocolMessage has no numeric action');
  return pm;
}
