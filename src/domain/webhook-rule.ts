// A webhook rule as the apps' configuration and the apps topic carry it (the rules' parsing and
// checks: src/webhooks/rules.ts).

/**
 * An integration rule in the platform's shape (its Control API `/apps/<appId>/rules`), so rule JSON
 * written for it works here: `ruleType` "http", `requestMode` single or batch, a `source` (what is
 * sent: messages, presence, channel lifecycle or occupancy, of channels matching `channelFilter`) and a
 * `target` (where, signed with which key).
 */
export interface WebhookRule {
  /** Given by the service when absent (6 characters of base64url), as the platform does. */
  id: string;
  ruleType: 'http';
  requestMode: 'single' | 'batch';
  source: { type: WebhookSourceType; channelFilter: string };
  target: {
    url: string;
    /** The key (`appId.keyId`, or its keyId) whose secret signs each request; none: unsigned. */
    signingKeyId?: string;
    headers?: { name: string; value: string }[];
    enveloped: boolean;
    /** The body's encoding: JSON, or MessagePack (Content-Type application/x-msgpack; binary data stays binary). */
    format: 'json' | 'msgpack';
  };
}

export const SOURCE_TYPES = ['channel.message', 'channel.presence', 'channel.lifecycle', 'channel.occupancy'] as const;
export type WebhookSourceType = (typeof SOURCE_TYPES)[number];
