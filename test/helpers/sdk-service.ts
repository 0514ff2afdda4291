// One service for a file of SDK tests (test/sdk): started in the file's beforeAll, its clients
// closed after each test, the service closed and its data directory removed after the file.
import { afterAll, afterEach, beforeAll } from 'vitest';
import { Clients } from './realtime.js';
import { listening, removeDir, startTestService, type TestService } from './service.js';

export interface SdkService {
  readonly ts: TestService;
  readonly port: number;
  /** the file's realtime clients, closed after each test */
  readonly clients: Clients;
}

export function sdkService(env: Record<string, string> = {}): SdkService {
  let ts: TestService;
  let port: number;
  const clients = new Clients();
  beforeAll(async () => {
    ts = await startTestService(env);
    port = await listening(ts);
  });
  afterEach(() => clients.closeAll());
  afterAll(async () => {
    await clients.closeAll();
    await ts?.close();
    if (ts) removeDir(ts.dataDir);
  });
  return {
    get ts() {
      return ts;
    },
    get port() {
      return port;
    },
    clients,
  };
}
