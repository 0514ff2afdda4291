import type { StoredMessage } from '../domain/message.js';

/**
 * Message (or presence message) as sent to a reader. MessagePack carries bytes as they are; the text formats carry them
 * as base64 with `base64` appended to the encoding, which is how the SDKs decode them. `format`:
 * `msgpack`, or any text format (REST's json, jsonp and html; the realtime wire's json).
 */
export function messageToWire(m: StoredMessage, format: string): Record<string, unknown> {
  const out: Record<string, unknown> = { id: m.id, timestamp: m.timestamp };
  if (m.name !== undefined) out.name = m.name;
  if (m.clientId !== undefined) out.clientId = m.clientId;
  if (m.connectionId !== undefined) out.connectionId = m.connectionId;
  let data = m.data;
  let encoding = m.encoding;
  if (data instanceof Uint8Array && format !== 'msgpack') {
    data = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
    encoding = encoding ? `${encoding}/base64` : 'base64';
  }
  if (data !== undefined) out.data = data;
  if (encoding !== undefined) out.encoding = encoding;
  if (m.extras !== undefined) out.extras = m.extras;
  if (m.action !== undefined) out.action = m.action;
  return out;
}
