// The realtime wire protocol as the `ably` SDK (v2, protocol version 6) speaks it: one
// ProtocolMessage per WebSocket frame, JSON in text frames or MessagePack in binary frames
// (REALTIME-PROTOCOL.md §1–2).
import { isUtf8 } from 'node:buffer';
import { packValue, unpackValue } from '../codec/msgpack.js';
import { jsonTextHasProtoKey, jsonTextWellFormed } from '../codec/well-formed-text.js';
import { jsonHeader, msgpackHeader, type FrameHeader } from './frame-shape.js';
import { jsonShape, msgpackShape, type ShapeLimits, type ShapeFault } from '../codec/value-shape.js';
import { ErrorCodes, errorHref, ServiceError, type ErrorKind } from '../errors.js';
import { Mode } from '../domain/modes.js';

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
  // LiveObjects and message annotations: the SDK counts them among the frames to ACK (msgSerial);
  // this service serves neither and NACKs them (src/realtime/connection.ts).
  OBJECT: 19,
  ANNOTATION: 21,
} as const;

/** Why the frames of the actions this service does not serve are refused (NACK, 40030); the connection stays. */
export const NOT_SERVED: Readonly<Partial<Record<number, string>>> = {
  [Action.OBJECT]: 'LiveObjects (OBJECT frames) are not served by this service',
  [Action.ANNOTATION]: 'message annotations (ANNOTATION frames) are not served by this service',
};

/** The actions the SDK counts among the frames to ACK (msgSerial), by name. */
export const ACKED_NAMES: Readonly<Partial<Record<number, string>>> = {
  [Action.MESSAGE]: 'MESSAGE',
  [Action.PRESENCE]: 'PRESENCE',
  [Action.OBJECT]: 'OBJECT',
  [Action.ANNOTATION]: 'ANNOTATION',
};

export const Flag = {
  HAS_PRESENCE: 1 << 0,
  HAS_BACKLOG: 1 << 1,
  RESUMED: 1 << 2,
  ATTACH_RESUME: 1 << 5,
  // The attachment modes (src/domain/modes.ts) travel as these flag bits.
  ...Mode,
} as const;

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
 * A frame refused for what it holds rather than for not being a protocol message: a string that is
 * not valid Unicode text (a lone surrogate spelt in JSON: 40001), or data nested deeper or wider
 * than a frame may be (40013, found on the bytes before decoding). It carries what the frame says
 * of itself (its action and msgSerial at least), so that a publish or presence change is answered
 * with a NACK and the connection goes on.
 */
export class FrameRefused extends ServiceError {
  constructor(
    kind: ErrorKind,
    message: string,
    readonly pm: ProtocolMessage,
  ) {
    super(kind, message);
  }
}

/**
 * A frame whose shape is over the limits: a publish or presence change with a msgSerial is
 * refused on its own (NACK 40013, its content is too deep or wide); anything else is a protocol
 * error (80013). Invalid UTF-8 is always a protocol error.
 */
function shapeRefusal(fault: NonNullable<ShapeFault>, shape: ShapeLimits, header: FrameHeader): ServiceError {
  const message = SHAPE_FAULTS[fault](shape);
  const { action, msgSerial } = header;
  const ackable = (action === Action.MESSAGE || action === Action.PRESENCE) && msgSerial !== undefined;
  if (fault === 'utf8' || !ackable) return new ServiceError('protocolError', message);
  return new FrameRefused('invalidDataOrEncoding', message, { action, msgSerial });
}

const SHAPE_FAULTS = {
  depth: (l: ShapeLimits) => `the frame nests arrays and objects deeper than ${l.maxDepth} levels`,
  width: (l: ShapeLimits) => `an array or object of the frame has more than ${l.maxWidth} entries`,
  utf8: () => 'the frame holds a string that is not valid UTF-8',
};

/**
 * A client frame as a ProtocolMessage, or a protocol error (80013: something the connection cannot
 * interpret as a protocol message): JSON must come in a text frame and MessagePack in a binary
 * one (the SDK's Node client may send JSON as binary: accepted, if it is UTF-8, which ws checks
 * only for text frames), its nesting and widths must be within `shape` (checked on the bytes,
 * before decoding: src/realtime/frame-shape.ts), and the result must be an object with a numeric action.
 */
export function decodeFrame(data: Buffer, isBinary: boolean, format: WireFormat, shape: ShapeLimits): ProtocolMessage {
  let value: unknown;
  let text: string | undefined;
  if (format === 'json') {
    if (isBinary && !isUtf8(data)) throw new ServiceError('protocolError', 'the frame is not valid UTF-8 (format=json)');
    const fault = jsonShape(data, shape);
    if (fault) throw shapeRefusal(fault, shape, jsonHeader(data));
    text = data.toString('utf8');
    try {
      value = JSON.parse(text);
    } catch {
      throw new ServiceError('protocolError', 'the frame is not valid JSON (format=json)');
    }
  } else {
    if (!isBinary) throw new ServiceError('protocolError', 'format=msgpack frames must be binary');
    const fault = msgpackShape(data, shape);
    if (fault) throw shapeRefusal(fault, shape, msgpackHeader(data));
    try {
      value = unpackValue(data);
    } catch {
      throw new ServiceError('protocolError', 'the frame is not valid MessagePack (format=msgpack)');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ServiceError('protocolError', 'a frame must hold one ProtocolMessage object');
  }
  const pm = value as ProtocolMessage;
  if (typeof pm.action !== 'number' || !Number.isInteger(pm.action)) throw new ServiceError('protocolError', 'the ProtocolMessage has no numeric action');
  if (text !== undefined && !jsonTextWellFormed(text, pm)) {
    throw new FrameRefused('invalidRequestBody', 'a string in the frame holds a lone surrogate (\\uD800 to \\uDFFF unpaired): it is not valid Unicode text', pm);
  }
  if (text !== undefined && jsonTextHasProtoKey(text, pm)) {
    throw new FrameRefused('invalidRequestBody', 'the frame holds a "__proto__" key: refused (prototype poisoning), as the REST API refuses it; as a value that string is fine', pm);
  }
  return pm;
}
