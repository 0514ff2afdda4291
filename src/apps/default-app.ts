import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { ensureDir } from '../startup.js';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ALL_RIGHTS, DEFAULT_KEY_CAPABILITY, keyString, type AppDefinition } from '../domain/app.js';

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

/** The default app's file in DATA_DIR. */
export const defaultAppFile = (dataDir: string): string => join(dataDir, 'default-app.json');

/**
 * With no APPS_FILE, the first start creates one app with a root key and keeps it in DATA_DIR,
 * so a newcomer can publish right away. The root key has every right ({"[*]*":["*"]}), can revoke
 * the tokens it issues (revocableTokens) and can manage the app's keys (management). The file
 * also gives the key as one `name:secret` string (`key`), the form curl -u and the SDKs take.
 * A file written before those existed gets them at its next start. Returns the app and whether it
 * was just created.
 */
export function loadOrCreateDefaultApp(dataDir: string, now: number): { app: AppDefinition; created: boolean } {
  const found = loadDefaultApp(dataDir);
  if (found) return { app: found, created: false };
  ensureDir(dataDir);
  const app = newApp({ source: 'default', keys: [{ capability: ALL_RIGHTS, revocableTokens: true }], now });
  app.keys[0].management = true;
  app.namespaces = [{ id: 'persisted', persisted: true }];
  writeDefaultApp(dataDir, app);
  return { app, created: true };
}

/** The default app DATA_DIR holds, if any; `upgrade`: its file brought up to date (see loadOrCreateDefaultApp). */
export function loadDefaultApp(dataDir: string, { upgrade = true }: { upgrade?: boolean } = {}): AppDefinition | undefined {
  const file = defaultAppFile(dataDir);
  if (!existsSync(file)) return undefined;
  const { key: _key, ...app } = JSON.parse(readFileSync(file, 'utf8')) as AppDefinition & { key?: string };
  const root = app.keys[0];
  if (upgrade && root && (!root.revocableTokens || !root.management || _key !== keyString(root))) {
    root.revocableTokens = true;
    root.management = true;
    writeDefaultApp(dataDir, app);
  }
  return app;
}

function writeDefaultApp(dataDir: string, app: AppDefinition): void {
  const file = defaultAppFile(dataDir);
  // `key` first: the line a person looks for.
  writeFileSync(`${file}.tmp`, JSON.stringify({ key: keyString(app.keys[0]), ...app }, null, 2), { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}
