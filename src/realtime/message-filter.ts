import { compile, registerFunction, TreeInterpreter, TYPE_ARRAY, TYPE_OBJECT, TYPE_STRING, type JSONValue } from '@jmespath-community/jmespath';
import { ServiceError } from '../errors.js';
import type { StoredMessage } from '../domain/message.js';

// Subscription filters (issue 26): a derived channel `[filter=<base64 expression>]room` receives
// only the messages of `room` the expression matches. The expression is JMESPath, as the
// platform's (its docs: "filter expressions should be written using JMESPath"), evaluated over
// `{ name, clientId, headers }` (headers: the message's extras.headers), e.g.
// name == `"ice-cream"` && headers.flavor == `"strawberry"` && headers.cost < `50`.
// The parser and interpreter are the JMESPath community's TypeScript implementation; this file
// bounds what a client may make them do: the expression's length and depth, and the constructs
// (no projection over data, no function whose cost the expression chooses, like pad_left's width).

/** Characters of an expression (decoded). Above: refused at attach (40010). */
export const MAX_FILTER_CHARS = 1024;
/** Levels of nesting of an expression's syntax tree. Above: refused at attach (40010). */
export const MAX_FILTER_DEPTH = 16;
/** Nodes of an expression's syntax tree. Above: refused at attach (40010). */
export const MAX_FILTER_NODES = 256;

/**
 * Calls of the functions that walk a whole value (`length`, `to_string`) in one expression. Above:
 * refused at attach (40010). Each costs a pass over at most one message (a list holds literals
 * only), so a filter costs a few passes over a message, as encoding it does; a filter of fifty
 * `length(name)` cost 60 ms on a message of 64 KiB, for every attachment of every such filter.
 */
export const MAX_FILTER_WHOLE_VALUE_CALLS = 4;
const WHOLE_VALUE_FUNCTIONS = new Set(['length', 'to_string']);

// The library's length() of a string makes an array of its code points (1.2 ms for 60,000
// characters); the same count, made without one.
registerFunction(
  'length',
  ([value]) => (typeof value === 'string' ? codePoints(value) : Array.isArray(value) ? value.length : Object.keys(value as object).length),
  [{ types: [TYPE_STRING, TYPE_ARRAY, TYPE_OBJECT] }],
  { override: true },
);

/** Code points of a string: its UTF-16 units, a surrogate pair counting once. */
function codePoints(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) n--, i++;
    }
  }
  return n;
}

/** Node types an expression may use: fields, literals, comparisons, logic and arithmetic. */
const NODES = new Set([
  'Field', 'Literal', 'Comparator', 'AndExpression', 'OrExpression', 'NotExpression', 'Subexpression', 'Identity', 'Current', 'Function', 'Arithmetic', 'Unary', 'Index', 'IndexExpression', 'MultiSelectList', 'Ternary',
]);
/** Functions whose cost is bounded by the message's own fields. */
const FUNCTIONS = new Set(['starts_with', 'ends_with', 'contains', 'length', 'to_number', 'to_string', 'type', 'lower', 'upper', 'not_null', 'abs', 'ceil', 'floor']);

export interface MessageFilter {
  /** The expression, decoded. */
  readonly expression: string;
  /** Whether a message passes (an expression that fails on a message, a type error, does not). */
  matches(message: StoredMessage): boolean;
}

/** The filter a `filter` qualifier names (base64 or base64url of the expression); a ServiceError (40010) when it is not one. */
export function compileFilter(encoded: string): MessageFilter {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded)) throw refused('the filter qualifier is not base64');
  if (encoded.length > Math.ceil((MAX_FILTER_CHARS * 4) / 3) + 4 * 4) throw refused(`the filter expression is longer than ${MAX_FILTER_CHARS} characters`);
  const expression = Buffer.from(encoded, 'base64').toString('utf8');
  if (expression.includes('\uFFFD')) throw refused('the filter expression is not UTF-8');
  if (expression.trim().length === 0) throw refused('the filter expression is empty');
  if (expression.length > MAX_FILTER_CHARS) throw refused(`the filter expression is longer than ${MAX_FILTER_CHARS} characters`);
  let ast: ReturnType<typeof compile>;
  try {
    ast = compile(expression);
  } catch (err) {
    throw refused(`the filter expression is not JMESPath: ${err instanceof Error ? err.message : String(err)}`);
  }
  checkTree(ast);
  return {
    expression,
    matches(message: StoredMessage): boolean {
      try {
        return truthy(TreeInterpreter.search(ast, subjectOf(message)));
      } catch {
        return false;
      }
    },
  };
}

const refused = (message: string): ServiceError => new ServiceError('invalidChannelName', message);

/** What an expression sees of a message. */
function subjectOf(m: StoredMessage): JSONValue {
  const subject: Record<string, JSONValue> = { name: m.name ?? null, clientId: m.clientId ?? null };
  const headers = (m.extras as { headers?: unknown } | undefined)?.headers;
  subject.headers = headers !== null && typeof headers === 'object' && !Array.isArray(headers) ? (headers as Record<string, JSONValue>) : null;
  return subject;
}

/** JMESPath's truth: false, null, "", [] and {} are false. */
function truthy(v: JSONValue): boolean {
  if (v === null || v === false || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** The fields an expression reads of a message. */
const SUBJECT_FIELDS = new Set(['name', 'clientId', 'headers']);

/**
 * Walks the syntax tree: its depth, size and constructs within bounds, and every field it reads
 * at the top one of the message's (`"foo"` is a field in JMESPath, not a string: a filter
 * `name == "foo"` would match nothing, in silence).
 */
function checkTree(root: unknown): void {
  let nodes = 0;
  let wholeValueCalls = 0;
  const visit = (node: unknown, depth: number, top: boolean): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const child of node) visit(child, depth, top);
      return;
    }
    const n = node as { type?: unknown; name?: unknown; left?: unknown; right?: unknown };
    if (typeof n.type !== 'string') return;
    if (++nodes > MAX_FILTER_NODES) throw refused(`the filter expression has more than ${MAX_FILTER_NODES} terms`);
    if (depth > MAX_FILTER_DEPTH) throw refused(`the filter expression nests deeper than ${MAX_FILTER_DEPTH} levels`);
    if (!NODES.has(n.type)) throw refused(`the filter expression uses ${n.type}, which filters do not serve: compare name, clientId and headers with literals, and combine with && || !`);
    if (n.type === 'Function' && !FUNCTIONS.has(String(n.name))) throw refused(`the filter expression calls ${String(n.name)}(), which filters do not serve (they serve ${[...FUNCTIONS].join(', ')})`);
    if (n.type === 'Function' && WHOLE_VALUE_FUNCTIONS.has(String(n.name)) && ++wholeValueCalls > MAX_FILTER_WHOLE_VALUE_CALLS) {
      throw refused(`the filter expression calls length() or to_string() more than ${MAX_FILTER_WHOLE_VALUE_CALLS} times`);
    }
    // A list of fields would make a value of many messages for a function to walk (to_string([headers, headers, ...])).
    if (n.type === 'MultiSelectList' && !(node as { children?: { type?: unknown }[] }).children?.every((c) => c.type === 'Literal')) {
      throw refused("a list in a filter expression holds literals only, like ['a', 'b']");
    }
    if (n.type === 'Field' && top && !SUBJECT_FIELDS.has(String(n.name))) {
      throw refused(`the filter expression reads a field "${String(n.name)}": a filter reads name, clientId and headers; a string is written 'text' or \`"text"\``);
    }
    if (n.type === 'Literal') return; // a literal's value is data, not syntax
    if (n.type === 'Subexpression' || n.type === 'IndexExpression') {
      visit(n.left, depth + 1, top);
      visit(n.right, depth + 1, false);
      return;
    }
    for (const [key, child] of Object.entries(node)) if (key !== 'type' && key !== 'name') visit(child, depth + 1, top);
  };
  visit(root, 1, true);
}
