import { createHmac, randomBytes } from 'node:crypto';
import { secretsEqual } from '../auth/authenticate.js';

// A connection key names a connection and proves it was issued to the app's key: `<id>!<mac>`,
// the mac an HMAC of the app and connection id under the key's secret. Any instance that knows the
// key can check it with no shared state, so a connection resumes on whichever instance the client
// reaches (REALTIME-PROTOCOL.md §6.2).

/** Connection ids: base64url, never `:` (the SDK splits `connId:msgSerial:index` ids on it). */
export const newConnectionId = (): string => randomBytes(9).toString('base64url');

const macOf = (secret: string, appId: string, connectionId: string): string =>
  createHmac('sha256', secret).update(`connection\n${appId}\n${connectionId}`).digest('base64url').slice(0, 22);

export const connectionKeyFor = (secret: string, appId: string, connectionId: string): string => `${connectionId}!${macOf(secret, appId, connectionId)}`;

/** The connection id a key names, when its mac checks out under `secret`. */
export function verifyConnectionKey(key: string, secret: string, appId: string): string | undefined {
  const bang = key.indexOf('!');
  if (bang <= 0) return undefined;
  const id = key.slice(0, bang);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return undefined;
  return secretsEqual(key.slice(bang + 1), macOf(secret, appId, id)) ? id : undefined;
}

/** The connection id part of a key, unchecked (for looking it up). */
export const connectionIdOf = (key: string): string => key.slice(0, Math.max(0, key.indexOf('!')));
