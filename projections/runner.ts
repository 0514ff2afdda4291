// The projection runner: the one place that wires the log to the projections. For each projection
// it knows which topics it consumes, where it starts on each (its checkpoint, or a snapshot's
// positions: the projection says, in `from`), the consumer that feeds it, that consumer's lag (GET
// /ready, GET /metrics), what a failed batch or a failed store write does (logged, counted,
// retried), and stops them all. service.ts says which projections run; this says how.
import type { Logger } from 'pino';
import type { Checkpoint, ConsumeOptions, Log, LogRecord, Subscription, Topic } from '../src/log/port.js';
import { lagOf } from '../src/log/port.js';
import { offsetAtTime } from '../src/log/offset-at-time.js';
import { drainWriters } from './writer-drain.js';
import { TopicFeed, type FeedReader } from './topic-feed.js';

export interface ProjectionWiring {
  /** Its name in logs and metrics; a consumer of several topics is `<name>-<topic>`. */
  name: string;
  topics: readonly Topic[];
  /**
   * Where it starts reading `topic` (the next offset per partition): its store's checkpoint, or
   * the positions a snapshot covers. Absent: the beginning of the log. Called once per topic, in
   * the order the projections and topics are given, before any of them consumes.
   */
  from?: (topic: Topic) => Checkpoint | Promise<Checkpoint>;
  /** Applies one batch (one partition, in offset order); a throw retries the batch after a pause. */
  handle: (records: LogRecord[]) => void | Promise<void>;
  /**
   * The instances share this projection's partitions (ConsumeOptions.shared: on Kafka, a consumer
   * group named after it, the same on every instance): each partition is applied by one of them.
   * For projections whose work is writing a store once (a writer); reads come from elsewhere, so
   * start() does not wait for it (its group's hand-overs take seconds).
   */
  shared?: ConsumeOptions['shared'];
  /** Records of `topic` the log deleted before they were applied: they count as applied (ConsumeOptions.lost). */
  lost?: (topic: Topic, partition: number, next: number) => void;
}

export interface RunnerOptions {
  log: Log;
  logger: Logger;
  /**
   * The name the log knows a consumer by (the Kafka adapter's group id); default: as given. Not
   * for a shared consumer: its name is the same on every instance (it names their group).
   */
  consumerName?: (name: string) => string;
  /**
   * One consumer per topic for the projections of a start() that read every partition of it (not
   * the shared ones): it reads from the earliest of their checkpoints, and each projection is given
   * the records from its own on (see TopicFeed). On Kafka, where each consumer fetches and decodes
   * every record itself, this is one fetch and one decoding of a record instead of one per
   * projection (test/bench/HISTORY.md: production publish). A projection's failed batch holds the
   * others of its topic back while it is retried, as it held its own consumer back.
   */
  shareConsumers?: boolean;
  /** Counts a failed batch of a consumer (GET /metrics). */
  onBatchFailed?: (consumer: string) => void;
  /** Counts a failed store write of a projection (GET /metrics). */
  onStoreWriteFailed?: (projection: string) => void;
}

/** A consumer kept only while it is needed (the history tail follower, a webhook rule); its lag counts meanwhile. */
export interface Follower {
  /** Records it has yet to apply (of the partitions it holds). */
  lag(): number;
  stop(): Promise<void>;
}

/** How a follower is run (RunnerOptions aside). */
export interface FollowOptions {
  /** Shares the topic's partitions among the instances (ProjectionWiring.shared). */
  shared?: ConsumeOptions['shared'];
  /**
   * Errors of a batch that are the follower's own to report (a webhook target failing: its rule
   * says so in GET /metrics and /ready): retried, logged at debug, not counted as failed batches.
   */
  expected?: (err: unknown) => boolean;
  /**
   * Its lag is listed (GET /metrics, GET /ready's detail) but does not make the instance unready:
   * its pace is another service's (a webhook target), not this instance's health.
   */
  advisory?: boolean;
  /** As ProjectionWiring.lost, of its topic. */
  lost?: ConsumeOptions['lost'];
}

/** The least time a stop gives the shared writers' last writes (ProjectionRunner.stop), however late the drain ended. */
const LAST_WRITES_MIN_MS = 1_000;

export class ProjectionRunner {
  /** Every consumer by name (`history`, `stats-messages`...), the followers included while they run. */
  private readonly consumers = new Map<string, Subscription>();
  private readonly advisoryNames = new Set<string>();
  /** By topic, the feed of the projections reading all of it (RunnerOptions.shareConsumers), which join() adds readers to. */
  private readonly wholeTopicFeeds = new Map<string, TopicFeed>();
  /** The shared projections' consumers (the writers: ProjectionWiring.shared) and their topics: what stop() drains. */
  private readonly writers = new Map<string, Topic>();
  /** stop() has begun: a caughtUp resolving from now on may be the stop's, not the log's end. */
  private stopping = false;
  /** Consumers reading every partition that do not read the log yet (Subscription.reading: a Kafka group still joining). */
  private readonly joiningNames = new Set<string>();

  constructor(private readonly options: RunnerOptions) {}

  /**
   * Starts the projections together and resolves once each has applied everything the log held
   * when it started. Together, not one after another: on Kafka each consumer's first join of its
   * group waits out the broker's initial rebalance delay (3 s by default), which one after another
   * made a start wait that long for every topic holding data.
   */
  async start(...projections: ProjectionWiring[]): Promise<void> {
    const planned: [ProjectionWiring, Topic, Checkpoint][] = [];
    for (const projection of projections) {
      for (const topic of projection.topics) planned.push([projection, topic, new Map(await projection.from?.(topic))]);
    }
    const nameOf = (projection: ProjectionWiring, topic: Topic): string => (projection.topics.length === 1 ? projection.name : `${projection.name}-${topic}`);
    // Per topic, a feed for the projections reading all of it and one for those sharing its partitions among the instances.
    const feeds = new Map<string, TopicFeed>();
    const feedKey = (projection: ProjectionWiring, topic: Topic): string => `${topic}${projection.shared ? '-writers' : '-feed'}`;
    if (this.options.shareConsumers) {
      const byKey = new Map<string, { topic: Topic; readers: FeedReader[] }>();
      for (const [projection, topic, from] of planned) {
        const key = feedKey(projection, topic);
        let group = byKey.get(key);
        if (!group) byKey.set(key, (group = { topic, readers: [] }));
        const lost = projection.lost;
        group.readers.push({ name: nameOf(projection, topic), from, handle: projection.handle, shared: projection.shared, lost: lost && ((p, next) => lost(topic, p, next)) });
      }
      for (const [key, { topic, readers }] of byKey) {
        if (readers.length < 2) continue;
        const feed = this.feed(key, topic, readers);
        feeds.set(key, feed);
        if (readers[0].shared === undefined) this.wholeTopicFeeds.set(topic, feed);
      }
    }
    const caughtUp = planned.map(([projection, topic, from]) => {
      const name = nameOf(projection, topic);
      const startedAt = Date.now();
      const feed = feeds.get(feedKey(projection, topic));
      const lost = projection.lost;
      const subscription = feed ? feed.reader(name) : this.consume(name, topic, from, projection.handle, projection.shared, undefined, lost && ((p, next) => lost(topic, p, next)));
      if (feed) this.consumers.set(name, subscription);
      if (projection.shared) this.writers.set(name, topic);
      else this.noteJoining(name, subscription);
      // A stopped subscription's caughtUp resolves too (nobody waits for ever on it): that one is told apart.
      const reported = subscription.caughtUp.then(() =>
        this.options.logger.info({ consumer: name, topic, ms: Date.now() - startedAt }, this.stopping ? 'projection stopping: the stop began before it caught up with the log' : 'projection caught up with the log'),
      );
      return projection.shared ? undefined : reported;
    });
    await Promise.all(caughtUp);
  }

  /**
   * One consumer of `topic` for several projections (RunnerOptions.shareConsumers): those reading
   * every partition, or those sharing the partitions among the instances (one consumer group, named
   * `<topic>-writers` on every instance, whose hand-overs each of them is told of).
   */
  private feed(feedName: string, topic: Topic, readers: FeedReader[]): TopicFeed {
    for (const { name } of readers) if (this.consumers.has(name)) throw new Error(`a consumer ${name} runs already`);
    const feed = new TopicFeed(readers, (name, err) => {
      this.options.onBatchFailed?.(name);
      this.options.logger.error({ err, consumer: name, topic }, 'projection failed on a batch; retrying');
    });
    const shared = readers[0].shared !== undefined;
    feed.subscription = this.options.log.consume({
      topic,
      consumer: shared ? feedName : (this.options.consumerName?.(feedName) ?? feedName),
      from: feed.from(),
      handle: (records) => feed.handle(records),
      lost: (partition, next) => feed.lost(partition, next),
      ...(shared ? { shared: { from: (partitions: number[]) => feed.handOver(partitions), revoked: (partitions: number[]) => feed.revoke(partitions) } } : {}),
      // Failures are reported under the projection's name by the feed (above); others (the consumer's own) here.
      onError: (err) => {
        if (feed.reported(err)) return;
        this.options.onBatchFailed?.(feedName);
        this.options.logger.error({ err, consumer: feedName, topic }, 'consumer failed; retrying');
      },
    });
    return feed;
  }

  /**
   * A consumer of a whole topic for work that is not a projection of this runner (realtime
   * delivery, connection events), from `options.from` on: on a topic whose projections share a
   * consumer (RunnerOptions.shareConsumers), a reader of that consumer, so that a record is fetched
   * and decoded once for all of them; else a consumer of its own (Log.consume, as given). The
   * shared consumer cannot go back: a partition it has handed on past `options.from` starts there
   * for the reader, and positions() says where each starts. Its failed batch holds the projections
   * of the topic back while it is retried; stopping it stops only it. Not listed in lag(): its
   * owner reports its own (GET /ready, GET /metrics: realtime-delivery, connection-events).
   */
  join(options: ConsumeOptions): Subscription {
    const feed = options.shared ? undefined : this.wholeTopicFeeds.get(options.topic);
    if (!feed || feed.stopped) return this.options.log.consume(options);
    return feed.join(options.consumer, options.from, options.handle, options.onError, options.lost);
  }

  /** A consumer of `topic` from `from`, not awaited: listed under `name` until stopped. */
  follow(name: string, topic: Topic, from: Checkpoint, handle: ProjectionWiring['handle'], options: FollowOptions = {}): Follower {
    const subscription = this.consume(name, topic, from, handle, options.shared, options.expected, options.lost);
    if (options.advisory) this.advisoryNames.add(name);
    else if (!options.shared) this.noteJoining(name, subscription);
    return {
      lag: () => lagOf(subscription),
      stop: async () => {
        if (this.consumers.get(name) === subscription) {
          this.consumers.delete(name);
          this.advisoryNames.delete(name);
          this.joiningNames.delete(name);
        }
        await subscription.stop();
      },
    };
  }

  /** Until `subscription` reads the log (Subscription.reading), `name` is listed by joining(). */
  private noteJoining(name: string, subscription: Subscription): void {
    if (!subscription.reading) return;
    this.joiningNames.add(name);
    void subscription.reading.then(() => {
      if (this.consumers.get(name) === subscription) this.joiningNames.delete(name);
    });
  }

  /**
   * The consumers reading every partition (not the shared writers, not the advisory followers)
   * that do not read the log yet: a Kafka consumer whose group is still joining, caught up with
   * what the log held at its start and deaf to what comes after, for about 3 s on the local broker.
   */
  joining(): string[] {
    return [...this.joiningNames].filter((name) => this.consumers.has(name));
  }

  /**
   * GET /ready's `consumers` check over `lags` (the runner's and others'): failing while one is more
   * than `maxLag` records behind, or does not read the log yet (`joining`: the runner's own,
   * joining(), and others'). An advisory consumer (a webhook rule's, at its target's pace) is
   * listed when behind, never failing it.
   */
  consumersCheck(lags: Map<string, number>, maxLag: number, joining: string[] = []): { name: string; ok: boolean; detail: string } {
    const behind = [...lags].filter(([, lag]) => lag > maxLag);
    const lagging = behind.filter(([name]) => !this.advisoryNames.has(name));
    const advisory = behind.filter(([name]) => this.advisoryNames.has(name)).map(([name, lag]) => `; ${name} ${lag} records behind (a webhook target's pace: not counted)`).join('');
    const notReading = [...this.joining(), ...joining];
    const problems = [
      ...lagging.map(([name, lag]) => `${name} ${lag} records behind`),
      ...notReading.map((name) => `${name} not reading the log yet (its consumer group is joining)`),
    ];
    const detail = problems.length === 0 ? `every ${advisory ? 'other ' : ''}consumer reading, within ${maxLag} records of the log's end` : problems.join(', ');
    return { name: 'consumers', ok: problems.length === 0, detail: detail + advisory };
  }

  /** The consumer called `name` (its end offsets say whether a projection is caught up). */
  consumer(name: string): Subscription {
    const subscription = this.consumers.get(name);
    if (!subscription) throw new Error(`no consumer ${name} runs`);
    return subscription;
  }

  /** The partitions consumer `name` holds (all of them but for a shared consumer), in order. */
  partitionsOf(name: string): number[] {
    return [...this.consumer(name).positions().keys()].sort((a, b) => a - b);
  }

  /** The log's kind: the embedded log has one process, which holds every partition of a shared consumer. */
  get logKind(): Log['kind'] {
    return this.options.log.kind;
  }

  /** Records of a partition from an offset, at most `maxRecords` (a stats read's stand-in: projections/stats/stats-reader.ts). */
  read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    return this.options.log.read(topic, partition, fromOffset, maxRecords);
  }

  /**
   * Readies `read` of `topic` now rather than at its first call (Kafka: a reader joins a group of
   * its own, which takes the broker's initial rebalance delay, about 3 s).
   */
  prepareReads(topic: Topic): Promise<void> {
    return this.options.log.prepareReads?.(topic) ?? Promise.resolve();
  }

  /** The first offset of a partition of `topic` at or after `timestamp` (src/log/offset-at-time.ts). */
  offsetAt(topic: Topic, partition: number, timestamp: number): Promise<number> {
    return offsetAtTime(this.options.log, topic, partition, timestamp);
  }

  /** How many partitions `topic` has (where a key's records go: src/log/partitioner.ts). */
  partitions(topic: Topic): Promise<number> {
    return this.options.log.partitions(topic);
  }

  /** Records each consumer has yet to apply: the log's end as it last saw it, minus its position. */
  lag(): Map<string, number> {
    const lags = new Map<string, number>();
    for (const [name, subscription] of this.consumers) lags.set(name, lagOf(subscription));
    return lags;
  }

  /** What a projection does with a store write that failed (it retries it at its next flush). */
  storeWriteFailed(projection: string): (err: unknown) => void {
    return (err) => {
      this.options.onStoreWriteFailed?.(projection);
      this.options.logger.warn({ err, projection }, 'projection store write failed; retrying');
    };
  }

  /**
   * Stops every consumer; the first failure is thrown once all were asked to stop. With `drainMs`,
   * the writers (the projections sharing their partitions among the instances) are stopped last:
   * the others first, so that what they applied is final, then the writers are given up to
   * `drainMs` to apply, of the partitions they hold, the log up to its end (drain), which their
   * close then writes to their stores. A start's snapshot of the projections reading every partition
   * serves only if the stores hold what it covers (presence: projections/presence; README: A
   * bounded start). With `lastWrites`, the writers' last writes to their stores (ProjectionSet.sealWriters),
   * run after the drain, before the writers leave their groups, bounded by the drain's deadline (at
   * least LAST_WRITES_MIN_MS): the partitions' next holders start from checkpoints no later write
   * moves back.
   */
  async stop(options: { drainMs?: number; lastWrites?: () => Promise<void> } = {}): Promise<void> {
    this.stopping = true;
    const deadline = Date.now() + (options.drainMs ?? 0);
    const all = [...this.consumers];
    const writers = (options.drainMs ?? 0) > 0 || options.lastWrites ? all.filter(([name]) => this.writers.has(name)) : [];
    const others = all.filter(([name]) => !writers.some(([w]) => w === name));
    this.consumers.clear();
    this.joiningNames.clear();
    this.wholeTopicFeeds.clear();
    const results = await Promise.allSettled(others.map(([, s]) => s.stop()));
    if (writers.length > 0) {
      const draining = writers.map(([name, subscription]) => ({ name, topic: this.writers.get(name)!, subscription }));
      if ((options.drainMs ?? 0) > 0) await drainWriters(this.options.log, this.options.logger, draining, options.drainMs!).catch((err: unknown) => this.options.logger.warn({ err }, 'stop: the shared writers were not drained'));
      if (options.lastWrites) await this.lastWrites(options.lastWrites, Math.max(LAST_WRITES_MIN_MS, deadline - Date.now()));
      results.push(...(await Promise.allSettled(writers.map(([, s]) => s.stop()))));
    }
    this.writers.clear();
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** The shared writers' last writes before they leave their groups, at most `ms`; a failure or a timeout is logged (their records are written again by the next holders). */
  private async lastWrites(write: () => Promise<void>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const writing = write().then(() => 'written' as const);
    const outcome = await Promise.race([writing, new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)))])
      .catch((err: unknown) => ({ err }))
      .finally(() => clearTimeout(timer));
    if (outcome === 'written') return;
    writing.catch(() => undefined);
    if (outcome === 'late') this.options.logger.warn({ ms }, "stop: the shared writers' last writes did not end in time; they leave their groups meanwhile (a write landing later may have their next holders write some records again)");
    else this.options.logger.warn({ err: outcome.err }, "stop: the shared writers' last writes failed; their next holders write those records from the stored checkpoints");
  }

  private consume(name: string, topic: Topic, from: Checkpoint, handle: ProjectionWiring['handle'], shared?: ProjectionWiring['shared'], expected?: FollowOptions['expected'], lost?: ConsumeOptions['lost']): Subscription {
    if (this.consumers.has(name)) throw new Error(`a consumer ${name} runs already`);
    const { log, logger } = this.options;
    const subscription = log.consume({
      topic,
      consumer: shared ? name : (this.options.consumerName?.(name) ?? name),
      from,
      handle,
      shared,
      lost,
      onError: (err) => {
        if (expected?.(err)) {
          logger.debug({ consumer: name, topic, error: (err as Error).message }, 'batch waits; retrying');
          return;
        }
        this.options.onBatchFailed?.(name);
        logger.error({ err, consumer: name, topic }, 'projection failed on a batch; retrying');
      },
    });
    this.consumers.set(name, subscription);
    return subscription;
  }
}
