import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The platform's webhook signature: `X-Ably-Key` names the signing key (`appId.keyId`) and
 * `X-Ably-Signature` is the base64 HMAC-SHA256 of the request body under that key's secret, so a
 * handler written for the platform verifies these requests unchanged.
 */
export const KEY_HEADER = 'x-ably-key';
export const SIGNATURE_HEADER = 'x-ably-signature';

export const signBody = (body: string | Uint8Array, secret: string): string => createHmac('sha256', secret).update(body).digest('base64');

/** What a receiver does: the signature of the body it read under the secret of the key named. */
export function verifySignature(body: string | Uint8Array, secret: string, signature: string | undefined): boolean {
  if (typeof signature !== 'string') return false;
  const expected = Buffer.from(signBody(body, secret));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
