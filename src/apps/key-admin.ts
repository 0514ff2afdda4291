import { randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.js';
import type { Limits } from '../limits.js';
import type { Clock } from '../clock.js';
import type { KeyEvent, RuleEvent } from '../domain/events.js';
import { MAX_RULES_PER_APP, parseRule, type WebhookRule } from '../webhooks/rules.js';
import type { AppRegistry } from '../../projections/apps/app-registry.js';
import { parseCapability, stringifyCapability } from '../auth/capability.js';
import { DEFAULT_KEY_CAPABILITY, keyString, type AppDefinition, type KeyDefinition } from '../domain/app.js';
import { randomId } from './default-app.js';

/** What a key management request may set (create: all optional; update: at least one). */
export interface KeyChanges {
  capability?: string;
  name?: string;
  revocableTokens?: boolean;
  management?: boolean;
}

export type KeyLimits = Pick<Limits, 'maxKeysPerApp' | 'maxKeyCapabilityBytes' | 'maxKeyNameLength'>;

const FIELDS = ['capability', 'name', 'revocableTokens', 'management'];
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads a create or update body; every refusal names the field (40001 / 40003). */
export function parseKeyChanges(body: unknown, limits: KeyLimits, { update }: { update: boolean }): KeyChanges {
  if (body === undefined && !update) return {};
  if (!isObject(body)) throw new ServiceError('invalidRequestBody', `the body must be a JSON object with any of ${FIELDS.join(', ')}`);
  const unknown = Object.keys(body).filter((f) => !FIELDS.includes(f));
  if (unknown.length > 0) throw new ServiceError('invalidRequestBody', `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((f) => `"${f.slice(0, 64)}"`).join(', ')}; a key has ${FIELDS.join(', ')}`);
  const changes: KeyChanges = {};
  if (body.capability !== undefined) {
    const text = typeof body.capability === 'string' ? body.capability : JSON.stringify(body.capability);
    if (Buffer.byteLength(text) > limits.maxKeyCapabilityBytes) {
      throw new ServiceError('invalidParameterValue', `capability is ${Buffer.byteLength(text)} bytes of JSON; the maximum is ${limits.maxKeyCapabilityBytes}`);
    }
    changes.capability = stringifyCapability(parseCapability(body.capability));
  }
  if (body.name !== undefined) {
    if (typeof body.name !== 'string' || body.name.length > limits.maxKeyNameLength) {
      throw new ServiceError('invalidParameterValue', `name must be a string of at most ${limits.maxKeyNameLength} characters`);
    }
    changes.name = body.name;
  }
  for (const flag of ['revocableTokens', 'management'] as const) {
    if (body[flag] === undefined) continue;
    if (typeof body[flag] !== 'boolean') throw new ServiceError('invalidParameterValue', `${flag} must be true or false`);
    changes[flag] = body[flag];
  }
  if (update && Object.keys(changes).length === 0) throw new ServiceError('invalidRequestBody', `give at least one of ${FIELDS.join(', ')} to change`);
  return changes;
}

/**
 * A key as key management shows it, in the shape of the platform's Control API key (`status` 0
 * enabled, 1 revoked; the capability as an object). The secret (`key`, `name:secret`) only when
 * the key is made: a list never carries it.
 */
export function keyView(appId: string, key: KeyDefinition, withSecret = false): Record<string, unknown> {
  return {
    appId,
    id: key.keyName.slice(key.keyName.indexOf('.') + 1),
    keyName: key.keyName,
    name: key.name ?? '',
    status: key.revoked ? 1 : 0,
    capability: JSON.parse(key.capability) as unknown,
    revocableTokens: key.revocableTokens === true,
    management: key.management === true,
    created: key.created ?? null,
    modified: key.modified ?? key.created ?? null,
    ...(withSecret ? { key: keyString(key) } : {}),
  };
}

/**
 * Key management: checks a change against the keys the registry holds, then hands its event to
 * `append`, which resolves once the event is durable and applied to `registry` (the service: on
 * the log and applied by its apps consumer; the offline CLI: on the log and applied directly).
 */
export class KeyAdmin {
  /**
   * Each app's changes in progress, one after another: each is checked against the keys as the
   * ones before it left them. Checked all at once, two management keys revoking each other left the
   * app with none, and creations racing passed MAX_KEYS_PER_APP. (Per instance: changes made
   * through two instances at once are each checked here against what this one has applied.)
   */
  private readonly inProgress = new Map<string, Promise<unknown>>();

  constructor(
    private readonly deps: {
      registry: AppRegistry;
      append: (event: KeyEvent | RuleEvent) => Promise<void>;
      clock: Clock;
      limits: KeyLimits;
    },
  ) {}

  app(appId: string): AppDefinition {
    const app = this.deps.registry.app(appId);
    if (!app) throw new ServiceError('notFound', `no app "${appId}" on this service`);
    return app;
  }

  list(appId: string): KeyDefinition[] {
    return this.app(appId).keys;
  }

  /** A key of the app by its id (`keyId`) or its whole name (`appId.keyId`). */
  key(appId: string, keyId: string): KeyDefinition {
    const keyName = keyId.startsWith(`${appId}.`) ? keyId : `${appId}.${keyId}`;
    const key = this.app(appId).keys.find((k) => k.keyName === keyName);
    if (!key) throw new ServiceError('notFound', `app "${appId}" has no key "${keyName}"`);
    return key;
  }

  create(appId: string, changes: KeyChanges): Promise<KeyDefinition> {
    return this.inTurn(appId, async () => {
      const app = this.app(appId);
      const { maxKeysPerApp } = this.deps.limits;
      if (app.keys.length >= maxKeysPerApp) {
        const revoked = app.keys.filter((k) => k.revoked).length;
        throw new ServiceError('keyLimitExceeded', `app "${appId}" holds ${app.keys.length} keys (${revoked} of them revoked, which count: they are kept), its maximum (MAX_KEYS_PER_APP=${maxKeysPerApp}); no key was made`);
      }
      const now = this.deps.clock.now();
      const key: KeyDefinition = {
        keyName: `${appId}.${randomId(6)}`,
        keySecret: randomBytes(24).toString('base64url'),
        capability: changes.capability ?? DEFAULT_KEY_CAPABILITY,
        ...(changes.name !== undefined ? { name: changes.name } : {}),
        ...(changes.revocableTokens ? { revocableTokens: true } : {}),
        ...(changes.management ? { management: true } : {}),
        created: now,
        modified: now,
      };
      await this.deps.append({ type: 'key.created', appId, key });
      return this.key(appId, key.keyName);
    });
  }

  /** Changes what differs; a change that changes nothing appends nothing. */
  update(appId: string, keyId: string, changes: KeyChanges): Promise<KeyDefinition> {
    return this.inTurn(appId, async () => {
      const key = this.key(appId, keyId);
      if (key.revoked) throw new ServiceError('invalidParameterValue', `key "${key.keyName}" is revoked, and a revocation is for good; make a new key`);
      const differs: KeyChanges = {};
      if (changes.capability !== undefined && changes.capability !== key.capability) differs.capability = changes.capability;
      if (changes.name !== undefined && changes.name !== (key.name ?? '')) differs.name = changes.name;
      if (changes.revocableTokens !== undefined && changes.revocableTokens !== (key.revocableTokens === true)) differs.revocableTokens = changes.revocableTokens;
      if (changes.management !== undefined && changes.management !== (key.management === true)) differs.management = changes.management;
      if (Object.keys(differs).length === 0) return key;
      if (differs.management === false) this.keepAManager(appId, key, 'take the management right from');
      await this.deps.append({ type: 'key.updated', appId, keyName: key.keyName, ...differs, modified: this.deps.clock.now() });
      return this.key(appId, key.keyName);
    });
  }

  /** Revokes for good; revoking a revoked key appends nothing. */
  revoke(appId: string, keyId: string): Promise<KeyDefinition> {
    return this.inTurn(appId, async () => {
      const key = this.key(appId, keyId);
      if (key.revoked) return key;
      this.keepAManager(appId, key, 'revoke');
      await this.deps.append({ type: 'key.revoked', appId, keyName: key.keyName, modified: this.deps.clock.now() });
      return this.key(appId, key.keyName);
    });
  }

  /** The app's webhook rules (src/webhooks/rules.ts). */
  rules(appId: string): WebhookRule[] {
    return this.app(appId).rules ?? [];
  }

  /** Adds a rule (the platform's rule JSON); one with the id of a rule the app has replaces it. */
  addRule(appId: string, body: unknown): Promise<WebhookRule> {
    return this.inTurn(appId, async () => {
      let rule: WebhookRule;
      try {
        rule = parseRule(body);
      } catch (err) {
        throw new ServiceError('invalidRequestBody', (err as Error).message);
      }
      const held = this.rules(appId);
      if (!held.some((r) => r.id === rule.id) && held.length >= MAX_RULES_PER_APP) {
        throw new ServiceError('invalidParameterValue', `app "${appId}" has ${held.length} webhook rules, the most it may have; remove one first`);
      }
      if (rule.target.signingKeyId !== undefined) this.key(appId, rule.target.signingKeyId);
      await this.deps.append({ type: 'rule.created', appId, rule });
      return rule;
    });
  }

  removeRule(appId: string, ruleId: string): Promise<void> {
    return this.inTurn(appId, async () => {
      if (!this.rules(appId).some((r) => r.id === ruleId)) throw new ServiceError('notFound', `app "${appId}" has no webhook rule "${ruleId}"`);
      await this.deps.append({ type: 'rule.deleted', appId, ruleId });
    });
  }

  private inTurn<T>(appId: string, change: () => Promise<T>): Promise<T> {
    const before = this.inProgress.get(appId) ?? Promise.resolve();
    const mine = before.then(change, change);
    const settled = mine.catch(() => undefined);
    this.inProgress.set(appId, settled);
    void settled.then(() => {
      if (this.inProgress.get(appId) === settled) this.inProgress.delete(appId);
    });
    return mine;
  }

  /** The last key that may manage an app's keys stays: without it only the offline CLI could. */
  private keepAManager(appId: string, key: KeyDefinition, what: string): void {
    if (!key.management) return;
    if (this.app(appId).keys.some((k) => k !== key && k.management && !k.revoked)) return;
    throw new ServiceError('invalidParameterValue', `cannot ${what} "${key.keyName}": it is the last key of app "${appId}" with the management right; make another management key first`);
  }
}
