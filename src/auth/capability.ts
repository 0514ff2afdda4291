import { ServiceError } from '../errors.js';
import { isMetachannel, META_PREFIX } from '../domain/channel.js';

export const OPERATIONS = ['publish', 'subscribe', 'presence', 'history', 'channel-metadata', 'stats', 'push-subscribe', 'push-admin', 'object-subscribe', 'object-publish', 'annotation-subscribe', 'annotation-publish', 'message-update-own', 'message-update-any', 'message-delete-own', 'message-delete-any', '*'] as const;
export type Operation = (typeof OPERATIONS)[number];

/** resource name or wildcard -> permitted operations */
export type Capability = Map<string, Set<string>>;

/** A resource name as an error message shows it: at most 64 characters of what a client sent. */
const shown = (resource: string): string => (resource.length > 64 ? `${resource.slice(0, 64)}…` : resource);

/** Parses a capability from its JSON string or object form; bad input is a 400 with a clear message. */
export function parseCapability(input: unknown): Capability {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input);
    } catch {
      throw new ServiceError('invalidParameterValue', 'capability is not valid JSON');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ServiceError('invalidParameterValue', 'capability must be a JSON object of resource to operations');
  }
  const cap: Capability = new Map();
  for (const [resource, ops] of Object.entries(value)) {
    if (resource.length === 0) throw new ServiceError('invalidParameterValue', 'capability has an empty resource name');
    if (!Array.isArray(ops) || ops.length === 0 || ops.some((op) => typeof op !== 'string' || !(OPERATIONS as readonly string[]).includes(op))) {
      throw new ServiceError(
        'invalidParameterValue',
        `capability for "${shown(resource)}" must be a non-empty array of operations (${OPERATIONS.join(', ')})`,
      );
    }
    // `*` is every operation: listed with others it says two things at once (the platform refuses it).
    if (ops.length > 1 && ops.includes('*')) {
      throw new ServiceError('invalidParameterValue', `capability for "${shown(resource)}" lists "*" (every operation) together with other operations; give "*" alone or list the operations`);
    }
    cap.set(resource, new Set(ops as string[]));
  }
  if (cap.size === 0) throw new ServiceError('invalidParameterValue', 'capability is empty');
  return cap;
}

/** Canonical JSON form: resources and operations sorted, as the SDKs produce it. */
export function stringifyCapability(cap: Capability): string {
  // No prototype: a resource named "__proto__" is a key like any other, not the object's prototype.
  const obj: Record<string, string[]> = Object.create(null);
  for (const resource of [...cap.keys()].sort()) obj[resource] = [...cap.get(resource)!].sort();
  return JSON.stringify(obj);
}

/**
 * Does a capability resource match a channel? (spec: Authentication rules 5 and 6)
 * `*` matches every regular channel but no metachannel; `[meta]*` every metachannel;
 * `[*]*` everything; `prefix:*` any channel starting with `prefix:`; otherwise an exact name.
 * A metachannel is reached only by `[*]*` and resources that start with `[meta]`, as on the
 * platform: `[*`, `[me*` or `[meta*` name no metachannel (as prefixes they reached them all).
 */
export function resourceMatches(resource: string, channel: string): boolean {
  if (resource === '[*]*') return true;
  if (resource === channel) return true;
  if (isMetachannel(channel) && !resource.startsWith(META_PREFIX)) return false;
  if (resource.endsWith('*')) {
    const prefix = resource.slice(0, -1);
    if (prefix === '') return !isMetachannel(channel);
    return channel.startsWith(prefix);
  }
  return false;
}

export function permits(cap: Capability, channel: string, operation: Operation): boolean {
  for (const [resource, ops] of cap) {
    if ((ops.has(operation) || ops.has('*')) && resourceMatches(resource, channel)) return true;
  }
  return false;
}

/**
 * Whether a resource covering every regular channel (`*` or `[*]*`) grants an operation: the
 * right an app-wide operation such as stats needs. A right on some channels (`x`, `ns:*`) tells
 * nothing about the whole app, whose stats count every channel.
 */
export function permitsAppWide(cap: Capability, operation: Operation): boolean {
  for (const [resource, ops] of cap) {
    if ((ops.has(operation) || ops.has('*')) && resourceCovers(resource, '*')) return true;
  }
  return false;
}

/** Does resource pattern `outer` cover every channel that pattern `inner` covers? */
export function resourceCovers(outer: string, inner: string): boolean {
  if (outer === inner || outer === '[*]*') return true;
  // What reaches metachannels (resourceMatches) is covered only by what reaches them too.
  if (inner === '[*]*' || (inner.startsWith(META_PREFIX) && !outer.startsWith(META_PREFIX))) return false;
  if (!outer.endsWith('*')) return false;
  const prefix = outer.slice(0, -1);
  if (prefix === '') return !inner.startsWith('[');
  return inner.startsWith(prefix);
}

function intersectOps(a: Set<string>, b: Set<string>): Set<string> {
  if (a.has('*')) return new Set(b);
  if (b.has('*')) return new Set(a);
  return new Set([...a].filter((op) => b.has(op)));
}

/**
 * A token's capability (issue 3): each requested resource keeps the operations that a covering
 * held resource allows; a requested wildcard wider than a held resource narrows to that one.
 */
export function intersectCapabilities(held: Capability, requested: Capability): Capability {
  const result: Capability = new Map();
  const add = (resource: string, ops: Set<string>): void => {
    if (ops.size === 0) return;
    const existing = result.get(resource);
    result.set(resource, existing ? new Set([...existing, ...ops]) : ops);
  };
  for (const [r, rOps] of requested) {
    for (const [h, hOps] of held) {
      if (resourceCovers(h, r)) add(r, intersectOps(rOps, hOps));
      else if (resourceCovers(r, h)) add(h, intersectOps(rOps, hOps));
    }
  }
  for (const [resource, ops] of result) if (ops.has('*')) result.set(resource, new Set(['*']));
  return result;
}
