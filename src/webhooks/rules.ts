import { createHash, randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { SOURCE_TYPES, type WebhookRule, type WebhookSourceType } from '../domain/webhook-rule.js';

export { SOURCE_TYPES, type WebhookRule, type WebhookSourceType } from '../domain/webhook-rule.js';

/** At most this many rules per app (each runs a consumer of the log). */
export const MAX_RULES_PER_APP = 16;
const MAX_URL_LENGTH = 2048;
const MAX_FILTER_LENGTH = 256;
const MAX_HEADERS = 16;

/**
 * Headers of a request's framing and connection, which the sender sets: a rule's
 * `Transfer-Encoding: chunked` was sent beside the body's Content-Length, a request read one way
 * by a proxy and another by the server behind it (RFC 9112 forbids sending both).
 */
export const RESERVED_HEADERS: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'expect', 'proxy-connection']);

// V8's linear-time regular expression engine (the `l` flag): a rule's channelFilter is matched
// against every channel name the app's clients publish on, up to 2,048 bytes each; on the
// backtracking engine `^(a+)+$` took 2^n steps for n a's and a `!`, so one app's rule and one
// publish blocked the process (every app, every connection) for hours. The linear engine alone
// walks every state of the filter at every character of the name, though: a 2 KB name took 5 to
// 40 ms for `.*` repeated 16 to 120 times, and 130 ms for `(((a*)*)*)` repeated 25 times, per rule
// and publish, where the backtracking engine takes microseconds. So a filter runs on the
// backtracking engine and passes to the linear one past 50,000 backtracks (V8's
// --regexp-backtracks-before-fallback), which it may, as it is refused unless the linear engine
// can run it; and without its capturing groups (withoutCaptures).
setFlagsFromString('--enable-experimental-regexp-engine');
setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

/**
 * The filter with its capturing groups made non-capturing (`(x)` and `(?<name>x)` as `(?:x)`):
 * what it matches is the same (a filter has no backreferences), and the linear engine carries
 * every group's positions along each path: `(((a*)*)*)` repeated 25 times took 40 times longer
 * over a 2 KB name with its groups than without.
 */
export function withoutCaptures(source: string): string {
  let out = '';
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      out += source.slice(i, i + 2);
      i++;
    } else if (c === '[') {
      // A class, to its first unescaped `]` (`[]` is an empty class): a `(` in it is a character.
      let j = i + 1;
      while (j < source.length && source[j] !== ']') j += source[j] === '\\' ? 2 : 1;
      out += source.slice(i, j + 1);
      i = j;
    } else if (c === '(' && source[i + 1] !== '?') {
      out += '(?:';
    } else if (c === '(' && source[i + 2] === '<' && source[i + 3] !== '=' && source[i + 3] !== '!') {
      out += '(?:';
      i = Math.max(i, source.indexOf('>', i));
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * A rule's channelFilter as a RegExp that answers in time linear in the channel name (see above);
 * throws (a SyntaxError) when it is not a regular expression, or uses what the linear engine does
 * not run (backreferences, lookarounds, large counted repetitions).
 */
export function channelFilterRegExp(source: string): RegExp {
  new RegExp(source, 'l');
  const matcher = withoutCaptures(source);
  new RegExp(matcher, 'l');
  return new RegExp(matcher);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Reads a rule from JSON (APPS_FILE, POST /apps/<appId>/rules); throws an Error whose message
 * names the field and what to give (`where` prefixes it).
 */
export function parseRule(raw: unknown, where = 'rule', idOf?: (rule: Omit<WebhookRule, 'id'>) => string): WebhookRule {
  if (!isObject(raw)) throw new Error(`${where} must be an object with ruleType, requestMode, source and target`);
  if (raw.ruleType !== 'http') throw new Error(`${where}.ruleType must be "http" (the only rule type this service runs)`);
  const requestMode = raw.requestMode ?? 'single';
  if (requestMode !== 'single' && requestMode !== 'batch') throw new Error(`${where}.requestMode must be "single" or "batch"`);
  const source = raw.source;
  if (!isObject(source) || !(SOURCE_TYPES as readonly unknown[]).includes(source.type)) {
    throw new Error(`${where}.source.type must be one of ${SOURCE_TYPES.join(', ')}`);
  }
  const channelFilter = source.channelFilter ?? '';
  if (typeof channelFilter !== 'string' || channelFilter.length > MAX_FILTER_LENGTH) {
    throw new Error(`${where}.source.channelFilter must be a regular expression of at most ${MAX_FILTER_LENGTH} characters`);
  }
  try {
    new RegExp(channelFilter);
  } catch (err) {
    throw new Error(`${where}.source.channelFilter is not a regular expression: ${(err as Error).message}`);
  }
  try {
    channelFilterRegExp(channelFilter);
  } catch (err) {
    throw new Error(`${where}.source.channelFilter must be matchable in linear time (no backreferences, lookarounds or large counted repetitions): ${(err as Error).message}`);
  }
  const target = raw.target;
  if (!isObject(target) || typeof target.url !== 'string' || target.url.length > MAX_URL_LENGTH) {
    throw new Error(`${where}.target.url must be an http(s) URL of at most ${MAX_URL_LENGTH} characters`);
  }
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw new Error(`${where}.target.url "${target.url.slice(0, 100)}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${where}.target.url must be http or https, not ${url.protocol}`);
  if (url.username || url.password) throw new Error(`${where}.target.url must not hold credentials; use target.headers`);
  if (target.signingKeyId !== undefined && typeof target.signingKeyId !== 'string') throw new Error(`${where}.target.signingKeyId must be a key name`);
  if (target.enveloped !== undefined && typeof target.enveloped !== 'boolean') throw new Error(`${where}.target.enveloped must be true or false`);
  if (target.format !== undefined && target.format !== 'json' && target.format !== 'msgpack') throw new Error(`${where}.target.format must be "json" or "msgpack"`);
  const headers = target.headers ?? [];
  if (!Array.isArray(headers) || headers.length > MAX_HEADERS || !headers.every((h) => isObject(h) && typeof h.name === 'string' && /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/.test(h.name) && typeof h.value === 'string' && h.value.length <= 1024 && !/[^\t\x20-\x7e\x80-\xff]/.test(h.value))) {
    throw new Error(`${where}.target.headers must be at most ${MAX_HEADERS} {"name", "value"} pairs (token names, values of at most 1024 characters on one line, of the characters an HTTP header carries: tab, printable ASCII and Latin-1)`);
  }
  const reserved = (headers as { name: string }[]).find((h) => RESERVED_HEADERS.has(h.name.toLowerCase()));
  if (reserved) throw new Error(`${where}.target.headers may not set ${reserved.name}: the request's framing and connection are the service's (${[...RESERVED_HEADERS].join(', ')})`);
  if (raw.id !== undefined && (typeof raw.id !== 'string' || !/^[A-Za-z0-9_-]{1,32}$/.test(raw.id))) throw new Error(`${where}.id must be 1 to 32 letters, digits, "_" or "-"`);
  const rule: Omit<WebhookRule, 'id'> = {
    ruleType: 'http',
    requestMode,
    source: { type: source.type as WebhookSourceType, channelFilter },
    target: {
      url: url.toString(),
      ...(typeof target.signingKeyId === 'string' ? { signingKeyId: target.signingKeyId } : {}),
      ...(headers.length > 0 ? { headers: headers as { name: string; value: string }[] } : {}),
      enveloped: target.enveloped !== false,
      format: target.format === 'msgpack' ? 'msgpack' : 'json',
    },
  };
  const id = typeof raw.id === 'string' ? raw.id : (idOf?.(rule) ?? randomBytes(5).toString('base64url').slice(0, 6));
  return { id, ...rule };
}

/**
 * The id of a rule given without one in APPS_FILE: from the app and the rule's content, so that
 * every instance and every restart reading the file names it alike (its consumer group and its
 * checkpoint are named after it: a random id would make each instance deliver everything, and
 * each restart start over at the log's end).
 */
export const fileRuleId = (appId: string, rule: Omit<WebhookRule, 'id'>): string => `f${createHash('sha256').update(`${appId}\u0000${JSON.stringify(rule)}`).digest('base64url').slice(0, 10)}`;

/** The rule as the rules route shows it (the platform's shape, with the app). */
export const ruleView = (appId: string, rule: WebhookRule): Record<string, unknown> => ({ appId, ...rule });
