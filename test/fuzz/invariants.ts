// What every response must satisfy, whatever the input (spec: Errors; issue 10): no 5xx from bad
// input, every error in the spec's shape in the negotiated format with its headers, and the
// status equal to error.statusCode (except in an envelope, whose status is 200 by design).
import { decode as decodeMsgpack } from '@msgpack/msgpack';
import type { FuzzResponse } from './http-client.js';
import { ErrorCodes } from '../../src/errors.js';

/** One broken rule: `kind` groups equal failures, `detail` says what this response did. */
export interface Violation {
  kind: string;
  detail: string;
}

interface ErrorShape {
  code: unknown;
  statusCode: unknown;
  message: unknown;
}

const unescapeHtml = (s: string): string =>
  s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);

/** The body decoded by its Content-Type: JSON, MessagePack, JSONP or the HTML page's JSON. */
function decodeBody(res: FuzzResponse): { value?: unknown; problem?: string } {
  const type = String(res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const text = (): string => res.body.toString('utf8');
  try {
    switch (type) {
      case 'application/json':
        return { value: JSON.parse(text()) };
      case 'application/x-msgpack':
        return { value: decodeMsgpack(res.body) };
      case 'application/javascript': {
        const m = /^[A-Za-z_$][\w$.]*\(([\s\S]*)\);?$/.exec(text().trim());
        return m ? { value: JSON.parse(m[1]) } : { problem: 'a JSONP body that is not callback(json);' };
      }
      case 'text/html': {
        const m = /<pre>([\s\S]*)<\/pre>/.exec(text());
        return m ? { value: JSON.parse(unescapeHtml(m[1])) } : { problem: 'an HTML error page without its <pre> JSON' };
      }
      default:
        return { problem: `Content-Type "${type || 'none'}"` };
    }
  } catch (err) {
    return { problem: `a ${type} body that does not decode (${(err as Error).message.slice(0, 80)})` };
  }
}

/** (code, status) pairs of the service's error catalog. */
const CATALOG_PAIRS = new Set(Object.values(ErrorCodes).map(({ code, statusCode }) => `${code}/${statusCode}`));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function shapeProblem(error: unknown): string | undefined {
  if (!isObject(error)) return 'no error object';
  const e = error as unknown as ErrorShape;
  if (typeof e.code !== 'number' || !Number.isInteger(e.code)) return 'error.code is not a number';
  if (typeof e.statusCode !== 'number') return 'error.statusCode is not a number';
  if (typeof e.message !== 'string' || e.message.length === 0) return 'error.message is not a string';
  if (e.statusCode < 500 && Math.floor(e.code / 100) !== e.statusCode && !CATALOG_PAIRS.has(`${e.code}/${e.statusCode}`)) {
    // A few statuses reuse 400 codes in the catalog (413 and 40009, 431 and 40004...); 5xx codes do not follow their status (50005 is a 503).
    return `error.code ${e.code} does not belong to status ${e.statusCode}`;
  }
  return undefined;
}

function envelopedError(res: FuzzResponse): boolean {
  const { value } = decodeBody(res);
  return isObject(value) && typeof value.statusCode === 'number' && value.statusCode >= 400;
}

/** The rules one response breaks (empty when it keeps them all). */
export function violationsOf(res: FuzzResponse, method: string, mustRefuse?: string): Violation[] {
  const out: Violation[] = [];
  if (mustRefuse !== undefined && res.status < 300 && !envelopedError(res)) {
    out.push({ kind: `accepted (${res.status}) although ${mustRefuse}`, detail: `status ${res.status}` });
  }
  const headerCode = res.headers['x-service-errorcode'];
  const ablyCode = res.headers['x-ably-errorcode'];
  const excerpt = (): string => JSON.stringify(res.body.subarray(0, 160).toString('utf8'));

  if (res.status >= 500) {
    out.push({ kind: `${res.status} answered`, detail: `status ${res.status}, X-Service-ErrorCode ${headerCode ?? 'none'}, body ${excerpt()}` });
  }
  if (res.status < 400 && res.status !== 200) return out;

  // HEAD answers carry no body; their headers must still tell the error.
  if (method === 'HEAD') {
    if (res.status >= 400 && (headerCode === undefined || ablyCode === undefined)) {
      out.push({ kind: `${res.status} without error headers (HEAD)`, detail: `status ${res.status}` });
    }
    return out;
  }

  if (res.status === 200) {
    // Only an envelope can carry an error in a 200.
    const { value } = decodeBody(res);
    if (isObject(value) && typeof value.statusCode === 'number' && value.statusCode >= 400) {
      const error = isObject(value.response) ? value.response.error : undefined;
      const problem = shapeProblem(error);
      if (problem) out.push({ kind: `enveloped ${value.statusCode}: ${problem}`, detail: excerpt() });
      else if ((error as unknown as ErrorShape).statusCode !== value.statusCode) {
        out.push({ kind: 'envelope statusCode differs from error.statusCode', detail: excerpt() });
      } else if (!isObject(value.headers) || value.headers['x-service-errorcode'] !== String((error as unknown as ErrorShape).code)) {
        // The envelope's headers are the reply's (README: The REST interface): its error headers too.
        out.push({ kind: 'envelope headers lack the error code', detail: excerpt() });
      }
    }
    return out;
  }

  const { value, problem: decodeProblem } = decodeBody(res);
  const error = isObject(value) ? value.error : undefined;
  const problem = decodeProblem ?? shapeProblem(error);
  if (problem) {
    out.push({ kind: `${res.status} without the error shape: ${problem}`, detail: `body ${excerpt()}` });
    return out;
  }
  const e = error as unknown as ErrorShape;
  if (e.statusCode !== res.status) {
    out.push({ kind: `status ${res.status} but error.statusCode ${String(e.statusCode)}`, detail: `code ${String(e.code)}` });
  }
  if (headerCode !== String(e.code) || ablyCode !== String(e.code)) {
    out.push({
      kind: `${res.status} with error headers missing or unequal to error.code`,
      detail: `error.code ${String(e.code)}, X-Service-ErrorCode ${String(headerCode)}, X-Ably-ErrorCode ${String(ablyCode)}`,
    });
  }
  return out;
}
