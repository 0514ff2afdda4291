import { readFileSync } from 'node:fs';
import { DEFAULT_KEY_CAPABILITY, type AppDefinition, type KeyDefinition, type NamespaceRule } from '../domain/app.js';
import { parseCapability, stringifyCapability } from '../auth/capability.js';
import { fileRuleId, MAX_RULES_PER_APP, parseRule } from '../webhooks/rules.js';

/**
 * Reads APPS_FILE:
 * { "apps": [ { "appId": "myapp", "keys": [ { "key": "myapp.k1:secret", "capability": {"*":["*"]}, "revocableTokens": true, "management": true, "name": "ops" } ],
 *               "namespaces": [ { "id": "persisted", "persisted": true, "retentionHours": 48 } ],
 *               "rules": [ { "ruleType": "http", "requestMode": "batch", "source": { "type": "channel.message", "channelFilter": "^orders" },
 *                            "target": { "url": "https://example.com/hook", "signingKeyId": "myapp.k1", "enveloped": true, "format": "json" } } ] } ] }
 * Errors name the file and what to fix.
 */
export function loadAppsFile(path: string, now: number): AppDefinition[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`APPS_FILE ${path}: cannot read it as JSON (${(err as Error).message})`);
  }
  const apps = (parsed as { apps?: unknown }).apps;
  if (!Array.isArray(apps) || apps.length === 0) throw new Error(`APPS_FILE ${path}: expected {"apps": [ ... ]} with at least one app`);
  const seen = new Map<string, number>();
  return apps.map((raw, i) => {
    const where = `APPS_FILE ${path}: apps[${i}]`;
    const app = raw as { appId?: unknown; keys?: unknown; namespaces?: unknown; accountId?: unknown; rules?: unknown };
    if (typeof app.appId !== 'string' || !/^[A-Za-z0-9_-]+$/.test(app.appId)) {
      throw new Error(`${where}.appId must be letters, digits, "_" or "-"`);
    }
    const appId = app.appId;
    // A second app of one id replaced the first whole (its keys stopped working), without a word.
    if (seen.has(appId)) throw new Error(`${where}.appId "${appId}" is apps[${seen.get(appId)}]'s too: give each app once`);
    seen.set(appId, i);
    if (!Array.isArray(app.keys) || app.keys.length === 0) throw new Error(`${where}.keys must list at least one key`);
    const keys: KeyDefinition[] = app.keys.map((k: { key?: unknown; capability?: unknown; revocableTokens?: unknown; management?: unknown; name?: unknown }, j: number) => {
      const m = typeof k.key === 'string' ? /^([^.:]+)\.([^.:]+):(.+)$/.exec(k.key) : null;
      if (!m || m[1] !== appId) throw new Error(`${where}.keys[${j}].key must look like "${appId}.<keyId>:<secret>"`);
      let capability = DEFAULT_KEY_CAPABILITY;
      if (k.capability !== undefined) {
        try {
          capability = stringifyCapability(parseCapability(k.capability));
        } catch (err) {
          throw new Error(`${where}.keys[${j}].capability: ${(err as Error).message}`);
        }
      }
      if (k.revocableTokens !== undefined && typeof k.revocableTokens !== 'boolean') throw new Error(`${where}.keys[${j}].revocableTokens must be true or false`);
      if (k.management !== undefined && typeof k.management !== 'boolean') throw new Error(`${where}.keys[${j}].management must be true or false`);
      if (k.name !== undefined && typeof k.name !== 'string') throw new Error(`${where}.keys[${j}].name must be a string`);
      return {
        keyName: `${m[1]}.${m[2]}`,
        keySecret: m[3],
        capability,
        ...(k.revocableTokens === true ? { revocableTokens: true } : {}),
        ...(k.management === true ? { management: true } : {}),
        ...(typeof k.name === 'string' ? { name: k.name } : {}),
      };
    });
    // One key name twice: the last secret authenticated, key management showed and changed the first.
    for (const [j, key] of keys.entries()) {
      const first = keys.findIndex((k) => k.keyName === key.keyName);
      if (first !== j) throw new Error(`${where}.keys[${j}]: key "${key.keyName}" is keys[${first}]'s too: give each key once`);
    }
    const namespaces = (Array.isArray(app.namespaces) ? app.namespaces : []) as NamespaceRule[];
    for (const [j, ns] of namespaces.entries()) {
      if (typeof ns.id !== 'string' || ns.id.length === 0) throw new Error(`${where}.namespaces[${j}].id must be a non-empty string`);
      if (ns.retentionHours !== undefined && !(Number.isInteger(ns.retentionHours) && ns.retentionHours >= 24 && ns.retentionHours <= 72)) {
        throw new Error(`${where}.namespaces[${j}].retentionHours must be a whole number from 24 to 72`);
      }
    }
    if (app.rules !== undefined && (!Array.isArray(app.rules) || app.rules.length > MAX_RULES_PER_APP)) throw new Error(`${where}.rules must be a list of at most ${MAX_RULES_PER_APP} webhook rules`);
    const rules = ((app.rules ?? []) as unknown[]).map((r, j) => parseRule(r, `${where}.rules[${j}]`, (rule) => fileRuleId(appId, rule)));
    if (new Set(rules.map((r) => r.id)).size < rules.length) throw new Error(`${where}.rules: two rules have the same id (or are the same rule twice)`);
    return {
      appId,
      ...(rules.length > 0 ? { rules } : {}),
      accountId: typeof app.accountId === 'string' ? app.accountId : appId,
      keys,
      namespaces,
      source: 'file',
      createdAt: now,
    } satisfies AppDefinition;
  });
}
