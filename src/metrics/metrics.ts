// Prometheus metrics (GET /metrics, prom-client). The hot paths count in plain numbers (a route's
// counters, a histogram's bucket array); prom-client reads them only when /metrics is scraped, so
// a publish pays a few additions, never a label lookup or an object.
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { PublishTransport } from '../domain/message.js';

type Labels = Record<string, string | number>;
interface Value {
  labels: Labels;
  value: number;
  metricName?: string;
}
type Kind = 'counter' | 'gauge' | 'histogram';

/** One webhook rule's target, as GET /metrics and GET /ready report it (projections/webhooks/webhook-delivery.ts). */
export interface WebhookTargetState {
  appId: string;
  ruleId: string;
  url: string;
  /** Failing for pauseAfterFailures requests in a row: retried every WEBHOOK_RETRY_MAX_MS until it answers. */
  paused: boolean;
  failuresInARow: number;
  lastError?: string;
  itemsDelivered: number;
  requestsFailed: number;
  /** Records of the rule's topic not delivered yet (this instance's partitions). */
  lag: number;
}

/** Seconds: from a quarter millisecond (a publish on the embedded log) to ten seconds (a timeout). */
export const LATENCY_BUCKETS = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Records in one log append (group commit): 1 up to the batcher's 5,000. */
export const SIZE_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/** A histogram kept as plain numbers: observe() is a loop over a dozen bounds. */
export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly bounds: number[]) {
    this.counts = new Array<number>(bounds.length).fill(0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]) {
        this.counts[i]++;
        return;
      }
    }
  }

  /** Prometheus' cumulative buckets, +Inf last, then _sum and _count. */
  values(name: string, labels: Labels): Value[] {
    const out: Value[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i];
      out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: this.bounds[i] }, value: cumulative });
    }
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: this.count });
    out.push({ metricName: `${name}_sum`, labels, value: this.sum });
    out.push({ metricName: `${name}_count`, labels, value: this.count });
    return out;
  }
}

/** A metric whose values are read from the service when scraped (prom-client's registry formats it). */
class Collected {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: Kind,
    private readonly read: () => Value[] | Promise<Value[]>,
  ) {}

  async get(): Promise<{ name: string; help: string; type: Kind; aggregator: string; values: Value[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: await this.read() };
  }
}

/** One route's counts: replies by status, and their latency (request start to reply sent). */
export class RouteStats {
  readonly byStatus = new Map<number, number>();
  readonly latency = new Histogram(LATENCY_BUCKETS);
  constructor(
    readonly method: string,
    readonly route: string,
  ) {}

  reply(status: number, ms: number): void {
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1);
    this.latency.observe(ms / 1000);
  }
}

/** What a log append costs: its duration, its size (group commit), and its failures, per topic. */
/** How long GET /ready fails after a log append failed, unless one succeeds sooner. */
const READY_LOG_FAILURE_HOLD_MS = 10_000;

export class AppendStats {
  readonly latency = new Map<string, Histogram>();
  readonly sizes = new Map<string, Histogram>();
  readonly failures = new Map<string, number>();
  /** Whether the last append that ended succeeded (the log is writable), and when it ended. */
  lastOk = true;
  lastAt = 0;
  lastError: string | undefined;

  /**
   * The log's check of GET /ready. A failed append fails it until one succeeds, or for
   * READY_LOG_FAILURE_HOLD_MS: an instance out of rotation gets no publishes, so it must come back
   * to find out (half-open). `gone`: the embedded log's writer thread is gone, no append commits
   * again until a restart, so out for good.
   */
  readiness(kind: string, gone: Error | undefined, now = Date.now()): { name: string; ok: boolean; detail: string } {
    const ok = gone === undefined && (this.lastOk || now - this.lastAt > READY_LOG_FAILURE_HOLD_MS);
    const detail = gone ? `the embedded log cannot write until the service restarts: ${gone.message}` : this.lastOk ? `${kind} log writable` : `the last ${kind} log append failed: ${this.lastError}`;
    return { name: 'log', ok, detail };
  }

  appended(topic: string, records: number, ms: number, error?: unknown): void {
    let latency = this.latency.get(topic);
    if (!latency) this.latency.set(topic, (latency = new Histogram(LATENCY_BUCKETS)));
    let sizes = this.sizes.get(topic);
    if (!sizes) this.sizes.set(topic, (sizes = new Histogram(SIZE_BUCKETS)));
    latency.observe(ms / 1000);
    sizes.observe(records);
    this.lastOk = error === undefined;
    this.lastAt = Date.now();
    if (error !== undefined) {
      this.failures.set(topic, (this.failures.get(topic) ?? 0) + 1);
      this.lastError = error instanceof Error ? error.message : String(error);
    }
  }
}

/** The realtime gateway's numbers (Gateway.metrics()). */
export interface RealtimeNumbers {
  /** Transport sockets open: WebSockets and comet (long-polling) transports */
  sockets: number;
  /** comet (HTTP long polling) transports open, of those */
  cometTransports: number;
  /** connections known here, with a socket or waiting for a resume */
  connections: number;
  /** connections made here since the start (resumes not counted) */
  opened: number;
  /** connections ended here since the start */
  closed: number;
  attachments: number;
  /** messages sent to subscribers (a MESSAGE of three messages counts three) */
  delivered: number;
  slowConsumerDisconnects: number;
  /** connections disconnected for sending over their inbound budget (frames or bytes a second) */
  inboundBudgetDisconnects: number;
  /** connections opened with a smaller inbound burst: their origin was sent away over its budget within REALTIME_FLOOD_COOLDOWN_MS */
  cooledConnections: number;
  /** frames not acted on as sent: over the inbound budget (dropped undecoded), or refused by the decoder (malformed, too deep or wide, a lone surrogate) */
  framesRefused: number;
  /** records of the messages topic not yet delivered */
  deliveryLag: number;
}

/** What the metrics read from the running service, each when scraped. */
export interface MetricSources {
  /** Records each consumer has yet to apply, by its name (projection), summed over partitions. */
  consumerLag: () => Map<string, number>;
  /** Entries held in memory by each tail (history, presence history). */
  tailEntries: () => Map<string, number>;
  /** Open HTTP connections (WebSockets included). */
  openConnections: () => Promise<number>;
  realtime?: () => RealtimeNumbers;
  /** The stats cache: rows held, and page reads answered from memory (hits) or the store (misses). */
  statsCache?: () => { rows: number; hits: number; misses: number };
  /** Persisted rows each projection holds that its store (ClickHouse, SQLite) has not taken yet. */
  unstoredRows?: () => Map<string, number>;
  /** Each webhook rule's target (projections/webhooks/webhook-delivery.ts). */
  webhooks?: () => WebhookTargetState[];
  /** Log records every consumer left out as not the service's events, by topic and reason (Log.skippedRecords). */
  skippedRecords?: () => { topic: string; reason: string; count: number }[];
  /** Log records deleted before a consumer of this instance applied them, by topic (Log.lostRecords). */
  lostRecords?: () => { topic: string; count: number }[];
}


/** What the build is, for the build_info gauge. */
export interface BuildInfo {
  version: string;
  log: string;
  store: string;
}

/**
 * prom-client's process and Node metrics, under their standard names (process_cpu_seconds_total,
 * nodejs_heap_size_used_bytes...) that stock dashboards know: one collector per process, however
 * many services it runs (tests).
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * No series is labelled by app: the number of apps is not bounded (sandbox apps, key management),
 * and a label per app would let clients grow the scrape without limit. Per-app figures are the
 * spec's GET /stats. The labels used are bounded by the code: route, method, status, topic,
 * consumer, projection, transport.
 */

export class Metrics {
  readonly registry = new Registry();
  readonly routes: RouteStats[] = [];
  readonly appends = new AppendStats();
  /** Messages appended, by how they came in (counted by the Publisher once the log acknowledged them). */
  readonly published: Record<PublishTransport, number> = { rest: 0, realtime: 0, batch: 0, service: 0 };
  /** Store writes (a projection's flush to ClickHouse or SQLite) that failed, by projection. */
  readonly storeWriteFailures = new Map<string, number>();
  readonly batchFailures = new Map<string, number>();
  /** GET /stats answers given without rows the stats writers had not written yet (a writer slow or gone). */
  statsReadsBehindWriters = 0;
  private sources: MetricSources | undefined;
  /** The service's metrics and the process's (CPU, memory, event-loop lag, GC), prefixed like ours. */
  private readonly scraped: Registry;

  constructor(build: BuildInfo = { version: 'unknown', log: 'unknown', store: 'unknown' }) {
    const add = (name: string, help: string, type: Kind, read: () => Value[] | Promise<Value[]>): void =>
      this.registry.registerMetric(new Collected(name, help, type, read) as never);

    add('cm_http_requests_total', 'HTTP requests answered, by route, method and status', 'counter', () =>
      this.routes.flatMap((r) => [...r.byStatus].map(([status, value]) => ({ labels: { method: r.method, route: r.route, status }, value }))),
    );
    add('cm_http_request_duration_seconds', 'HTTP request latency, from the request to its reply, by route and method', 'histogram', () =>
      this.routes.filter((r) => r.latency.count > 0).flatMap((r) => r.latency.values('cm_http_request_duration_seconds', { method: r.method, route: r.route })),
    );
    add('cm_log_append_duration_seconds', 'Log append latency (one group commit: SQLite transaction or Kafka produce), by topic', 'histogram', () =>
      [...this.appends.latency].flatMap(([topic, h]) => h.values('cm_log_append_duration_seconds', { topic })),
    );
    add('cm_log_append_records', 'Records per log append (group-commit size), by topic', 'histogram', () =>
      [...this.appends.sizes].flatMap(([topic, h]) => h.values('cm_log_append_records', { topic })),
    );
    add('cm_log_append_failures_total', 'Log appends that failed, by topic', 'counter', () =>
      [...this.appends.failures].map(([topic, value]) => ({ labels: { topic }, value })),
    );
    add('cm_build_info', 'Always 1; the labels say which build runs (version, Node, log and store kinds)', 'gauge', () => [
      { labels: { version: build.version, node: process.version, log: build.log, store: build.store }, value: 1 },
    ]);
    add('cm_messages_published_total', 'Messages appended to the log, by how they came in: rest (POST /channels/<id>/messages), realtime (a MESSAGE frame), batch (POST /messages, once per channel), service (the service\'s own: channel lifecycle events)', 'counter', () =>
      Object.entries(this.published).map(([transport, value]) => ({ labels: { transport }, value })),
    );
    add('cm_stats_reads_behind_writers_total', 'GET /stats answers given, after READ_YOUR_WRITES_MS, without rows the stats writers had not written yet: a writer slow, or gone and its partitions waiting for the group to give them to another', 'counter', () => [
      { labels: {}, value: this.statsReadsBehindWriters },
    ]);
    add('cm_store_write_failures_total', 'Projection writes to the store (ClickHouse or SQLite) that failed and are retried, by projection', 'counter', () =>
      [...this.storeWriteFailures].map(([projection, value]) => ({ labels: { projection }, value })),
    );
    add('cm_consumer_batch_failures_total', 'Log batches a consumer (projection) failed to apply and retries, by consumer', 'counter', () =>
      [...this.batchFailures].map(([consumer, value]) => ({ labels: { consumer }, value })),
    );
    add('cm_log_records_skipped_total', 'Log records that are not one of the service\'s events (undecodable, of another shape, an event type this version does not know), left out by every consumer, by topic and reason (README: Records that are not the service\'s)', 'counter', () =>
      (this.sources?.skippedRecords?.() ?? []).map(({ topic, reason, count }) => ({ labels: { topic, reason }, value: count })),
    );
    add('cm_log_records_lost_total', 'Log records deleted (Kafka retention) before a consumer of this instance applied them, each counted once, by topic: its consumers went on from the log\'s start (README: Records the log deleted before they were applied)', 'counter', () =>
      (this.sources?.lostRecords?.() ?? []).map(({ topic, count }) => ({ labels: { topic }, value: count })),
    );
    add('cm_store_unstored_rows', 'Persisted rows a projection holds that its store has not taken yet (above MAX_UNSTORED_ROWS it stops consuming)', 'gauge', () =>
      [...(this.sources?.unstoredRows?.() ?? [])].map(([projection, value]) => ({ labels: { projection }, value })),
    );
    // Summed over the rules, not labelled by app or rule (the apps are not bounded); GET /ready names paused targets.
    const webhooks = (pick: (t: WebhookTargetState) => number) => (): Value[] => [
      { labels: {}, value: (this.sources?.webhooks?.() ?? []).reduce((n, t) => n + pick(t), 0) },
    ];
    add('cm_webhook_rules', 'Webhook rules delivering on this instance', 'gauge', webhooks(() => 1));
    add('cm_webhook_targets_paused', 'Webhook targets paused: each failed WEBHOOK_PAUSE_AFTER_FAILURES requests in a row and is retried every WEBHOOK_RETRY_MAX_MS (GET /ready names them)', 'gauge', webhooks((t) => (t.paused ? 1 : 0)));
    add('cm_webhook_items_delivered_total', 'Webhook items targets answered 2xx to (at least once: a repeat after a restart counts again)', 'counter', webhooks((t) => t.itemsDelivered));
    add('cm_webhook_requests_failed_total', 'Webhook requests that failed (no answer, an error status, a redirect, a refused address) and are retried', 'counter', webhooks((t) => t.requestsFailed));
    add('cm_webhook_lag_records', 'Log records webhook rules have yet to deliver, summed', 'gauge', webhooks((t) => t.lag));
    add('cm_log_writable', '1 when the last log append succeeded', 'gauge', () => [{ labels: {}, value: this.appends.lastOk ? 1 : 0 }]);
    add('cm_consumer_lag_records', 'Log records a consumer (projection) has yet to apply', 'gauge', () =>
      [...(this.sources?.consumerLag() ?? [])].map(([consumer, value]) => ({ labels: { consumer }, value })),
    );
    add('cm_memory_tail_entries', 'Entries in the in-memory history tails', 'gauge', () =>
      [...(this.sources?.tailEntries() ?? [])].map(([tail, value]) => ({ labels: { tail }, value })),
    );
    add('cm_http_open_connections', 'Open HTTP connections (WebSockets included)', 'gauge', async () =>
      this.sources ? [{ labels: {}, value: await this.sources.openConnections() }] : [],
    );
    const realtime = (pick: (r: RealtimeNumbers) => number) => (): Value[] => {
      const r = this.sources?.realtime?.();
      return r ? [{ labels: {}, value: pick(r) }] : [];
    };
    add('cm_realtime_sockets', 'Realtime transport sockets open (WebSockets and comet transports)', 'gauge', realtime((r) => r.sockets));
    add('cm_realtime_comet_transports', 'Realtime comet (HTTP long polling) transports open', 'gauge', realtime((r) => r.cometTransports));
    add('cm_realtime_connections', 'Realtime connections, with a socket or waiting for a resume', 'gauge', realtime((r) => r.connections));
    add('cm_realtime_connections_opened_total', 'Realtime connections made (a resume is not a new connection)', 'counter', realtime((r) => r.opened));
    add('cm_realtime_connections_closed_total', 'Realtime connections ended: closed by the client, expired, or failed', 'counter', realtime((r) => r.closed));
    add('cm_realtime_attachments', 'Realtime channel attachments', 'gauge', realtime((r) => r.attachments));
    add('cm_realtime_messages_delivered_total', 'Messages the realtime gateway sent to subscribers', 'counter', realtime((r) => r.delivered));
    add('cm_realtime_slow_consumer_disconnects_total', 'Realtime connections cut off for not reading what they were sent', 'counter', realtime((r) => r.slowConsumerDisconnects));
    add('cm_realtime_inbound_budget_disconnects_total', 'Realtime connections disconnected for sending more frames or bytes a second than their budget', 'counter', realtime((r) => r.inboundBudgetDisconnects));
    add('cm_realtime_cooled_connections_total', 'Realtime connections opened with a tenth of the inbound burst: one from their origin (key, address, a token\'s clientId) was disconnected over its budget within REALTIME_FLOOD_COOLDOWN_MS', 'counter', realtime((r) => r.cooledConnections));
    add('cm_realtime_frames_refused_total', 'Realtime frames dropped over the inbound budget or refused by the decoder (malformed, nested too deep, too wide, a lone surrogate, a __proto__ key)', 'counter', realtime((r) => r.framesRefused));
    const cache = (pick: (c: { rows: number; hits: number; misses: number }) => Value[]) => (): Value[] => {
      const c = this.sources?.statsCache?.();
      return c ? pick(c) : [];
    };
    add('cm_stats_cache_rows', 'Stats rows (rollups, samples) held in memory for GET /stats', 'gauge', cache((c) => [{ labels: {}, value: c.rows }]));
    add('cm_stats_cache_reads_total', 'Stats reads of GET /stats, by whether memory held every row (hit) or the store was read (miss)', 'counter', cache((c) => [
      { labels: { outcome: 'hit' }, value: c.hits },
      { labels: { outcome: 'miss' }, value: c.misses },
    ]));
    this.scraped = Registry.merge([this.registry, processMetrics()]);
  }

  /** The counters of one route, made once when the route is added. */
  route(method: string, route: string): RouteStats {
    const stats = new RouteStats(method, route);
    this.routes.push(stats);
    return stats;
  }

  /** Counts one failed store write of `projection`. */
  storeWriteFailed(projection: string): void {
    this.storeWriteFailures.set(projection, (this.storeWriteFailures.get(projection) ?? 0) + 1);
  }

  /** Counts one batch `consumer` failed to apply (the log delivers it again). */
  batchFailed(consumer: string): void {
    this.batchFailures.set(consumer, (this.batchFailures.get(consumer) ?? 0) + 1);
  }

  attach(sources: MetricSources): void {
    this.sources = sources;
  }

  text(): Promise<string> {
    return this.scraped.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
