// One embedded service for a file of raw-frame realtime tests (test/realtime): tokens of a
// capability for a clientId, raw clients closed after the file, its key's Basic auth, and the
// clientIds present on a channel. Started in the file's beforeAll, closed in its afterAll.
import { afterAll, beforeAll, expect } from 'vitest';
import { RawClient } from './raw-realtime.js';
import { listening, removeDir, startTestService, type TestService } from './service.js';

export interface RawRealtimeService {
  /** the service now (restart() replaces it) */
  readonly ts: TestService;
  readonly port: number;
  /** the Authorization header of the app's key */
  auth(): Record<string, string>;
  /** a token (requestToken) for `clientId` (none: anonymous) with this capability, of the app's key or of `key` (`keyName:secret`) */
  token(capability: Record<string, string[]>, clientId: string | undefined, key?: string): Promise<string>;
  /** a new app (sandbox POST /apps) with `keys` keys: their `keyName:secret` */
  newApp(keys?: number): Promise<string[]>;
  /** a raw client on these query parameters, closed after the file */
  connect(query: Record<string, string>): Promise<RawClient>;
  /** the clientIds present on a channel (REST) */
  presentOn(channel: string): Promise<string[]>;
  /** the service restarted on its data directory */
  restart(): Promise<void>;
}

/** `env`: the service's configuration beyond the test defaults (a limit the file tests). */
export function rawRealtimeService(env: Record<string, string> = {}): RawRealtimeService {
  let ts: TestService;
  let port: number;
  const clients: RawClient[] = [];
  beforeAll(async () => {
    ts = await startTestService(env);
    port = await listening(ts);
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await ts?.close();
    if (ts) removeDir(ts.dataDir);
  });
  const auth = (): Record<string, string> => ({ authorization: `Basic ${Buffer.from(ts.key).toString('base64')}` });
  return {
    get ts() {
      return ts;
    },
    get port() {
      return port;
    },
    auth,
    async token(capability, clientId, key = ts.key) {
      const keyName = key.split(':')[0];
      const res = await fetch(`http://127.0.0.1:${port}/keys/${keyName}/requestToken`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(key).toString('base64')}`, 'content-type': 'application/json' },
        body: JSON.stringify({ keyName, clientId, capability: JSON.stringify(capability), timestamp: Date.now() }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { token: string }).token;
    },
    async newApp(keys = 1) {
      const res = await fetch(`http://127.0.0.1:${port}/apps`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys: Array.from({ length: keys }, () => ({})) }) });
      expect(res.status).toBe(201);
      return ((await res.json()) as { keys: { keyStr: string }[] }).keys.map((k) => k.keyStr);
    },
    async connect(query) {
      const c = await RawClient.connect(port, query);
      clients.push(c);
      return c;
    },
    async presentOn(channel) {
      return ((await (await fetch(`http://127.0.0.1:${port}/channels/${channel}/presence`, { headers: auth() })).json()) as { clientId: string }[]).map((m) => m.clientId);
    },
    async restart() {
      ts = await ts.restart();
      port = await listening(ts);
    },
  };
}
