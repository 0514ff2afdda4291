import { packValue } from '../codec/msgpack.js';
import { ServiceError } from '../errors.js';

export type Format = 'json' | 'jsonp' | 'msgpack' | 'html';

export const CONTENT_TYPES: Record<Format, string> = {
  json: 'application/json',
  jsonp: 'application/javascript',
  msgpack: 'application/x-msgpack',
  html: 'text/html; charset=utf-8',
};

const BY_MEDIA_TYPE: Record<string, Format> = {
  'application/json': 'json',
  'application/x-msgpack': 'msgpack',
  'application/msgpack': 'msgpack',
  'text/html': 'html',
  'application/javascript': 'jsonp',
  'text/javascript': 'jsonp',
};

const FORMAT_PARAM: Record<string, Format> = { json: 'json', jsonp: 'jsonp', msgpack: 'msgpack', html: 'html' };

/**
 * A table's own entry for a name a client sent, or undefined: `__proto__` or `constructor` would
 * otherwise find Object's own (an Accept of `__proto__` made a format of Object.prototype, and the
 * reply went out as application/octet-stream, errors included).
 */
const own = (table: Record<string, Format>, name: string): Format | undefined => (Object.hasOwn(table, name) ? table[name] : undefined);

/**
 * Response format (spec: Common behaviour): the Accept header wins when it names a format we
 * serve; then the `format` query parameter; then JSON. Wildcards count as no preference.
 */
export function negotiateFormat(accept: string | undefined, formatParam: unknown): Format {
  if (accept) {
    const ranked = accept
      .split(',')
      .map((part, i) => {
        const [type, ...params] = part.trim().toLowerCase().split(';');
        const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
        return { type: type.trim(), q: q ? Number(q.slice(2)) : 1, i };
      })
      .filter((e) => e.q > 0 && own(BY_MEDIA_TYPE, e.type) !== undefined)
      .sort((a, b) => b.q - a.q || a.i - b.i);
    if (ranked.length > 0) return own(BY_MEDIA_TYPE, ranked[0].type)!;
  }
  if (formatParam !== undefined) {
    const f = typeof formatParam === 'string' ? own(FORMAT_PARAM, formatParam.toLowerCase()) : undefined;
    if (!f) throw new ServiceError('invalidParameterValue', `format must be one of json, jsonp, msgpack, html`);
    return f;
  }
  return 'json';
}

const JSONP_CALLBACK = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;

export function jsonpCallback(param: unknown): string {
  if (param === undefined) return 'callback';
  if (typeof param !== 'string' || !JSONP_CALLBACK.test(param) || param.length > 128) {
    throw new ServiceError('invalidParameterValue', 'callback must be a JavaScript identifier (letters, digits, _ and $, dotted)');
  }
  return param;
}

/** JSON already made (a route that keeps its records' text); only the json and jsonp formats take it. */
export class JsonText {
  constructor(readonly text: string) {}
}

export function serializeJson(value: unknown): string {
  if (value instanceof JsonText) return value.text;
  return JSON.stringify(value);
}

export function serializeMsgpack(value: unknown): Buffer {
  const bytes = packValue(value);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
