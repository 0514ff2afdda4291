// The real service in a child process (service-server.ts) with a fresh DATA_DIR, an APPS_FILE
// that holds one known key and a persisted namespace, and, in production mode, Kafka topics and
// ClickHouse tables of its own.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type ChildServer } from './servers.js';
import { dropTables } from './production-env.js';

export const PERSISTED_NAMESPACE = 'persisted';

export interface ServiceChild {
  server: ChildServer;
  /** Authorization header value for the app's key */
  auth: string;
  /** the app's key, `appId.keyId:secret` (the realtime bench passes it as `key=` on the WebSocket URL) */
  key: string;
  /** Authorization header value for the key of an app of `ServiceChildOptions.apps` (or `bench`). */
  authOf(appId: string): string;
  /** Stops the child and removes its DATA_DIR and ClickHouse tables. */
  stop(): Promise<void>;
}

export interface ServiceChildOptions {
  /** Apps besides `bench` in the APPS_FILE, a key each. */
  apps?: string[];
  /** Runs before the child starts, with its DATA_DIR and its ClickHouse table prefix (to seed its stores). */
  beforeStart?: (dataDir: string, tablePrefix: string) => Promise<void>;
}

export async function startServiceChild(name: string, modeEnv: Record<string, string>, nodeArgs: string[] = [], options: ServiceChildOptions = {}): Promise<ServiceChild> {
  const dir = mkdtempSync(join(tmpdir(), 'cm-bench-'));
  const keys = new Map(['bench', ...(options.apps ?? [])].map((appId) => [appId, `${appId}.k1:${randomBytes(12).toString('base64url')}`]));
  const key = keys.get('bench')!;
  const appsFile = join(dir, 'apps.json');
  writeFileSync(
    appsFile,
    JSON.stringify({ apps: [...keys].map(([appId, k]) => ({ appId, keys: [{ key: k }], namespaces: [{ id: PERSISTED_NAMESPACE, persisted: true }] })) }),
  );
  const prefix = `bench_${randomBytes(4).toString('hex')}_`;
  const cleanUp = async (): Promise<void> => {
    rmSync(dir, { recursive: true, force: true });
    if (!modeEnv.CLICKHOUSE_URL) return;
    await dropTables(modeEnv.CLICKHOUSE_URL, prefix).catch((err: Error) => console.log(`[bench] could not drop ${prefix}* tables: ${err.message}`));
  };
  let server: ChildServer;
  try {
    mkdirSync(join(dir, 'data'));
    await options.beforeStart?.(join(dir, 'data'), prefix);
    server = await startServer({
      name,
      entry: 'test/bench/service-server.ts',
      env: { DATA_DIR: join(dir, 'data'), APPS_FILE: appsFile, LOG_LEVEL: 'warn', BENCH_RUN_PREFIX: prefix, ...modeEnv },
      readyPath: '/time',
      nodeArgs,
    });
  } catch (err) {
    await cleanUp();
    throw err;
  }
  return {
    server,
    auth: `Basic ${Buffer.from(key).toString('base64')}`,
    key,
    authOf: (appId) => `Basic ${Buffer.from(keys.get(appId)!).toString('base64')}`,
    stop: async () => {
      await server.stop();
      await cleanUp();
    },
  };
}
