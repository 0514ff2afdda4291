import { ServiceError } from '../errors.js';

/**
 * Form bodies (`application/x-www-form-urlencoded`), taken only where a route says which fields a
 * form may hold (its `config.formFields`): the spec's publish, and token requests. A form is what
 * curl sends when `-d` is given without a `Content-Type`, so the commonest mistake,
 * `curl -d '{"name":"a","data":"b"}'`, arrives as one field whose name is the JSON text. Taking it
 * as a message with no name and no data would lose what the client meant to publish; it is
 * refused instead, with a message that names the missing header.
 */

const JSON_HINT = "if you meant to send JSON, add the header 'Content-Type: application/json' (curl -d sends a form unless told otherwise)";

/**
 * A form body's fields, the last of a repeated name winning. Strict where node:querystring is
 * lenient: a percent-encoded sequence that is not UTF-8 is refused instead of becoming U+FFFD.
 * `formFields` undefined: the route takes no form bodies (415).
 */
export function parseFormBody(text: string, formFields: readonly string[] | undefined): Record<string, string> {
  if (formFields === undefined) {
    throw new ServiceError(
      'unsupportedMediaType',
      `this route does not take form bodies; send application/json or application/x-msgpack (${JSON_HINT})`,
    );
  }
  const fields: Record<string, string> = Object.create(null);
  const decode = (s: string): string => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      throw new ServiceError('invalidRequestBody', 'the form body has a percent-encoded sequence that does not decode to UTF-8');
    }
  };
  const unknown: string[] = [];
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq));
    if (!formFields.includes(name)) unknown.push(name);
    else fields[name] = eq < 0 ? '' : decode(pair.slice(eq + 1));
  }
  if (unknown.length > 0) {
    const first = unknown[0];
    const looksLikeJson = /^\s*[[{"]/.test(first);
    const shown = first.length > 60 ? `${first.slice(0, 60)}…` : first;
    throw new ServiceError(
      'invalidRequestBody',
      looksLikeJson
        ? `the body was sent as a form (Content-Type application/x-www-form-urlencoded) but holds JSON; ${JSON_HINT}`
        : `unknown form field "${shown}"; a form here may hold ${formFields.join(', ')}; ${JSON_HINT}`,
    );
  }
  if (Object.keys(fields).length === 0) {
    throw new ServiceError('invalidRequestBody', `the form body holds none of the fields ${formFields.join(', ')}; ${JSON_HINT}`);
  }
  return { ...fields };
}
