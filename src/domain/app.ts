import type { WebhookRule } from './webhook-rule.js';

/** An application: its keys and its channel rules. Stored as events on the `apps` topic. */
export interface AppDefinition {
  appId: string;
  accountId: string;
  keys: KeyDefinition[];
  namespaces: NamespaceRule[];
  /** Webhook rules (src/webhooks/rules.ts): APPS_FILE's, then those added and removed on the apps topic. */
  rules?: WebhookRule[];
  /** Where the app came from: the apps file, the generated default, or the sandbox route. */
  source: 'file' | 'default' | 'sandbox';
  createdAt: number;
}

export interface KeyDefinition {
  /** `appId.keyId` */
  keyName: string;
  keySecret: string;
  /** JSON string, as the spec's token details carry it. */
  capability: string;
  revoked?: boolean;
  /**
   * Tokens this key issues can be revoked (POST /keys/<keyName>/revokeTokens), as the platform's
   * key attribute of that name; fixed when the key is made.
   */
  revocableTokens?: boolean;
  /**
   * The key may manage its app's keys (create, list, change, revoke: /apps/<appId>/keys). A key
   * attribute, like revocableTokens, rather than a capability operation: capabilities travel in
   * tokens and to the SDKs, and no token may manage keys. The default app's root key has it.
   */
  management?: boolean;
  /** A label for people (the key management route and CLI); at most MAX_KEY_NAME_LENGTH characters. */
  name?: string;
  /** When the key was made or last changed through key management (ms since the epoch). */
  created?: number;
  modified?: number;
}

export interface NamespaceRule {
  id: string;
  persisted?: boolean;
  /** History retention of persisted channels, 24 to 72 hours. */
  retentionHours?: number;
  [flag: string]: unknown;
}

/**
 * All operations on every channel, metachannels included (publish and presence there stay
 * impossible): the default app's root key, the operator's own.
 */
export const ALL_RIGHTS = '{"[*]*":["*"]}';

/**
 * A key given no capability (APPS_FILE, sandbox POST /apps): every operation on every regular
 * channel, as the platform gives it and the SDKs' tests of token capabilities expect. `*` does not
 * reach metachannels (spec: Authentication, rule 6); a key that needs them says `[meta]*` or `[*]*`.
 */
export const DEFAULT_KEY_CAPABILITY = '{"*":["*"]}';

export const keyString = (key: KeyDefinition): string => `${key.keyName}:${key.keySecret}`;
