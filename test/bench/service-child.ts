// The real service in a child process: src/main.ts, the composition root, with a fresh DATA_DIR
// and an APPS_FILE that holds one known key and a persisted namespace.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type ChildServer } from './servers.js';

export const PERSISTED_NAMESPACE = 'persisted';

export interface ServiceChild {
  server: ChildServer;
  /** Authorization header value for the app's key */
  auth: string;
  /** Stops the child and removes its DATA_DIR. */
  stop(): Promise<void>;
}

export async function startServiceChild(name: string, modeEnv: Record<string, string>, nodeArgs: string[] = []): Promise<ServiceChild> {
  const dir = mkdtempSync(join(tmpdir(), 'cm-bench-'));
  const key = `bench.k1:${randomBytes(12).toString('base64url')}`;
  const appsFile = join(dir, 'apps.json');
  writeFileSync(
    appsFile,
    JSON.stringify({ apps: [{ appId: 'bench', keys: [{ key }], namespaces: [{ id: PERSISTED_NAMESPACE, persisted: true }] }] }),
  );
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true });
  let server: ChildServer;
  try {
    server = await startServer({
      name,
      entry: 'src/main.ts',
      env: { DATA_DIR: join(dir, 'data'), APPS_FILE: appsFile, LOG_LEVEL: 'warn', ...modeEnv },
      readyPath: '/time',
      nodeArgs,
    });
  } catch (err) {
    removeDir();
    throw err;
  }
  return {
    server,
    auth: `Basic ${Buffer.from(key).toString('base64')}`,
    stop: async () => {
      await server.stop();
      removeDir();
    },
  };
}
