import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { ensureDir } from '../startup.js';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ALL_RIGHTS, DEFAULT_KEY_CAPABILITY, type AppDefinition } from './app.js';

export const randomId = (bytes: number): string => randomBytes(bytes).toString('base64url').replace(/[-_]/g, 'x');

/** A new app with one key per key spec (sandbox and default app share this). */
export function newApp(options: {
  source: AppDefinition['source'];
  keys: { capability?: string; revocableTokens?: boolean }[];
  namespaces?: AppDefinition['namespaces'];
  now: number;
}): AppDefinition {
  const appId = randomId(6);
  return {
    appId,
    accountId: randomId(6),
    keys: options.keys.map(({ capability, revocableTokens }) => ({
      keyName: `${appId}.${randomId(6)}`,
      keySecret: randomBytes(24).toString('base64url'),
      capability: capability ?? DEFAULT_KEY_CAPABILITY,
      ...(revocableTokens ? { revocableTokens: true } : {}),
    })),
    namespaces: options.namespaces ?? [],
    source: options.source,
    createdAt: options.now,
  };
}

/**
 * With no APPS_FILE, the first start creates one app with a root key and keeps it in DATA_DIR,
 * so a newcomer can publish right away. Returns the app and whether it was just created.
 */
export function loadOrCreateDefaultApp(dataDir: string, now: number): { app: AppDefinition; created: boolean } {
  const file = join(dataDir, 'default-app.json');
  if (existsSync(file)) return { app: JSON.parse(readFileSync(file, 'utf8')) as AppDefinition, created: false };
  ensureDir(dataDir);
  const app = newApp({ source: 'default', keys: [{ capability: ALL_RIGHTS }], now });
  app.namespaces = [{ id: 'persisted', persisted: true }];
  writeFileSync(`${file}.tmp`, JSON.stringify(app, null, 2), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  return { app, created: true };
}
