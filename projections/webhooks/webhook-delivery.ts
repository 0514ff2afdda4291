// Webhook delivery, a projection of the log: each webhook rule is a consumer of the topic its
// source reads (messages, or presence), resuming from its own checkpoint (webhook-checkpoints.ts),
// that posts the items of each batch to the rule's target in log order and saves its checkpoint
// only once they were answered 2xx: at least once, in order per channel (a channel's records are
// in one partition). A rule's consumer waits on its own target only: a slow or failing target
// holds back its own rule, never another's. In production the instances share each rule's
// partitions (a consumer group per rule), so each item is delivered by one of them.
import type { Logger } from 'pino';
import type { WebhookTargetState } from '../../src/metrics/metrics.js';
import type { Checkpoint, Log, LogRecord, Topic } from '../../src/log/port.js';
import type { Follower, ProjectionRunner } from '../runner.js';
import { Topics } from '../../src/log/port.js';
import type { AppRegistry } from '../apps/app-registry.js';
import type { WebhookRule } from '../../src/webhooks/rules.js';
import type { WebhookSettings } from '../../src/webhooks/settings.js';
import { bodyOf, contentTypeOf, itemsOf, matcherOf, type RuleMatcher, type WebhookItem } from '../../src/webhooks/envelope.js';
import { KEY_HEADER, SIGNATURE_HEADER, signBody } from '../../src/webhooks/signing.js';
import { sendWebhook, type SendResult, type WebhookRequest } from '../../src/webhooks/sender.js';
import { join } from 'node:path';
import { SqliteWebhookCheckpoints, type WebhookCheckpointStore } from './webhook-checkpoints.js';
import { PresenceMembers } from './presence-members.js';


interface RunningRule {
  key: string;
  /** Its consumer's name (ruleConsumer). */
  consumer: string;
  json: string;
  matcher: RuleMatcher;
  topic: Topic;
  state: WebhookTargetState;
  /** Its consumer, run by the projection runner (its lag in GET /metrics and /ready as the others'). */
  follower?: Follower;
  /** Ends the retries' waits at stop. */
  abort: AbortController;
  inFlight: number;
  waiting: (() => void)[];
  /** Positions delivered, saved at the next flush. */
  unsaved: Checkpoint;
  /** Ids of items of batches not yet done that the target answered 2xx already: a retried batch leaves them out. */
  sent: Set<string>;
  /** No request to the target before this time (ms since epoch): the backoff after a failure. */
  retryAt: number;
  /** A presence rule's view of who is present where it reads (a re-enter is sent as an update). */
  members?: PresenceMembers;
}

/**
 * A batch not delivered yet because the target failed: the consumer applies it again after a
 * short pause (heartbeating its Kafka group meanwhile, so a long outage does not cost the rule its
 * partitions), and what the target took already is not sent again.
 */
class RetryLater extends Error {
  override name = 'RetryLater';
}

/** A rule that could not start (its checkpoint store or the log failed) is started again after this. */
const RULE_START_RETRY_MS = 2_000;

/** The longest a batch waits out the target's backoff before handing back to its consumer. */
const BACKOFF_SLICE_MS = 1_000;

export interface WebhookDeliveryOptions {
  log: Log;
  /** Runs each rule's consumer (projections/runner.ts). */
  runner: ProjectionRunner;
  logger: Logger;
  registry: AppRegistry;
  checkpoints: WebhookCheckpointStore;
  settings: WebhookSettings;
  /** Production: the instances share each rule's partitions (a consumer group named after the rule). */
  shared: boolean;
  /** How often delivered positions are saved. */
  intervalMs?: number;
  /** The HTTP sender (tests of the bounds may count requests); default: sendWebhook. */
  send?: (request: WebhookRequest, options: { timeoutMs: number; allowPrivate: boolean; signal?: AbortSignal }) => Promise<SendResult>;
}

/**
 * A target as GET /ready (which asks no credentials) names it: its scheme, host and port only. The
 * path and query often are the receiver's secret (`https://hooks.example.com/services/T0/B0/<token>`,
 * `?token=`): they were shown to anyone.
 */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'an unreadable URL';
  }
}

/** A channel's lane (FNV-1a of its name): the same lane for all its items. */
function laneOf(channel: string, lanes: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < channel.length; i++) h = Math.imul(h ^ channel.charCodeAt(i), 0x01000193);
  return (h >>> 0) % lanes;
}

/**
 * A rule's consumer: its checkpoints, its Kafka group and its lag's label. `webhook-<appId>-<ruleId>`
 * as it always was; for an app whose id holds a "-", `webhook-<appId>.<ruleId>` (ids hold no "."),
 * since app "shop"'s rule "eu-orders" and app "shop-eu"'s rule "orders" were named alike: the
 * second could not start (nor the service, at its next start) and in production they shared one
 * consumer group and checkpoint, each delivering part of the other's partitions.
 */
export const ruleConsumer = (appId: string, ruleId: string): string => (appId.includes('-') ? `webhook-${appId}.${ruleId}` : `webhook-${appId}-${ruleId}`);

/** The name a rule of an app whose id holds a "-" had before: its checkpoints are read when it has none under its own. */
const formerConsumer = (appId: string, ruleId: string): string | undefined => (appId.includes('-') ? `webhook-${appId}-${ruleId}` : undefined);

export class WebhookDelivery {
  private readonly rules = new Map<string, RunningRule>();
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private queued = false;
  private seenVersion = -1;
  private reconciling: Promise<void> = Promise.resolve();
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: WebhookDeliveryOptions) {}

  async start(): Promise<void> {
    await this.options.checkpoints.init();
    // Rules come and go with the apps topic (and the API's changes): started and stopped as the registry changes.
    this.unsubscribe = this.options.registry.onChange(() => this.schedule());
    await this.reconcile();
    this.timer = setInterval(() => {
      void this.flush().catch((err) => this.options.logger.warn({ err }, 'webhook checkpoints not saved; tried again'));
    }, this.options.intervalMs ?? 500);
    this.timer.unref();
  }

  /** One reconcile after the ones under way, however many changes came meanwhile. */
  private schedule(): void {
    if (this.queued || this.stopped) return;
    this.queued = true;
    this.reconciling = this.reconciling
      .then(() => {
        this.queued = false;
        return this.reconcile();
      })
      .catch((err) => {
        this.options.logger.error({ err }, 'webhook rules not reconciled; tried again at the next change');
        this.seenVersion = -1;
      });
  }

  /**
   * Starts and stops rules for what the registry holds now; resolves once done, so that a rule
   * added through the API delivers what is published after its answer.
   */
  reconcileNow(): Promise<void> {
    const done = this.reconciling.then(() => this.reconcile());
    // Its failure is its caller's to report; the reconciles after it still run.
    this.reconciling = done.catch(() => {
      this.seenVersion = -1;
    });
    return done;
  }

  /** Each rule's target: whether it is paused, its failures and deliveries (GET /metrics, GET /ready). */
  targets(): WebhookTargetState[] {
    return [...this.rules.values()].map((r) => ({ ...r.state, lag: r.follower?.lag() ?? 0 }));
  }

  /** GET /ready's detail: never failing the instance (it serves), naming paused targets. */
  readiness(): { name: string; ok: boolean; detail: string } {
    const paused = this.targets().filter((t) => t.paused);
    const detail = paused.length === 0
      ? `${this.rules.size} webhook rule${this.rules.size === 1 ? '' : 's'} delivering`
      : `paused: ${paused.map((t) => `${t.appId}/${t.ruleId} (${originOf(t.url)}: ${t.lastError ?? 'failing'})`).join(', ')}`;
    return { name: 'webhooks', ok: true, detail };
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.reconciling.catch(() => undefined);
    await Promise.allSettled([...this.rules.values()].map((r) => this.stopRule(r)));
    await this.flush();
    await this.options.checkpoints.close();
  }

  /** Starts the consumers of rules new (or changed) on the apps topic, stops those of rules gone. */
  private async reconcile(): Promise<void> {
    const { registry } = this.options;
    if (this.stopped || registry.version === this.seenVersion) return;
    this.seenVersion = registry.version;
    const wanted = new Map<string, { appId: string; rule: WebhookRule }>();
    for (const app of registry.all()) for (const rule of app.rules ?? []) wanted.set(`${app.appId}/${rule.id}`, { appId: app.appId, rule });
    for (const running of [...this.rules.values()]) {
      const want = wanted.get(running.key);
      if (!want || JSON.stringify(want.rule) !== running.json) {
        await this.stopRule(running);
        // Its positions saved for a rule that replaces it; the store failing, that one repeats what this one delivered since the last save (at least once).
        await this.flush().catch((err) => this.options.logger.warn({ err, rule: running.key }, 'webhook checkpoints not saved as the rule stopped'));
        this.rules.delete(running.key);
        // Removed, not replaced: a rule made later with its id delivers from its own creation on, not what was published meanwhile.
        if (!want) await this.forget(running).catch((err) => this.options.logger.warn({ err, rule: running.key }, 'webhook checkpoints of a removed rule not dropped'));
      }
    }
    for (const [key, { appId, rule }] of wanted) {
      if (this.rules.has(key)) continue;
      try {
        await this.startRule(key, appId, rule);
      } catch (err) {
        // Its checkpoint store or the log did not answer: the rule is not running (nor reported so), and is started again shortly.
        this.options.logger.error({ err, rule: key }, `webhook rule not started; tried again in ${RULE_START_RETRY_MS} ms`);
        this.seenVersion = -1;
        this.retryTimer ??= setTimeout(() => {
          this.retryTimer = undefined;
          this.schedule();
        }, RULE_START_RETRY_MS);
        this.retryTimer.unref();
      }
    }
  }

  private async startRule(key: string, appId: string, rule: WebhookRule): Promise<void> {
    const { log, runner, checkpoints, logger } = this.options;
    const topic: Topic = rule.source.type === 'channel.presence' ? Topics.presence : Topics.messages;
    const consumer = ruleConsumer(appId, rule.id);
    const former = formerConsumer(appId, rule.id);
    const loadSaved = async (): Promise<Checkpoint | undefined> => (await checkpoints.load(consumer, topic)) ?? (former === undefined ? undefined : await checkpoints.load(former, topic));
    const running: RunningRule = {
      key,
      consumer,
      json: JSON.stringify(rule),
      matcher: matcherOf(appId, rule),
      topic,
      state: { appId, ruleId: rule.id, url: rule.target.url, paused: false, failuresInARow: 0, itemsDelivered: 0, requestsFailed: 0, lag: 0 },
      abort: new AbortController(),
      inFlight: 0,
      waiting: [],
      unsaved: new Map(),
      sent: new Set(),
      retryAt: 0,
    };
    const matcher = running.matcher;
    if (topic === Topics.presence) running.members = new PresenceMembers(appId, (channel) => matcher.filter.test(channel));
    // Where the rule starts on a partition it has no checkpoint of: the log's end when it first ran
    // (the earliest any instance saw: instances starting it at once skip nothing between them).
    // Recorded once per start, so a restart does not skip what was published meanwhile.
    const initial = await checkpoints.start(consumer, topic, await log.endOffsets(topic));
    const saved = await loadSaved();
    const from: Checkpoint = new Map(initial);
    for (const [p, next] of saved ?? []) from.set(p, next);
    const start = from;
    // Who is present where the rule starts: read from the log before it.
    await running.members?.catchUp(log, topic, start);
    running.follower = runner.follow(consumer, topic, start, (records) => this.deliverBatch(running, records), {
      // A failing target's wait is the rule's to report (paused, its last error), not a failed batch.
      expected: (err) => err instanceof RetryLater,
      advisory: true,
      ...(this.options.shared
        ? {
            shared: {
              // Whichever instance is given a partition resumes where the rule's store says.
              from: async (partitions: number[]) => {
                const [saved, first] = [await loadSaved(), await checkpoints.start(consumer, topic, new Map())];
                const positions = new Map(partitions.map((p) => [p, saved?.get(p) ?? first.get(p) ?? start.get(p) ?? 0]));
                await running.members?.catchUp(log, topic, positions);
                return positions;
              },
              revoked: (partitions: number[]) => {
                for (const p of partitions) running.unsaved.delete(p);
                running.sent.clear(); // their batches may come back: sent again (at least once)
              },
            },
          }
        : {}),
    });
    // Listed once its consumer runs: a rule whose start failed is not reported delivering.
    this.rules.set(key, running);
    logger.info({ rule: key, url: rule.target.url, topic, from: Object.fromEntries(start) }, 'webhook rule delivering');
  }

  private async forget(running: RunningRule): Promise<void> {
    const former = formerConsumer(running.state.appId, running.state.ruleId);
    for (const consumer of former === undefined ? [running.consumer] : [running.consumer, former]) await this.options.checkpoints.forget(consumer, running.topic);
  }

  private async stopRule(running: RunningRule): Promise<void> {
    running.abort.abort();
    for (const wake of running.waiting.splice(0)) wake();
    await running.follower?.stop();
  }

  private async flush(): Promise<void> {
    for (const running of this.rules.values()) {
      if (running.unsaved.size === 0) continue;
      const positions = running.unsaved;
      running.unsaved = new Map();
      try {
        await this.options.checkpoints.save(running.consumer, running.topic, positions);
      } catch (err) {
        for (const [p, next] of positions) if ((running.unsaved.get(p) ?? -1) < next) running.unsaved.set(p, next);
        throw err;
      }
    }
  }

  /**
   * One partition's batch. Its channels are spread over WEBHOOK_MAX_IN_FLIGHT lanes posted at
   * once; a lane posts its items in log order, request after request, so each channel's items
   * arrive in order. The checkpoint moves once every lane was answered. While the target fails,
   * the batch throws RetryLater (after waiting out at most BACKOFF_SLICE_MS of the backoff) and its
   * consumer applies it again; items answered already are not posted again.
   */
  private async deliverBatch(running: RunningRule, records: LogRecord[]): Promise<void> {
    const wait = running.retryAt - Date.now();
    if (wait > 0) {
      await this.sleep(running, Math.min(wait, BACKOFF_SLICE_MS));
      if (running.retryAt > Date.now()) throw new RetryLater(running.state.lastError ?? 'target failing');
    }
    // A presence rule's members change with the batch; put back if it fails (applied again later).
    const undo: (() => void)[] = [];
    const members = running.members;
    const items = records.flatMap((r) => itemsOf(r, running.matcher, members && ((p, channel, e) => members.apply(p, channel, e, undo))));
    const lanes: WebhookItem[][] = Array.from({ length: this.options.settings.maxInFlight }, () => []);
    for (const item of items) if (!running.sent.has(item.id)) lanes[laneOf(String(item.data.channelId), lanes.length)].push(item);
    // Every lane ends (done, or failed at a request) before the batch is handed back: a retry never overtakes a request still out.
    const results = await Promise.allSettled(
      lanes.filter((lane) => lane.length > 0).map(async (lane) => {
        for (const chunk of this.chunks(running.matcher.rule, lane)) await this.deliverChunk(running, chunk);
      }),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      for (const put of undo.reverse()) put();
      throw failed.reason;
    }
    for (const item of items) running.sent.delete(item.id);
    const last = records[records.length - 1];
    members?.advance(last.partition, last.offset + 1);
    running.unsaved.set(last.partition, last.offset + 1);
  }

  /** Requests of at most WEBHOOK_BATCH_SIZE items and WEBHOOK_MAX_BODY_BYTES (an item over it alone); one item each for a single rule. */
  private *chunks(rule: WebhookRule, items: WebhookItem[]): Generator<WebhookItem[]> {
    const { batchSize, maxBodyBytes } = this.options.settings;
    if (rule.requestMode === 'single') {
      for (const item of items) yield [item];
      return;
    }
    let chunk: WebhookItem[] = [];
    let bytes = 12;
    for (const item of items) {
      const size = Buffer.byteLength(JSON.stringify(item)) + 1;
      if (chunk.length > 0 && (chunk.length >= batchSize || bytes + size > maxBodyBytes)) {
        yield chunk;
        chunk = [];
        bytes = 12;
      }
      chunk.push(item);
      bytes += size;
    }
    if (chunk.length > 0) yield chunk;
  }

  /**
   * Posts one request. Answered 2xx: its items are marked sent. Failed: the target's backoff is set
   * (doubling from WEBHOOK_RETRY_MS up to WEBHOOK_RETRY_MAX_MS, the pause after
   * WEBHOOK_PAUSE_AFTER_FAILURES failures in a row) and RetryLater thrown. A paused target is tried
   * again every WEBHOOK_RETRY_MAX_MS, for as long as it fails: it is never given up, and resumes at
   * its first 2xx with what the log held meanwhile.
   */
  private async deliverChunk(running: RunningRule, items: WebhookItem[]): Promise<void> {
    const { settings, registry, logger } = this.options;
    const rule = running.matcher.rule;
    if (running.abort.signal.aborted) throw new Error('webhook rule stopped');
    // Another lane failed meanwhile: this one waits with it.
    if (running.retryAt > Date.now()) throw new RetryLater(running.state.lastError ?? 'target failing');
    const body = bodyOf(rule, items);
    const send = this.options.send ?? sendWebhook;
    const headers: Record<string, string> = {};
    for (const h of rule.target.headers ?? []) headers[h.name] = h.value;
    // The signing key as it is now (a key revoked since: the request goes unsigned, and says so).
    const signingKey = rule.target.signingKeyId === undefined ? undefined : registry.key(rule.target.signingKeyId.includes('.') ? rule.target.signingKeyId : `${running.state.appId}.${rule.target.signingKeyId}`);
    if (signingKey && !signingKey.key.revoked && signingKey.app.appId === running.state.appId) {
      headers[KEY_HEADER] = signingKey.key.keyName;
      headers[SIGNATURE_HEADER] = signBody(body, signingKey.key.keySecret);
    }
    await this.slot(running);
    let result: SendResult;
    try {
      result = await send({ url: rule.target.url, body, contentType: contentTypeOf(rule), headers }, { timeoutMs: settings.requestTimeoutMs, allowPrivate: settings.allowPrivateTargets, signal: running.abort.signal });
    } finally {
      this.release(running);
    }
    const state = running.state;
    if (running.abort.signal.aborted) throw new Error('webhook rule stopped');
    if (result.ok) {
      if (state.paused) logger.info({ rule: running.key, url: state.url }, 'webhook target answers again; delivery resumed');
      state.failuresInARow = 0;
      state.paused = false;
      state.itemsDelivered += items.length;
      for (const item of items) running.sent.add(item.id);
      return;
    }
    state.requestsFailed++;
    state.failuresInARow++;
    state.lastError = result.error;
    if (!state.paused && state.failuresInARow >= settings.pauseAfterFailures) {
      state.paused = true;
      logger.warn({ rule: running.key, url: state.url, error: result.error, failures: state.failuresInARow }, 'webhook target paused: it keeps failing; retried every WEBHOOK_RETRY_MAX_MS');
    }
    const pause = Math.min(settings.retryMaxMs, settings.retryMs * 2 ** Math.min(20, state.failuresInARow - 1));
    running.retryAt = Math.max(running.retryAt, Date.now() + pause);
    throw new RetryLater(result.error);
  }

  /** Waits `ms`, or less if the rule stops. */
  private sleep(running: RunningRule, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const signal = running.abort.signal;
      const wake = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      signal.addEventListener('abort', wake);
    });
  }

  /** At most WEBHOOK_MAX_IN_FLIGHT requests to a rule's target at once. */
  private async slot(running: RunningRule): Promise<void> {
    while (running.inFlight >= this.options.settings.maxInFlight && !running.abort.signal.aborted) {
      await new Promise<void>((resolve) => running.waiting.push(resolve));
    }
    running.inFlight++;
  }

  private release(running: RunningRule): void {
    running.inFlight--;
    running.waiting.shift()?.();
  }
}

/**
 * Webhook delivery as the service runs it: checkpoints in the adapters' store (ClickHouse in
 * production) or in DATA_DIR/webhooks.db, and shared by the instances on Kafka.
 */
export async function startWebhookDelivery(options: Omit<WebhookDeliveryOptions, 'checkpoints' | 'shared'> & { checkpoints?: WebhookCheckpointStore; dataDir: string }): Promise<WebhookDelivery> {
  const checkpoints = options.checkpoints ?? new SqliteWebhookCheckpoints(join(options.dataDir, 'webhooks.db'));
  const delivery = new WebhookDelivery({ ...options, checkpoints, shared: options.log.kind === 'kafka' });
  await delivery.start();
  return delivery;
}
