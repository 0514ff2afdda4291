import { ServiceError } from '../errors.js';

/**
 * Control of response content (spec: Common behaviour): `fields`, `flatten=true`, `select`.
 * On an array result, paths apply to each element unless they start with an index or `*`.
 */
export interface ResponseControl {
  fields?: string[][];
  flatten: boolean;
  select?: string[];
}

const splitPath = (spec: string, name: string): string[] => {
  const parts = spec.split('.');
  if (parts.some((p) => p.length === 0)) throw new ServiceError('invalidParameterValue', `${name} "${spec}" has an empty path element`);
  return parts;
};

export function parseResponseControl(query: Record<string, unknown>): ResponseControl | undefined {
  const { fields, flatten, select } = query;
  if (fields === undefined && flatten === undefined && select === undefined) return undefined;
  const control: ResponseControl = { flatten: false };
  if (fields !== undefined) {
    if (typeof fields !== 'string' || fields.length === 0) throw new ServiceError('invalidParameterValue', 'fields must list one or more field paths');
    control.fields = fields.split(',').map((f) => splitPath(f, 'fields'));
    if (control.fields.some((f) => f.includes('*'))) throw new ServiceError('invalidParameterValue', 'fields takes no wildcards; use select');
  }
  if (flatten !== undefined) {
    if (flatten !== 'true' && flatten !== 'false') throw new ServiceError('invalidParameterValue', 'flatten must be true or false');
    control.flatten = flatten === 'true';
  }
  if (select !== undefined) {
    if (typeof select !== 'string' || select.length === 0) throw new ServiceError('invalidParameterValue', 'select must be a path');
    control.select = splitPath(select, 'select');
  }
  return control;
}

/**
 * An object whose fields the paths walk into. Bytes (message data in MessagePack replies) are one
 * value, as their base64 text is in the text formats: walked into, a page's binary data became a
 * field per byte (flatten, select `*`), and `fields`/`select` answered per format what JSON answers.
 */
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/** `fields` paths as a tree: one node per path element, `whole` where a path ends (all below it kept). */
interface FieldTree {
  whole: boolean;
  children: Map<string, FieldTree>;
  /** every child is an array index: an array here is picked from by index, not element by element */
  indexed: boolean;
}

function fieldTree(paths: string[][]): FieldTree {
  const root: FieldTree = { whole: false, children: new Map(), indexed: true };
  for (const path of paths) {
    let node = root;
    for (const key of path) {
      let child = node.children.get(key);
      if (!child) {
        node.children.set(key, (child = { whole: false, children: new Map(), indexed: true }));
        if (!/^\d+$/.test(key)) node.indexed = false;
      }
      node = child;
    }
    node.whole = true;
  }
  return root;
}

/**
 * Keeps only fields on the given paths; a path that ends at a field keeps all below it. Each key is
 * looked up in a tree of the paths: filtering the paths for every key cost keys × paths, and a query
 * string's 1,300 paths over a page of 1,000 messages held the event loop half a second.
 */
export function pickFields(value: unknown, paths: string[][]): unknown {
  return pick(value, fieldTree(paths));
}

function pick(value: unknown, node: FieldTree): unknown {
  if (Array.isArray(value) && !node.indexed) return value.map((v) => pick(v, node));
  if (!isObject(value) && !Array.isArray(value)) return value;
  const entries: [string, unknown][] = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  const out: Record<string, unknown> = {};
  for (const [key, child] of entries) {
    const below = node.children.get(key);
    if (below === undefined) continue;
    out[key] = below.whole ? child : pick(child, below);
  }
  return out;
}

/**
 * The most fields, and characters of their long keys, that flatten and select make for one reply.
 * Each field's key repeats the path to it: a page of 100 messages of 31,000 numbers nested 28 deep
 * (62 KB each) flattened to 222 MB and held the event loop 15 s, a page of 1,000 froze the service
 * for minutes (review finding). Past either, the request is refused (40003) before more is made.
 */
export const MAX_LONG_KEYS = 250_000;
export const MAX_LONG_KEY_CHARS = 16 * 1024 * 1024;

class LongKeys {
  private count = 0;
  private chars = 0;
  readonly out: Record<string, unknown> = {};

  constructor(private readonly what: string) {}

  set(key: string, value: unknown): void {
    this.chars += key.length;
    if (++this.count > MAX_LONG_KEYS || this.chars > MAX_LONG_KEY_CHARS) {
      throw new ServiceError(
        'invalidParameterValue',
        `${this.what} would make more than ${MAX_LONG_KEYS} fields, or ${MAX_LONG_KEY_CHARS} characters of keys, for this page; ask for fewer records (limit) or fewer fields (fields)`,
      );
    }
    this.out[key] = value;
  }
}

/** One level of dot-joined keys, array indexes as key components. */
export function flattenValue(value: unknown): Record<string, unknown> {
  const keys = new LongKeys('flatten=true');
  const walk = (node: unknown, prefix: string): void => {
    if (Array.isArray(node) || isObject(node)) {
      const entries = Array.isArray(node) ? node.map((v, i) => [String(i), v] as const) : Object.entries(node);
      if (entries.length === 0 && prefix) keys.set(prefix, node);
      for (const [k, v] of entries) walk(v, prefix ? `${prefix}.${k}` : k);
    } else if (prefix) {
      keys.set(prefix, node);
    }
  };
  walk(value, '');
  return keys.out;
}

/** Every field matching a path with `*` wildcards, as long key -> value. */
export function selectPaths(value: unknown, path: string[]): Record<string, unknown> {
  const effective = Array.isArray(value) && !(path[0] === '*' || /^\d+$/.test(path[0])) ? ['*', ...path] : path;
  const keys = new LongKeys('select');
  const walk = (node: unknown, rest: string[], key: string): void => {
    if (rest.length === 0) {
      keys.set(key, node);
      return;
    }
    if (!Array.isArray(node) && !isObject(node)) return;
    const entries = Array.isArray(node) ? node.map((v, i) => [String(i), v] as const) : Object.entries(node);
    for (const [k, v] of entries) if (rest[0] === '*' || rest[0] === k) walk(v, rest.slice(1), key ? `${key}.${k}` : k);
  };
  walk(value, effective, '');
  return keys.out;
}

export function applyResponseControl(body: unknown, control: ResponseControl): unknown {
  if (control.select) return selectPaths(control.fields ? pickFields(body, control.fields) : body, control.select);
  let result = control.fields ? pickFields(body, control.fields) : body;
  if (control.flatten) result = flattenValue(result);
  return result;
}
