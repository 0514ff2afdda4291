import { randomBytes, randomFillSync } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { Limits } from '../limits.js';
import { messageSize, type MessageData, type StoredMessage } from '../domain/message.js';

/**
 * A validated message of a publish. Its `timestamp` is 0 until the log assigns it (Publisher), so
 * that every message has the same fields in the same order from the start.
 */
export type OutgoingMessage = StoredMessage;

export type PublishLimits = Pick<Limits, 'maxMessageSize' | 'maxMessagesPerPublish' | 'maxPublishBytes' | 'maxDataDepth'>;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

/**
 * Whether a JSON value nests no deeper than `max` levels of objects and arrays, made only of plain
 * objects, arrays, bytes and scalars (finite numbers). Stops at the first level too deep, so its own recursion is
 * bounded: deeper values would overflow the stack of every later walk over them (sizing, encoding
 * for the log, rendering).
 */
export function wellFormed(value: unknown, max: number): boolean {
  // NaN and the infinities (JSON's 1e999, MessagePack's floats) have no JSON form: a JSON reader
  // would get null for what was accepted.
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return true;
  if (max === 0) return false;
  if (Array.isArray(value)) {
    for (const v of value) if (!wellFormed(v, max - 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k in value) if (!wellFormed((value as Record<string, unknown>)[k], max - 1)) return false;
  return true;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]*={0,2}$/;

// Ids are unique (a random prefix per process and a counter) and cannot be guessed (6 random bytes
// per publish): history keeps one message per id and channel within the idempotency window, so a
// client that could tell the id the service will assign next could publish it first, and another
// client's message given that id would be dropped from history. The random bytes are drawn from a
// pool refilled 1,024 publishes at a time (one randomFillSync instead of one call per publish).
const ID_PREFIX = randomBytes(6).toString('base64url');
let idCounter = 0;
const RANDOM_POOL = Buffer.allocUnsafe(6 * 1024);
let poolAt = RANDOM_POOL.length;

/** A fresh base for the ids of one publish (`<base>:<index>`, like the SDKs' idempotent ids). */
export function newIdBase(): string {
  if (poolAt === RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    poolAt = 0;
  }
  const random = RANDOM_POOL.toString('base64url', poolAt, (poolAt += 6));
  return `${ID_PREFIX}${(idCounter++).toString(36)}${random}`;
}

/** Whether this process assigned the id: such ids never repeat, so they need no duplicate check. */
export const isAssignedId = (id: string): boolean => id.startsWith(ID_PREFIX);

function checkEncoding(data: MessageData | undefined, encoding: string, where: string): void {
  const steps = encoding.split('/');
  if (steps.some((s) => s.length === 0)) {
    throw new ServiceError('invalidDataOrEncoding', `${where}: encoding "${encoding}" is malformed`);
  }
  const outer = steps[steps.length - 1];
  if (outer === 'base64') {
    if (typeof data !== 'string' || data.length % 4 === 1 || !(BASE64.test(data) || BASE64URL.test(data))) {
      throw new ServiceError('invalidDataOrEncoding', `${where}: data is not valid base64 but its encoding says base64`);
    }
  } else if (outer === 'json') {
    if (typeof data !== 'string') {
      throw new ServiceError('invalidDataOrEncoding', `${where}: encoding "json" needs data as a JSON string`);
    }
    try {
      JSON.parse(data);
    } catch {
      throw new ServiceError('invalidDataOrEncoding', `${where}: data is not valid JSON but its encoding says json`);
    }
  }
}

// The rules of a message's fields, shared by every kind of message a client sends: a publish
// (REST and realtime) and a presence message (spec: PresenceMessage, "same as on Message";
// src/presence/presence-body.ts). `where` names the message in errors ("message 2").

/** `data`: a string, a JSON object or array, or bytes, nested at most maxDataDepth levels. */
export function dataField(value: unknown, limits: Pick<Limits, 'maxDataDepth'>, where: string): MessageData | undefined {
  if (value === undefined || value === null) return undefined;
  if (!(typeof value === 'string' || value instanceof Uint8Array || Array.isArray(value) || isPlainObject(value))) {
    throw new ServiceError('invalidDataOrEncoding', `${where}: data must be a string, a JSON object or array, or bytes`);
  }
  if (!wellFormed(value, limits.maxDataDepth)) {
    throw new ServiceError(
      'invalidDataOrEncoding',
      `${where}: data nests deeper than ${limits.maxDataDepth} levels or holds values other than objects, arrays, strings, finite numbers, booleans, null and bytes`,
    );
  }
  return value as MessageData;
}

/** `encoding`: a string whose last step (base64, json) the data must match; empty is none. */
export function encodingField(value: unknown, data: MessageData | undefined, where: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new ServiceError('invalidDataOrEncoding', `${where}: encoding must be a string`);
  checkEncoding(data, value, where);
  return value;
}

/** Most headers one message's extras.headers may hold. */
export const MAX_EXTRAS_HEADERS = 100;
/** Longest header name, and longest extras.ref.type / extras.ref.timeserial, in characters. */
export const MAX_EXTRAS_NAME_LENGTH = 256;

const shortString = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= MAX_EXTRAS_NAME_LENGTH;

/** `extras.headers`: a flat map of names to strings, finite numbers, booleans or null. */
function headersExtras(value: unknown, where: string): void {
  if (!isPlainObject(value)) {
    throw new ServiceError('invalidExtras', `${where}: extras.headers must be a map of names to string, number, boolean or null values`);
  }
  let count = 0;
  for (const [name, v] of Object.entries(value)) {
    if (++count > MAX_EXTRAS_HEADERS) throw new ServiceError('invalidExtras', `${where}: extras.headers holds more than ${MAX_EXTRAS_HEADERS} headers`);
    if (name.length === 0 || name.length > MAX_EXTRAS_NAME_LENGTH) {
      throw new ServiceError('invalidExtras', `${where}: an extras.headers name must be 1 to ${MAX_EXTRAS_NAME_LENGTH} characters`);
    }
    const ok = v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
    if (!ok) {
      throw new ServiceError('invalidExtras', `${where}: extras.headers["${name.slice(0, 64)}"] must be a string, a finite number, a boolean or null, not ${describe(v)}`);
    }
  }
}

/** `extras.ref`: a reference to another message, `{ type, timeserial }` (the SDK's refType / refTimeserial filters). */
function refExtras(value: unknown, where: string): void {
  if (!isPlainObject(value)) throw new ServiceError('invalidExtras', `${where}: extras.ref must be an object { type, timeserial }`);
  for (const key of Object.keys(value)) {
    if (key !== 'type' && key !== 'timeserial') throw new ServiceError('invalidExtras', `${where}: extras.ref may hold only type and timeserial, not "${key.slice(0, 64)}"`);
  }
  if (!shortString(value.type)) throw new ServiceError('invalidExtras', `${where}: extras.ref.type must be a string of 1 to ${MAX_EXTRAS_NAME_LENGTH} characters (e.g. "com.ably.reply")`);
  if (!shortString(value.timeserial)) {
    throw new ServiceError('invalidExtras', `${where}: extras.ref.timeserial must be a string of 1 to ${MAX_EXTRAS_NAME_LENGTH} characters: the serial of the message referred to`);
  }
}

const describe = (v: unknown): string => (v instanceof Uint8Array ? 'bytes' : Array.isArray(v) ? 'an array' : v === undefined ? 'undefined' : typeof v);

/**
 * `extras` (spec: Message, extras): an object of the fields the service knows, `push` (an object),
 * `headers` (a flat map) and `ref` (a reference to another message), nested at most maxDataDepth
 * levels; anything else is refused with 40032, as the platform does.
 */
export function extrasField(value: unknown, limits: Pick<Limits, 'maxDataDepth'>, where: string): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isPlainObject(value)) throw new ServiceError('invalidExtras', `${where}: extras must be an object`);
  if (!wellFormed(value, limits.maxDataDepth)) {
    throw new ServiceError('invalidExtras', `${where}: extras nests deeper than ${limits.maxDataDepth} levels or holds values JSON cannot`);
  }
  for (const [key, v] of Object.entries(value)) {
    if (key === 'push') {
      if (!isPlainObject(v)) throw new ServiceError('invalidExtras', `${where}: extras.push must be an object`);
    } else if (key === 'headers') {
      headersExtras(v, where);
    } else if (key === 'ref') {
      refExtras(v, where);
    } else {
      throw new ServiceError('invalidExtras', `${where}: extras may hold only push, headers and ref, not "${key.slice(0, 64)}"`);
    }
  }
  return value;
}

/** `id`, when the client gives one: a non-empty string of at most 256 characters. */
export function idField(value: unknown, where: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) {
    throw new ServiceError('invalidMessageId', `${where}: id must be a non-empty string of at most 256 characters`);
  }
  return value;
}

/** `clientId`, when the client gives one: a non-empty string other than the wildcard `*`. Whose it may be is the caller's rule. */
export function clientIdField(value: unknown, where: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value === '*') {
    throw new ServiceError('invalidClientId', `${where}: clientId must be a non-empty string other than "*"`);
  }
  return value;
}

/** The message's size (messageSize) within maxMessageSize; returns it. */
export function checkMessageSize(m: OutgoingMessage, limits: Pick<Limits, 'maxMessageSize'>, where: string): number {
  const size = messageSize(m);
  if (size > limits.maxMessageSize) throw new ServiceError('messageTooLarge', `${where} is ${size} bytes; the maximum is ${limits.maxMessageSize}`);
  return size;
}

/**
 * The messages of one publish, copied for another channel (batch publish sends one message set to
 * many): each copy gets its own timestamp when appended, and ids this service assigned get a fresh
 * base so that no two channels share them; client-supplied ids stay (idempotency is per channel).
 */
export function copyForChannel(messages: OutgoingMessage[]): OutgoingMessage[] {
  let idBase: string | undefined;
  return messages.map((m, index) => {
    const copy = { ...m };
    if (isAssignedId(m.id)) copy.id = `${(idBase ??= newIdBase())}:${index}`;
    return copy;
  });
}

/** Bytes of a publish's messages, as the size limits count them. */
export const publishSize = (messages: OutgoingMessage[]): number => messages.reduce((n, m) => n + messageSize(m), 0);

/** The realtime connection a publish names by its connectionKey (spec: Message, connectionKey). */
export interface PublishingConnection {
  connectionId: string;
  /** the connection's identity, when it has one */
  clientId?: string;
}

/**
 * Who publishes, as the credentials say: the clientId they carry (`*`: any may be claimed), and
 * how they were given. An API key (basic) may claim any clientId; a token issued without a
 * clientId identifies nobody, so its messages may claim none (only a token of that clientId, or
 * of the wildcard, may).
 */
export interface Publisher {
  clientId?: string;
  method: 'basic' | 'token';
}

/**
 * Validates the messages of one publish (spec: Message) and gives each an id. A message with a
 * valid connectionKey is published on behalf of that connection: it carries its id and clientId.
 * The wire form may carry fields the SDKs add (`size`, ignored; `action`, which must be a create:
 * the SDK's updateMessage, deleteMessage and appendMessage send another, and publishing those as
 * new messages would be wrong).
 */
export function parsePublishBody(
  body: unknown,
  limits: PublishLimits,
  publisher: Publisher,
  connectionOf?: (connectionKey: string) => PublishingConnection | undefined,
): OutgoingMessage[] {
  const raw = Array.isArray(body) ? body : [body];
  if (body === undefined || body === null || (typeof body === 'string' && body.length === 0)) {
    throw new ServiceError('invalidRequestBody', 'the request body is empty; send a message object or an array of messages');
  }
  if (raw.length === 0) throw new ServiceError('invalidRequestBody', 'the request body is an empty array; send at least one message');
  if (raw.length > limits.maxMessagesPerPublish) {
    throw new ServiceError('tooManyMessages', `a publish may hold at most ${limits.maxMessagesPerPublish} messages, this one has ${raw.length}`);
  }
  let idBase: string | undefined;
  let total = 0;
  const credentialsClientId = publisher.clientId;
  return raw.map((item, index) => {
    if (!isPlainObject(item)) throw new ServiceError('invalidRequestBody', `message ${index} is not an object`);
    const where = `message ${index}`;
    if (item.action !== undefined && item.action !== null && item.action !== 0 && item.action !== 'message.create') {
      const action = typeof item.action === 'number' ? String(item.action) : typeof item.action === 'string' ? JSON.stringify(item.action.slice(0, 40)) : `of type ${typeof item.action}`;
      throw new ServiceError('invalidPublishRequest', `${where}: action ${action} is not served: this service publishes new messages only (action 0, message.create), no updates, deletes or appends`);
    }
    let connection: PublishingConnection | undefined;
    if (item.connectionKey !== undefined && item.connectionKey !== null) {
      connection = typeof item.connectionKey === 'string' ? connectionOf?.(item.connectionKey) : undefined;
      if (!connection) {
        throw new ServiceError('invalidPublishRequest', `message ${index}: connectionKey does not identify a realtime connection of this app`);
      }
    }
    const m: OutgoingMessage = { id: '', timestamp: 0 };
    if (item.name !== undefined && item.name !== null) {
      if (typeof item.name !== 'string') throw new ServiceError('invalidMessageName', `message ${index}: name must be a string`);
      m.name = item.name;
    }
    const data = dataField(item.data, limits, where);
    if (data !== undefined) m.data = data;
    const encoding = encodingField(item.encoding, m.data, where);
    if (encoding !== undefined) m.encoding = encoding;
    if (connection) {
      m.connectionId = connection.connectionId;
      const own = connection.clientId;
      if (own !== undefined && own !== '*') {
        if (item.clientId !== undefined && item.clientId !== null && item.clientId !== own) {
          throw new ServiceError('invalidClientId', `message ${index}: clientId "${String(item.clientId)}" does not match the connection's clientId "${own}"`);
        }
        if (credentialsClientId !== undefined && credentialsClientId !== '*' && credentialsClientId !== own) {
          throw new ServiceError('invalidClientId', `message ${index}: the connection's clientId "${own}" does not match the credentials' clientId "${credentialsClientId}"`);
        }
        m.clientId = own;
      }
    }
    const given = m.clientId === undefined ? clientIdField(item.clientId, where) : undefined;
    if (given !== undefined) {
      if (credentialsClientId !== undefined && credentialsClientId !== '*' && given !== credentialsClientId) {
        throw new ServiceError('invalidClientId', `${where}: clientId "${given}" does not match the credentials' clientId "${credentialsClientId}"`);
      }
      if (credentialsClientId === undefined && publisher.method === 'token') {
        throw new ServiceError('invalidClientId', `${where}: clientId "${given}" cannot be claimed with a token issued without a clientId (use a token of that clientId or of the wildcard "*", or leave clientId out)`);
      }
      m.clientId = given;
    } else if (m.clientId === undefined && credentialsClientId !== undefined && credentialsClientId !== '*') {
      m.clientId = credentialsClientId;
    }
    const extras = extrasField(item.extras, limits, where);
    if (extras !== undefined) m.extras = extras;
    const id = idField(item.id, where);
    if (id !== undefined) {
      m.id = id;
    } else {
      idBase ??= newIdBase();
      m.id = `${idBase}:${index}`;
    }
    total += checkMessageSize(m, limits, where);
    if (total > limits.maxPublishBytes) {
      throw new ServiceError('messageTooLarge', `the messages of this publish add up to more than ${limits.maxPublishBytes} bytes, the most one publish may hold`);
    }
    return m;
  });
}
