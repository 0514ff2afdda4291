import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { parseConfig } from '../../src/config.js';
import { startService, embeddedAdapters, type Adapters, type Service } from '../../src/service.js';
import type { Clock } from '../../src/clock.js';

export interface TestService {
  service: Service;
  /** the default app's root key, `appId.keyId:secret` */
  key: string;
  /** Authorization header value for the root key */
  auth: string;
  dataDir: string;
  close(): Promise<void>;
  /** Restarts on the same DATA_DIR (and the same adapters' files). */
  restart(): Promise<TestService>;
}

export const basic = (key: string): string => `Basic ${Buffer.from(key).toString('base64')}`;

/**
 * A whole service on the embedded adapters in a fresh DATA_DIR (SANDBOX on), built as main.ts
 * builds it but not listening: tests use app.inject(). Close it in teardown.
 */
export async function startTestService(
  env: Record<string, string> = {},
  options: { clock?: Clock; adapters?: (dataDir: string) => Adapters; dataDir?: string; logger?: Logger } = {},
): Promise<TestService> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'cm-test-'));
  const config = parseConfig({ DATA_DIR: dataDir, SANDBOX: '1', LOG_LEVEL: 'silent', ...env });
  const adapters = options.adapters ? options.adapters(dataDir) : embeddedAdapters(config);
  const service = await startService(config, options.logger ?? pino({ level: 'silent' }), adapters, options.clock);
  const app = service.registry.all().find((a) => a.source === 'default') ?? service.registry.all()[0];
  const key = `${app.keys[0].keyName}:${app.keys[0].keySecret}`;
  const handle: TestService = {
    service,
    key,
    auth: basic(key),
    dataDir,
    close: () => service.close(),
    restart: async () => {
      await service.close();
      return startTestService(env, { ...options, dataDir });
    },
  };
  return handle;
}

/** Listens on a free loopback port (realtime tests need a real socket); returns the port. */
export async function listening(ts: TestService): Promise<number> {
  await ts.service.app.listen({ port: 0, host: '127.0.0.1' });
  return (ts.service.app.server.address() as AddressInfo).port;
}

export const removeDir = (dir: string): void => rmSync(dir, { recursive: true, force: true });

/** A channel name no other test uses. */
export const uniqueChannel = (prefix = 'test'): string => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
