import type { Consumer, EachBatchPayload, Kafka, KafkaMessage } from 'kafkajs';
import type { ConsumeOptions, LogRecord, Subscription } from '../port.js';
import type { LoggerLike } from './kafka-logger.js';

export interface PartitionOffsets {
  /** first offset still kept */
  low: number;
  /** next offset to be written */
  high: number;
}

export interface SubscriptionContext {
  kafka: Kafka;
  /** the Kafka topic (with the adapter's prefix) */
  kafkaTopic: string;
  /** the topic as the caller named it; records carry this name */
  topic: string;
  ensureTopic: (kafkaTopic: string) => Promise<number>;
  offsets: (kafkaTopic: string) => Promise<Map<number, PartitionOffsets>>;
  logger?: LoggerLike;
  fetchMaxWaitMs: number;
  sessionTimeoutMs?: number;
  retryDelayMs: number;
  onStopped: (subscription: KafkaSubscription) => void;
  /** The value to hand on for a record read (OwnValues: the appended one when this process appended it). */
  valueOf?: (headers: KafkaMessage['headers'], read: Buffer) => Uint8Array;
  /**
   * Whether a record read may be handed on: one of the service's events (UnreadableRecords). One
   * that is not is left out of its batch, and the position moves past it as past the others.
   */
  admits?: (record: LogRecord) => boolean;
  /**
   * Records [from, to) of `partition` were deleted before this consumer applied them (LostRecords:
   * logged once and counted); the consumer goes on from `to`.
   */
  lost?: (partition: number, from: number, to: number) => void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** How long stop() waits for a shared consumer to leave its group (see stop). */
const SHARED_LEAVE_WAIT_MS = 2_000;
/**
 * How often a consumer that has not moved on a partition short of its end asks where the partition
 * starts (see checkLogStart). kafkajs, fetching an offset the log deleted, starts again at the log's
 * start and hands over what follows (onBatch tells the gap); when nothing follows, no batch ever
 * comes, and only the log's start says the records are gone.
 */
const LOG_START_CHECK_MS = 1_000;

/** `value`: the record's value as handed on (KafkaLog: this process's own appended value when it is one). */
export function toLogRecord(topic: string, partition: number, m: KafkaMessage, value?: (read: Buffer) => Uint8Array): LogRecord {
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: m.key ? m.key.toString('utf8') : '',
    value: m.value ? (value ? value(m.value) : m.value) : Buffer.alloc(0),
    timestamp: Number(m.timestamp),
  };
}

/**
 * One consumer of one topic. Positions come from the caller's checkpoint, never from the group's
 * committed offsets: nothing is committed, and on every group join each assigned partition is
 * sought to the next offset this subscription has not yet delivered (PostHog's habit: resolve an
 * offset only after the batch is applied, heartbeat, and bail out on rebalance).
 */
export class KafkaSubscription implements Subscription {
  readonly caughtUp: Promise<void>;
  readonly reading: Promise<void>;
  readonly kafkaTopic: string;
  /** the consumer's name (ConsumeOptions.consumer) */
  readonly consumerName: string;
  private markCaughtUp!: () => void;
  private markReading!: () => void;
  /** caughtUp resolved: checkCaughtUp, called after every batch, has nothing left to do. */
  private isCaughtUp = false;
  private readonly next = new Map<number, number>();
  private readonly ends = new Map<number, number>();
  private startOffsets: Map<number, PartitionOffsets> | undefined;
  private consumer: Consumer | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private stopping: Promise<void> | undefined;
  /** Settles once the consumer has disconnected, and so left its group (see stop and left). */
  private disconnected: Promise<void> | undefined;
  /** Consumers started so far; each one joins a group of its own (see startConsumer). */
  private generation = 0;
  /**
   * A shared consumer's partitions (ConsumeOptions.shared): those it was given, and of those the
   * ones whose start `from` has said (their batches are applied). Undefined: every partition.
   */
  private readonly held: Set<number> | undefined;
  private readonly ready = new Set<number>();
  private joined = false;
  /** Partitions whose batch is being applied (checkLogStart leaves them alone). */
  private readonly applying = new Set<number>();
  /** Each partition's position at the last checkLogStart: one that has not moved since is asked about. */
  private readonly checkedAt = new Map<number, number>();
  private checking = false;
  private logStartTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly ctx: SubscriptionContext,
    private readonly options: ConsumeOptions,
  ) {
    this.kafkaTopic = ctx.kafkaTopic;
    this.consumerName = options.consumer;
    this.caughtUp = new Promise((resolve) => (this.markCaughtUp = resolve));
    this.reading = new Promise((resolve) => (this.markReading = resolve));
    for (const [p, offset] of options.from) this.next.set(p, offset);
    if (options.shared) {
      this.held = new Set();
      this.next.clear();
    }
  }

  static start(ctx: SubscriptionContext, options: ConsumeOptions): KafkaSubscription {
    const subscription = new KafkaSubscription(ctx, options);
    subscription.running = subscription.runUntilStarted();
    subscription.logStartTimer = setInterval(() => void subscription.checkLogStart(), LOG_START_CHECK_MS);
    subscription.logStartTimer.unref();
    return subscription;
  }

  /**
   * Of the partitions it applies: a shared consumer's partition whose start is still asked has no
   * position yet (starting()), and counted from 0 it made the lag (GET /ready, /metrics) the whole
   * partition at every hand-over.
   */
  highWatermarks(): Map<number, number> {
    return new Map([...this.ends].filter(([p]) => this.applies(p)));
  }

  positions(): Map<number, number> {
    return new Map([...this.next].filter(([p]) => this.holds(p)));
  }

  /** A shared consumer's partitions handed over and not sought yet (their `from` still asked). */
  starting(): number[] {
    return this.held === undefined || this.stopped ? [] : [...this.held].filter((p) => !this.ready.has(p));
  }

  /** Whether this subscription reads `partition` (a shared one: whether it holds it now). */
  reads(partition: number): boolean {
    return !this.stopped && this.holds(partition);
  }

  private holds(partition: number): boolean {
    return this.held === undefined || this.held.has(partition);
  }

  /** An end offset seen elsewhere (a batch, or an append by this process). */
  observe(partition: number, end: number): void {
    if (end > (this.ends.get(partition) ?? 0)) this.ends.set(partition, end);
  }

  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      this.stopped = true;
      clearInterval(this.logStartTimer);
      const disconnected = (this.disconnected = (async () => {
        await this.running;
        await this.consumer?.disconnect().catch((err) => this.ctx.logger?.warn({ err }, 'kafka consumer disconnect failed'));
        this.consumer = undefined;
      })());
      if (this.held) {
        // A shared consumer stopped while its group rebalances (its first join included) waits for
        // the rebalance to end before it can leave: on the mock broker, up to the session timeout.
        // Nothing is applied after stop() (onBatch checks), so the stop need not wait: it leaves
        // when the join returns, and a process about to exit waits for that (left(); KafkaLog.closeAndLeave).
        let timer: NodeJS.Timeout | undefined;
        const bounded = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), SHARED_LEAVE_WAIT_MS)));
        if ((await Promise.race([disconnected, bounded])) === 'late') {
          const named = { topic: this.kafkaTopic, consumer: this.options.consumer };
          this.ctx.logger?.info(named, 'shared kafka consumer stopped; it leaves its group once the rebalance under way ends');
          const left = () => this.ctx.logger?.info(named, 'shared kafka consumer left its group, the rebalance over');
          disconnected.then(left, left);
        }
        clearTimeout(timer);
      } else {
        await disconnected;
      }
      this.ctx.onStopped(this);
      // Like the embedded log: nobody waits forever on a stopped subscription.
      this.markCaughtUp();
      this.markReading();
    })());
  }

  /**
   * Resolves once the stopped consumer has left its group: for a shared one stopped during a
   * rebalance, after stop() has returned (see stop). A process that exits sooner leaves its member
   * in the group until the session timeout, and the others wait for it at their next rebalance.
   */
  async left(): Promise<void> {
    await this.stop();
    await this.disconnected;
  }

  private position(partition: number): number {
    return this.next.get(partition) ?? 0;
  }

  private async runUntilStarted(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.startConsumer();
        return;
      } catch (err) {
        this.options.onError?.(err);
        this.ctx.logger?.error({ err, topic: this.kafkaTopic, consumer: this.options.consumer, attempt }, 'kafka consumer failed to start; retrying');
        const consumer = this.consumer;
        this.consumer = undefined;
        await consumer?.disconnect().catch(() => undefined);
        // Short enough that projections resume within a couple of seconds of the broker coming back.
        await sleep(Math.min(2_000, 250 * attempt));
      }
    }
  }

  private async startConsumer(): Promise<void> {
    const { kafka, kafkaTopic } = this.ctx;
    await this.ctx.ensureTopic(kafkaTopic);
    // caughtUp is measured against the log as it was when the subscription began, restarts included.
    this.startOffsets ??= await this.ctx.offsets(kafkaTopic);
    for (const [p, { high }] of this.startOffsets) this.observe(p, high);
    this.checkCaughtUp();
    if (this.stopped) return;

    // A consumer that replaces a crashed one joins a new group: the crashed member never left its
    // group (the broker was gone), and a join under its name would wait out its session timeout
    // (30 s) before the group rebalances. Positions are ours, never the group's, so nothing is lost.
    // A shared consumer's partitions are handed over again to the consumer that replaces a crashed
    // one: what the projection held of them is dropped, and it says again where they start.
    if (this.held && this.held.size > 0) {
      const dropped = [...this.held];
      this.held.clear();
      this.ready.clear();
      for (const p of dropped) this.next.delete(p);
      this.options.shared?.revoked?.(dropped);
    }
    // A shared consumer stays in its group (the others in it share the partitions with it), named
    // after the topic too, so that prefixed topics (tests, tenants) have groups of their own.
    const generation = this.generation++;
    const groupId = this.options.shared ? `${kafkaTopic}.${this.options.consumer}` : generation === 0 ? this.options.consumer : `${this.options.consumer}.${generation}`;
    const consumer = kafka.consumer({
      groupId,
      maxWaitTimeInMs: this.ctx.fetchMaxWaitMs,
      allowAutoTopicCreation: false,
      // kafkajs would restart a crashed consumer in the same group; restart() does it instead.
      retry: { retries: 5, restartOnFailure: async () => false },
      ...(this.ctx.sessionTimeoutMs
        ? { sessionTimeout: this.ctx.sessionTimeoutMs, heartbeatInterval: Math.min(3_000, Math.floor(this.ctx.sessionTimeoutMs / 3)) }
        : {}),
    });
    this.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      const assigned = payload.memberAssignment[kafkaTopic] ?? [];
      if (this.held) return this.handOver(consumer, assigned);
      // Emitted synchronously after the join, before the first fetch of the new generation.
      for (const partition of assigned) {
        consumer.seek({ topic: kafkaTopic, partition, offset: String(this.position(partition)) });
      }
      this.markReading();
    });
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.ctx.logger?.warn({ err: payload.error, topic: kafkaTopic, consumer: this.options.consumer }, 'kafka consumer crashed; starting a new one');
      if (!this.stopped) this.restart(consumer, payload.error);
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [kafkaTopic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => this.onBatch(payload),
    });
  }

  /**
   * A shared consumer's new assignment: partitions taken away are forgotten (and `revoked` told);
   * partitions given are paused until `from` says where they start, then sought there.
   */
  private handOver(consumer: Consumer, assigned: number[]): void {
    const held = this.held!;
    const shared = this.options.shared!;
    const taken = [...held].filter((p) => !assigned.includes(p));
    const given = assigned.filter((p) => !held.has(p));
    for (const p of taken) {
      held.delete(p);
      this.ready.delete(p);
      this.next.delete(p);
    }
    if (taken.length > 0) shared.revoked?.(taken);
    // Partitions kept through the rebalance go on from where they are: each generation starts with
    // no offsets of kafkajs's own (nothing is committed), so unsought they were fetched from the
    // log's start again, every record before the position read and dropped at every hand-over.
    const topic = this.ctx.kafkaTopic;
    for (const p of assigned) if (this.ready.has(p)) consumer.seek({ topic, partition: p, offset: String(this.position(p)) });
    for (const p of given) held.add(p);
    this.joined = true;
    this.markReading();
    this.ctx.logger?.info({ topic: this.ctx.kafkaTopic, consumer: this.options.consumer, given, taken, holds: [...held] }, 'shared kafka consumer: partitions handed over');
    if (given.length === 0) return this.checkCaughtUp();
    consumer.pause([{ topic, partitions: given }]);
    void (async () => {
      // Only while this consumer is the subscription's: one that crashed and was replaced (restart)
      // has its hand-overs made again by its successor, and a start answered late must not reset
      // what the successor applies (nor be retried against a consumer that is gone, for ever).
      for (let attempt = 1; !this.stopped && this.consumer === consumer; attempt++) {
        try {
          const from = await shared.from(given);
          if (this.stopped || this.consumer !== consumer) return;
          // Taken away by a rebalance while `from` was asked: told revoked before the answer, which
          // then made them the projection's again (a writer kept their checkpoints and wrote them at
          // every flush, over the new holder's). Told again, after it.
          const gone = given.filter((p) => !held.has(p));
          if (gone.length > 0) shared.revoked?.(gone);
          const still = given.filter((p) => held.has(p) && !this.ready.has(p));
          for (const p of still) {
            this.next.set(p, from.get(p) ?? 0);
            consumer.seek({ topic, partition: p, offset: String(this.position(p)) });
            this.ready.add(p);
          }
          consumer.resume([{ topic, partitions: still }]);
          this.checkCaughtUp();
          return;
        } catch (err) {
          this.options.onError?.(err);
          await sleep(Math.min(2_000, 250 * attempt));
        }
      }
    })();
  }

  /** kafkajs gave up on this consumer; start a fresh one from the delivered positions. */
  private restart(crashed: Consumer, err: unknown): void {
    this.options.onError?.(err);
    const previous = this.running;
    this.running = (async () => {
      await previous;
      await crashed.disconnect().catch(() => undefined);
      if (this.consumer === crashed) this.consumer = undefined;
      if (this.stopped) return;
      await sleep(this.ctx.retryDelayMs);
      await this.runUntilStarted();
    })();
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const partition = batch.partition;
    this.observe(partition, Number(batch.highWatermark));
    // A partition handed over but not sought to where it starts yet: nothing of it is applied.
    if (this.held && !this.ready.has(partition)) return;
    const from = this.position(partition);
    const valueOf = this.ctx.valueOf;
    const read = batch.messages
      .filter((m) => Number(m.offset) >= from)
      .map((m) => toLogRecord(this.ctx.topic, partition, m, valueOf && ((read) => valueOf(m.headers, read))));
    if (read.length === 0) {
      resolveOffset(batch.lastOffset());
      return;
    }
    // kafkajs fetched an offset the log had deleted and started again at the log's start (a batch
    // fetched before a seek, stale, says nothing).
    if (read[0].offset > from) {
      if (this.stopped || !isRunning() || isStale()) return;
      this.lose(partition, from, read[0].offset);
    }
    // A record that is not one of the service's events is never handed on: handled, it threw, and
    // the batch was retried for ever (src/log/event-shape.ts). The position moves past it.
    const admits = this.ctx.admits;
    const records = admits ? read.filter(admits) : read;
    const last = read[read.length - 1].offset;
    if (records.length === 0) {
      if (this.stopped || !isRunning() || isStale()) return;
      this.next.set(partition, last + 1);
      resolveOffset(String(last));
      this.checkCaughtUp();
      return;
    }

    // A failed batch is applied again, never skipped; heartbeats keep the group membership meanwhile.
    this.applying.add(partition);
    try {
      for (;;) {
        if (this.stopped || !isRunning() || isStale()) return;
        try {
          await this.options.handle(records);
          break;
        } catch (err) {
          this.options.onError?.(err);
          await sleep(this.ctx.retryDelayMs);
          await heartbeat();
        }
      }
    } finally {
      this.applying.delete(partition);
    }
    this.next.set(partition, last + 1);
    resolveOffset(String(last));
    this.checkCaughtUp();
    await heartbeat();
  }

  /** Records [from, to) of `partition` are gone from the log: told of once, and the position moves past them. */
  private lose(partition: number, from: number, to: number): void {
    if (to <= this.position(partition)) return;
    this.ctx.lost?.(partition, from, to);
    this.next.set(partition, to);
    this.options.lost?.(partition, to);
    this.checkCaughtUp();
  }

  /** Whether this subscription applies `partition` now (a shared one: held, and sought to its start). */
  private applies(partition: number): boolean {
    return this.held === undefined || (this.held.has(partition) && this.ready.has(partition));
  }

  /**
   * The partitions short of their end whose position has not moved since the last check, and no
   * batch of which is being applied: where the log starts now. One whose position is before it lost
   * the records in between (retention deleted them): told of, and its position moved to the log's
   * start (lose), since kafkajs hands over no batch when nothing follows them.
   */
  private async checkLogStart(): Promise<void> {
    if (this.checking || this.stopped) return;
    const stalled: number[] = [];
    for (const [partition, end] of this.ends) {
      const at = this.position(partition);
      const before = this.checkedAt.get(partition);
      this.checkedAt.set(partition, at);
      if (at < end && before === at && this.applies(partition) && !this.applying.has(partition)) stalled.push(partition);
    }
    if (stalled.length === 0) return;
    this.checking = true;
    try {
      const offsets = await this.ctx.offsets(this.kafkaTopic);
      for (const partition of stalled) {
        const low = offsets.get(partition)?.low;
        if (low === undefined || this.stopped || !this.applies(partition) || this.applying.has(partition)) continue;
        const at = this.position(partition);
        if (at < low) this.lose(partition, at, low);
      }
    } catch (err) {
      this.ctx.logger?.debug({ err, topic: this.kafkaTopic, consumer: this.options.consumer }, 'kafka consumer: where the log starts was not answered; asked again in a moment');
    } finally {
      this.checking = false;
    }
  }

  private checkCaughtUp(): void {
    const start = this.startOffsets;
    if (!start || this.isCaughtUp) return;
    if (this.held && !this.joined) return;
    for (const [p, { low, high }] of start) {
      if (this.held && !(this.held.has(p) && this.ready.has(p))) {
        if (this.held.has(p)) return;
        continue;
      }
      if (Math.max(this.position(p), low) < high) return;
    }
    this.isCaughtUp = true;
    this.markCaughtUp();
  }
}
