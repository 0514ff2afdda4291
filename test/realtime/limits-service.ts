// The realtime limits tests' service (limits.test.ts, limits-connections.test.ts; limits-slow-reader.test.ts takes its pausable and errorOf): a listening
// service whose limits are lowered through the environment, raw clients closed after each file.
import { afterAll, beforeAll, expect } from 'vitest';
import { listening, removeDir, startTestService, type TestService } from '../helpers/service.js';
import { RawClient, type Pm } from '../helpers/raw-realtime.js';
export const LIMITS = {
  REALTIME_MAX_FRAME_BYTES: '65536',
  MAX_MESSAGE_SIZE: '4096',
  REALTIME_MAX_INBOUND_RATE: '20',
  REALTIME_MAX_INBOUND_BYTES_RATE: '262144',
  REALTIME_MAX_CHANNELS_PER_CONNECTION: '3',
  REALTIME_MAX_IDLE_INTERVAL_MS: '1000',
  REQUEST_TIMEOUT_MS: '1000',
  // The floods below would cool this file's key on this address for 30 s, and several tests after
  // them send more than a tenth of the burst at once on a new connection: each would be cut. The
  // cool-down has a service of its own below.
  REALTIME_FLOOD_COOLDOWN_MS: '0',
};

export let ts: TestService;
export let port: number;
export const clients: RawClient[] = [];

export async function connect(query: Record<string, string | undefined> = { key: ts?.key }, format: 'json' | 'msgpack' = 'json'): Promise<RawClient> {
  const c = await RawClient.connect(port, query, format);
  clients.push(c);
  return c;
}

export async function open(query: Record<string, string | undefined>, format: 'json' | 'msgpack' = 'json'): Promise<RawClient> {
  const c = await RawClient.open(port, query, format);
  clients.push(c);
  return c;
}

/** Starts the service before the calling file's tests, and closes it and its clients after them. */
export function useLimitsService(): void {
  beforeAll(async () => {
    ts = await startTestService(LIMITS);
    port = await listening(ts);
  });

  afterAll(async () => {
    for (const c of clients.splice(0)) c.close();
    await ts?.close();
    if (ts) removeDir(ts.dataDir);
  });
}

/** The client's TCP socket: paused, it reads nothing more (the kernel's buffers fill), and still writes. */
export const pausable = (c: RawClient): { pause(): void; resume(): void } => (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;

export const errorOf = (pm: Pm): { code: unknown; statusCode: unknown; message: unknown } => pm.error as { code: unknown; statusCode: unknown; message: unknown };

export async function requestToken(body: Record<string, unknown>): Promise<string> {
  const keyName = ts.key.split(':')[0];
  const res = await ts.service.app.inject({
    method: 'POST',
    url: `/keys/${keyName}/requestToken`,
    headers: { authorization: ts.auth, 'content-type': 'application/json' },
    payload: { keyName, timestamp: Date.now(), ...body },
  });
  expect(res.statusCode).toBe(200);
  return res.json().token as string;
}

export async function history(channel: string): Promise<{ name?: string; data?: unknown }[]> {
  const res = await ts.service.app.inject({ method: 'GET', url: `/channels/${channel}/messages`, headers: { authorization: ts.auth } });
  expect(res.statusCode).toBe(200);
  return res.json();
}
