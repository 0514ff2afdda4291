/** Webhook delivery's bounds (README: Webhooks), each with its environment variable and default. */
export interface WebhookSettings {
  /** Targets on loopback, private, link-local or unique-local addresses are refused unless set. WEBHOOKS_ALLOW_PRIVATE_TARGETS */
  allowPrivateTargets: boolean;
  /** Requests in flight to one target at once. WEBHOOK_MAX_IN_FLIGHT */
  maxInFlight: number;
  /** A request not answered within this fails (and is retried). WEBHOOK_TIMEOUT_MS */
  requestTimeoutMs: number;
  /** Items per request of a batch rule. WEBHOOK_BATCH_SIZE */
  batchSize: number;
  /** A request body's most bytes: a batch is cut before it; a single item over it is sent alone. WEBHOOK_MAX_BODY_BYTES */
  maxBodyBytes: number;
  /** The first retry's pause, doubled at each failure up to retryMaxMs. WEBHOOK_RETRY_MS */
  retryMs: number;
  /** The longest pause between retries, a paused target's too. WEBHOOK_RETRY_MAX_MS */
  retryMaxMs: number;
  /** Failures in a row after which a target is reported paused (it is retried every retryMaxMs). WEBHOOK_PAUSE_AFTER_FAILURES */
  pauseAfterFailures: number;
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  allowPrivateTargets: false,
  maxInFlight: 4,
  requestTimeoutMs: 10_000,
  batchSize: 100,
  maxBodyBytes: 1024 * 1024,
  retryMs: 500,
  retryMaxMs: 30_000,
  pauseAfterFailures: 5,
};

type Env = Record<string, string | undefined>;

/** Reads the settings; `fail` throws the configuration's error naming the variable. */
export function parseWebhookSettings(env: Env, fail: (message: string) => never): WebhookSettings {
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) fail(`${name}="${raw}" must be a whole number from ${min} to ${max}`);
    return n;
  };
  const flag = env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
  if (flag !== undefined && !['', '0', '1', 'true', 'false'].includes(flag)) fail(`WEBHOOKS_ALLOW_PRIVATE_TARGETS="${flag}" must be 1 or 0`);
  const d = DEFAULT_WEBHOOK_SETTINGS;
  const settings = {
    allowPrivateTargets: flag === '1' || flag === 'true',
    maxInFlight: int('WEBHOOK_MAX_IN_FLIGHT', d.maxInFlight, 1, 64),
    requestTimeoutMs: int('WEBHOOK_TIMEOUT_MS', d.requestTimeoutMs, 100, 120_000),
    batchSize: int('WEBHOOK_BATCH_SIZE', d.batchSize, 1, 1000),
    maxBodyBytes: int('WEBHOOK_MAX_BODY_BYTES', d.maxBodyBytes, 1024, 16 * 1024 * 1024),
    retryMs: int('WEBHOOK_RETRY_MS', d.retryMs, 10, 60_000),
    retryMaxMs: int('WEBHOOK_RETRY_MAX_MS', d.retryMaxMs, 10, 600_000),
    pauseAfterFailures: int('WEBHOOK_PAUSE_AFTER_FAILURES', d.pauseAfterFailures, 1, 1000),
  };
  if (settings.retryMaxMs < settings.retryMs) fail(`WEBHOOK_RETRY_MAX_MS (${settings.retryMaxMs}) must be at least WEBHOOK_RETRY_MS (${settings.retryMs})`);
  return settings;
}
