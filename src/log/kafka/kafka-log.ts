import { randomBytes } from 'node:crypto';
import { Kafka, Partitioners, type Admin, type Producer } from 'kafkajs';
import { LogClosedError, Topics, type AppendRecord, type ConsumeOptions, type Log, type LogPosition, type LogRecord, type Subscription, type Topic } from '../port.js';
import { kafkajsLogging, type LoggerLike } from './kafka-logger.js';
import { GroupLeave, type Left } from './group-leave.js';
import { KafkaSubscription, type PartitionOffsets } from './kafka-subscription.js';
import { KafkaTopicReader, type KafkaChainedRecord } from './kafka-reader.js';
import { ChainCheckpoints, ProducerChains, type CheckpointOptions } from './kafka-chain.js';
import { OwnValues } from './kafka-own-values.js';
import { quietIdleRequestQueues } from './kafkajs-idle-timers.js';
import { ProduceLanes } from './produce-lanes.js';
import { UnreadableRecords, type RecordCheck } from './unreadable-records.js';
import { LostRecords } from '../lost-records.js';

export interface KafkaLogOptions {
  brokers: string[];
  clientId?: string;
  /**
   * Idempotent producer (no duplicates when a produce request is retried). On for real Kafka;
   * librdkafka's mock broker cannot serve it (ARCHITECTURE: Kafka in tests), so tests turn it off.
   */
  idempotent?: boolean;
  /** Prepended to every topic name, so that tests (or tenants) use their own topics. */
  topicPrefix?: string;
  /** Partitions of a topic this adapter creates; an existing topic keeps its own count. */
  numPartitions?: number;
  /** Replication factor of topics this adapter creates; the broker's default when absent. */
  replicationFactor?: number;
  /** How long to wait for a missing topic to appear with partitions. */
  topicTimeoutMs?: number;
  /**
   * Whether a topic missing at its first use is created (default true: the service's). false: the
   * replay's, which writes nothing to the cluster: a missing topic (KAFKA_BROKERS of another
   * cluster, or a service that never started there) is an error at once, not made.
   */
  createTopics?: boolean;
  /** Longest wait of a fetch with nothing to return; bounds how long stop() takes. */
  fetchMaxWaitMs?: number;
  /**
   * Consumer group session timeout (kafkajs default 30 s). The mock broker makes a group rejoined
   * under the same name wait about this long, so tests shorten it (real brokers accept >= 6 s).
   */
  sessionTimeoutMs?: number;
  /** Pause before a failed batch is applied again. */
  retryDelayMs?: number;
  /**
   * Longest wait for Kafka to acknowledge an append (limits.ts: logAppendTimeoutMs). kafkajs
   * retries a produce for as long as its retry policy allows; past this the append fails, so a
   * publish answers 503 instead of waiting on a broker that is down.
   */
  appendTimeoutMs?: number;
  /**
   * Producers writing at once (default 2). Each owns the partitions whose number modulo this count
   * is its own and has one produce request in flight, so a partition's records land in append order
   * even across retries, and an idempotent producer's sequence numbers stay its own (kafkajs sends
   * one request at a time per broker and producer when idempotent). More is not free: on the local
   * mock broker, where publishing is bound by CPU, 2 cost 7 to 20% more CPU per publish than 1, and
   * 4 more again (test/bench/HISTORY.md).
   */
  producers?: number;
  /**
   * Under load, a producer whose request just settled waits up to this long for LINGER_RECORDS
   * records before it sends the next (ProduceLanes' Linger; default 0: it sends at once). Fewer,
   * larger requests: less CPU per record for this process and the brokers (test/bench/HISTORY.md).
   */
  lingerMs?: number;
  logger?: LoggerLike;
  /**
   * What its consumers may be handed: the service's events (src/log/event-shape.ts), since anyone
   * with produce rights can write anything to a topic. A record it refuses is left out by every
   * consumer, logged once and counted (skippedRecords). Absent: every record is handed on (the log
   * as a log of bytes: its contract tests, the audit tools).
   */
  recordCheck?: RecordCheck;
  /**
   * Signed checkpoints of this writer's chains (kafka-chain.ts), appended to the `audit` topic every
   * intervalMs when a head moved, and once more at close. Absent: none (a replay or rebuild reads).
   */
  checkpoints?: CheckpointOptions;
}

/** One: measured best on the local mock broker (CPU-bound); a cluster with real round trips may want more (KAFKA_PRODUCERS). */
const DEFAULT_PRODUCERS = 1;
/** A lingering producer sends once this many records wait (options.lingerMs). */
const LINGER_RECORDS = 256;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The log on Apache Kafka through kafkajs. An append is one produce request per producer that owns
 * some of its partitions (options.producers), with acks from all in-sync replicas, so it resolves
 * only once durable. A key always maps to the same partition (the embedded log's partitionFor) and
 * a partition to one producer, whose requests go one after the other: per-key order is the log's
 * order, while the producers' requests are in flight together. Consumers start from the caller's
 * checkpoint, not from the group's committed offsets (see KafkaSubscription).
 *
 * The producers' queues replaced one request in flight for the whole log (each append chained on
 * the one before). They are for brokers whose acks=all round trip bounds publishing; on the local
 * mock broker, where the CPU does, they bought nothing (test/bench/HISTORY.md: production publish).
 */
export class KafkaLog implements Log {
  readonly kind = 'kafka' as const;
  /**
   * One append per producer in flight and one waiting behind it, built while the first is out, so
   * that a producer never waits for the batcher; more only split the same records into smaller requests.
   */
  readonly maxAppendsInFlight: number;
  private readonly kafka: Kafka;
  private readonly clientId: string;
  private readonly prefix: string;
  private readonly idempotent: boolean;
  private readonly options: KafkaLogOptions;
  private readonly logger: LoggerLike | undefined;
  private readonly fetchMaxWaitMs: number;
  private admin: Promise<Admin> | undefined;
  private readonly producers: (Promise<Producer> | undefined)[];
  private readonly topics = new Map<string, Promise<number>>();
  /** Partition counts of the topics appended to (see sendByProducer). */
  private readonly partitionCounts = new Map<string, number>();
  private readonly readers = new Map<string, KafkaTopicReader>();
  private readonly subscriptions = new Set<KafkaSubscription>();
  /** Consumers stopped before the close that have not left their groups yet (a shared one stopped during a rebalance). */
  private readonly departing = new Set<KafkaSubscription>();
  /** Per topic, each producer's records waiting for its request in flight to settle (see append). */
  private readonly lanes: ProduceLanes;
  private closed = false;
  /** Every record's place in this writer's hash chains (tamper evidence, kafka-chain.ts). */
  readonly chains = new ProducerChains();
  private readonly checkpoints: ChainCheckpoints | undefined;
  /** What this process appended, handed to its consumers that read its partition as it was appended (decoded already). */
  private readonly ownValues = new OwnValues((kafkaTopic, partition) => [...this.subscriptions].filter((s) => s.kafkaTopic === kafkaTopic && s.reads(partition)).length);
  private closing: Promise<void> | undefined;
  /** The consumers at the close leaving their groups (KafkaSubscription.left), those stopped before it included. */
  private leaving: GroupLeave | undefined;
  /** Records on the topics that are not the service's events, left out by every consumer (README: Records that are not the service's). */
  private readonly unreadable: UnreadableRecords | undefined;
  /** Records retention deleted before a consumer of this process applied them (README: Records the log deleted before they were applied). */
  private readonly lostOnes: LostRecords;

  constructor(options: KafkaLogOptions) {
    if (options.brokers.length === 0) throw new Error('KafkaLog needs at least one broker');
    if (!quietIdleRequestQueues()) options.logger?.warn({}, 'kafkajs is not the version whose idle timer loop this log stops (kafkajs-idle-timers.ts)');
    this.options = options;
    this.clientId = options.clientId ?? 'channel-messaging';
    this.prefix = options.topicPrefix ?? '';
    this.idempotent = options.idempotent ?? true;
    this.logger = options.logger;
    this.unreadable = options.recordCheck && new UnreadableRecords(options.recordCheck, options.logger);
    this.lostOnes = new LostRecords(options.logger);
    this.fetchMaxWaitMs = options.fetchMaxWaitMs ?? 500;
    const producers = Math.max(1, Math.floor(options.producers ?? DEFAULT_PRODUCERS));
    this.producers = new Array<Promise<Producer> | undefined>(producers).fill(undefined);
    this.lanes = new ProduceLanes(producers, (kafkaTopic, lane, messages) => this.produce(kafkaTopic, lane, messages), () => this.closed, {
      lingerMs: Math.max(0, options.lingerMs ?? 0),
      lingerRecords: LINGER_RECORDS,
    });
    this.maxAppendsInFlight = producers + 1;
    this.kafka = new Kafka({
      clientId: this.clientId,
      brokers: options.brokers,
      ...kafkajsLogging(options.logger),
    });
    if (options.checkpoints) {
      this.checkpoints = new ChainCheckpoints(this.chains, options.checkpoints, (value) => this.append(Topics.audit, [{ key: 'checkpoint', timestamp: Date.now(), value }]));
      this.logger?.info({ auditWriter: this.chains.writerId }, 'this instance\'s records carry its audit chain writer id (replay --verify names chains by it)');
    }
  }

  /** Appends a signed checkpoint of this writer's acknowledged chain heads to the `audit` topic, if any moved since the last. */
  async checkpoint(): Promise<void> {
    if (!this.closed) await this.checkpoints?.checkpoint();
  }

  private kafkaTopic(topic: string): string {
    return this.prefix + topic;
  }

  private connectedAdmin(): Promise<Admin> {
    return (this.admin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })().catch((err) => {
      this.admin = undefined;
      throw err;
    }));
  }

  private connectedProducer(lane: number): Promise<Producer> {
    return (this.producers[lane] ??= (async () => {
      const producer = this.kafka.producer({
        idempotent: this.idempotent,
        // One request at a time is what append sends a producer; said again for idempotence.
        maxInFlightRequests: 1,
        allowAutoTopicCreation: true,
        // Short backoffs: a produce retried after its append timed out holds its producer's next
        // one back (append), so once the broker is back it should be tried again within a second.
        retry: { initialRetryTime: 100, maxRetryTime: 1_000, retries: 10 },
        // Partitions are chosen here (partitionFor); naming the partitioner silences kafkajs' v2 notice.
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await producer.connect();
      return producer;
    })().catch((err) => {
      this.producers[lane] = undefined;
      throw err;
    }));
  }

  /**
   * Creates the topic when missing, best effort: brokers without CreateTopics (the mock) create
   * it on first metadata request instead. Resolves with its partition count once every partition
   * has a leader.
   */
  private ensureTopic(kafkaTopic: string): Promise<number> {
    let ready = this.topics.get(kafkaTopic);
    if (!ready) {
      ready = this.topicReady(kafkaTopic);
      this.topics.set(kafkaTopic, ready);
      ready.catch(() => this.topics.delete(kafkaTopic));
    }
    return ready;
  }

  /** Creates the topic, best effort (see ensureTopic). */
  private async makeTopic(admin: Admin, kafkaTopic: string): Promise<void> {
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic: kafkaTopic,
            numPartitions: this.options.numPartitions ?? 4,
            ...(this.options.replicationFactor ? { replicationFactor: this.options.replicationFactor } : {}),
            // The apps topic is replayed whole at every start and holds what no other place does
            // (sandbox apps, keys made through the route, token revocations): kept for ever, and never
            // compacted (it is keyed by app: compaction would keep only each app's last event).
            ...(kafkaTopic === this.kafkaTopic('apps')
              ? { configEntries: [{ name: 'retention.ms', value: '-1' }, { name: 'retention.bytes', value: '-1' }, { name: 'cleanup.policy', value: 'delete' }] }
              : {}),
          },
        ],
      });
    } catch (err) {
      this.logger?.debug({ err, topic: kafkaTopic }, 'createTopics failed; relying on auto-creation');
    }
  }

  /** The topic, made (or, with createTopics false, found), once every partition has a leader: its partition count. */
  private async topicReady(kafkaTopic: string): Promise<number> {
    const admin = await this.connectedAdmin();
    if (this.options.createTopics === false) {
      if (!(await admin.listTopics()).includes(kafkaTopic)) {
        throw new Error(`Kafka topic ${kafkaTopic} does not exist at ${this.options.brokers.join(',')}, and a reader makes none: is KAFKA_BROKERS the service's cluster, and has the service started there?`);
      }
    } else await this.makeTopic(admin, kafkaTopic);
    const timeoutMs = this.options.topicTimeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        const { topics } = await admin.fetchTopicMetadata({ topics: [kafkaTopic] });
        const partitions = topics.find((t) => t.name === kafkaTopic)?.partitions ?? [];
        if (partitions.length > 0 && partitions.every((p) => p.leader >= 0)) return partitions.length;
      } catch (err) {
        last = err;
      }
      if (Date.now() >= deadline || this.closed) {
        throw new Error(`Kafka topic ${kafkaTopic} has no partitions after ${timeoutMs} ms`, { cause: last });
      }
      await sleep(200);
    }
  }

  private async offsets(kafkaTopic: string): Promise<Map<number, PartitionOffsets>> {
    await this.ensureTopic(kafkaTopic);
    const admin = await this.connectedAdmin();
    // kafkajs's fetchTopicOffsets throws a TypeError ("Cannot destructure property 'partitions' of
    // 'low.pop(...)'") when a broker's answer leaves the topic out, which its cached metadata can
    // make it do just after the topic was made (seen under load on the mock broker, as a test
    // helper asked a new instance for its partitions): asked again a few times before it is an error.
    for (let attempt = 1; ; attempt++) {
      try {
        const rows = await admin.fetchTopicOffsets(kafkaTopic);
        return new Map(rows.map((r) => [r.partition, { low: Number(r.low), high: Number(r.high) }]));
      } catch (err) {
        if (!(err instanceof TypeError) || attempt >= 5 || this.closed) throw err;
        await sleep(100 * attempt);
      }
    }
  }

  /**
   * Appends with a deadline. Each producer's share of the records waits for that producer's
   * request in flight to settle, then goes with every share queued behind it as one request (a
   * group commit per producer): a produce that timed out may still be written later (kafkajs keeps
   * retrying it), so nothing of its partitions is sent until it settles, and a share whose append's
   * deadline passed before it was sent is never sent. A request that fails fails only the records
   * in it (PartialAppendError when others of the append were written); later appends go on (a
   * record lands after its key's earlier records or not at all).
   */
  append(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    if (this.closed) return Promise.reject(new LogClosedError());
    if (records.length === 0) return Promise.resolve([]);
    const timeoutMs = this.options.appendTimeoutMs;
    const deadline = { passed: false };
    const kafkaTopic = this.kafkaTopic(topic);
    const sent = this.sendByProducer(kafkaTopic, records, deadline);
    if (timeoutMs === undefined) return sent;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        deadline.passed = true;
        const err = new Error(`Kafka did not acknowledge the append within ${timeoutMs} ms`);
        this.lanes.expire(kafkaTopic, deadline, err);
        reject(err);
      }, timeoutMs);
    });
    return Promise.race([sent, timeout]).finally(() => clearTimeout(timer));
  }

  private async sendByProducer(kafkaTopic: string, records: AppendRecord[], deadline: { passed: boolean }): Promise<LogPosition[]> {
    // Known after the topic's first append; until then appends wait for the same promise and go on
    // in call order (set here, not when the promise settles, so that no later append overtakes them).
    let partitions = this.partitionCounts.get(kafkaTopic);
    if (partitions === undefined) {
      partitions = await this.ensureTopic(kafkaTopic);
      this.partitionCounts.set(kafkaTopic, partitions);
    }
    return this.lanes.append(kafkaTopic, partitions, records, deadline);
  }

  /** One produce request; resolves with each partition's base offset. */
  private async produce(kafkaTopic: string, lane: number, messages: { record: AppendRecord; partition: number }[]): Promise<Map<number, number>> {
    const producer = await this.connectedProducer(lane);
    const topic = kafkaTopic.slice(this.prefix.length);
    const counts = new Map<number, number>();
    for (const { partition } of messages) counts.set(partition, (counts.get(partition) ?? 0) + 1);
    const { headers, heads } = this.chains.headersFor(topic, messages);
    this.ownValues.sent(kafkaTopic, messages, headers);
    const base = new Map<number, number>();
    try {
      const results = await producer.send({
        topic: kafkaTopic,
        acks: -1,
        messages: messages.map(({ record: r, partition }, i) => ({
          key: r.key,
          value: Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength),
          timestamp: String(r.timestamp),
          partition,
          headers: headers[i],
        })),
      });
      for (const r of results) if (r.topicName === kafkaTopic) base.set(r.partition, Number(r.baseOffset));
      for (const partition of counts.keys()) {
        const first = base.get(partition);
        if (first === undefined || !(first >= 0)) throw new Error(`Kafka returned no base offset for ${kafkaTopic}/${partition}`);
      }
    } catch (err) {
      // Written, in part, twice or not at all: these chains end here (kafka-chain.ts).
      this.chains.failed(topic, counts.keys());
      // Named in the log, so that an auditor can tell this instance's writer ids from others' (replay --verify).
      this.logger?.warn({ topic, auditWriter: this.chains.writerId }, 'a produce request failed: its partitions\' audit chains end, this instance writes on as a new chain writer');
      throw err;
    }
    this.chains.acknowledged(topic, heads, new Map([...counts].map(([partition, n]) => [partition, base.get(partition)! + n - 1])));
    // Subscriptions of this process learn the new end offsets now rather than at their next fetch.
    for (const sub of this.subscriptions) {
      if (sub.kafkaTopic !== kafkaTopic) continue;
      for (const [partition, n] of counts) sub.observe(partition, base.get(partition)! + n);
    }
    return base;
  }

  consume(options: ConsumeOptions): Subscription {
    if (this.closed) throw new LogClosedError();
    const kafkaTopic = this.kafkaTopic(options.topic);
    const subscription = KafkaSubscription.start(
      {
        kafka: this.kafka,
        kafkaTopic,
        topic: options.topic,
        ensureTopic: (t) => this.ensureTopic(t),
        offsets: (t) => this.offsets(t),
        logger: this.logger,
        fetchMaxWaitMs: this.fetchMaxWaitMs,
        sessionTimeoutMs: this.options.sessionTimeoutMs,
        retryDelayMs: this.options.retryDelayMs ?? 200,
        onStopped: (s) => {
          this.subscriptions.delete(s);
          this.departing.add(s);
          const gone = () => void this.departing.delete(s);
          s.left().then(gone, gone);
        },
        valueOf: (headers, read) => this.ownValues.valueOf(kafkaTopic, headers, read),
        ...(this.unreadable ? { admits: (record: LogRecord) => this.unreadable!.admits(kafkaTopic, record) } : {}),
        lost: (partition, from, to) => this.lostOnes.lost(options.topic, kafkaTopic, partition, from, to, options.consumer),
      },
      options,
    );
    this.subscriptions.add(subscription);
    return subscription;
  }

  async read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    if (this.closed) throw new LogClosedError();
    const kafkaTopic = this.kafkaTopic(topic);
    const range = (await this.offsets(kafkaTopic)).get(partition);
    if (!range || maxRecords <= 0) return [];
    const from = Math.max(fromOffset, range.low);
    const end = Math.min(range.high, from + maxRecords);
    if (from >= end) return [];
    return this.readerOf(topic).read(partition, from, end);
  }

  /** Records consumers left out as not the service's events, by topic and reason (GET /metrics: cm_log_records_skipped_total). */
  skippedRecords(): { topic: string; reason: string; count: number }[] {
    return this.unreadable?.skipped() ?? [];
  }

  /** Records deleted before a consumer of this process applied them, by topic (GET /metrics: cm_log_records_lost_total). */
  lostRecords(): { topic: string; count: number }[] {
    return this.lostOnes.counted();
  }

  /** Reads records with their chain headers (an audit's read: kafka-chain.ts). */
  readChained(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<KafkaChainedRecord[]> {
    return this.read(topic, partition, fromOffset, maxRecords);
  }

  /** The first offset each partition still holds (retention deletes the oldest records). */
  async lowOffsets(topic: Topic): Promise<Map<number, number>> {
    const offsets = await this.offsets(this.kafkaTopic(topic));
    return new Map([...offsets].map(([p, { low }]) => [p, low]));
  }

  async prepareReads(topic: Topic): Promise<void> {
    if (this.closed) throw new LogClosedError();
    await this.readerOf(topic).prepare();
  }

  private readerOf(topic: Topic): KafkaTopicReader {
    const kafkaTopic = this.kafkaTopic(topic);
    let reader = this.readers.get(kafkaTopic);
    if (!reader) {
      reader = new KafkaTopicReader({
        kafka: this.kafka,
        kafkaTopic,
        topic,
        groupId: `${this.clientId}-reader-${kafkaTopic}-${randomBytes(4).toString('hex')}`,
        fetchMaxWaitMs: 100,
        timeoutMs: 30_000,
        logger: this.logger,
      });
      this.readers.set(kafkaTopic, reader);
    }
    return reader;
  }

  async partitions(topic: Topic): Promise<number> {
    return (await this.offsets(this.kafkaTopic(topic))).size;
  }

  async endOffsets(topic: Topic): Promise<Map<number, number>> {
    const offsets = await this.offsets(this.kafkaTopic(topic));
    return new Map([...offsets].map(([p, { high }]) => [p, high]));
  }

  close(): Promise<void> {
    return (this.closing ??= this.closeNow());
  }

  /**
   * Closes the log, and resolves once each of its consumers has left its consumer group, or once
   * `withinMs` has passed: close() may return before a shared consumer stopped during a rebalance
   * has (KafkaSubscription.stop), the consumers the service stopped before the close included. A
   * process about to exit awaits this, so that the other instances and the next start need not
   * wait out its members' session timeout. Logs what it waits for (group-leave.ts).
   */
  async closeAndLeave(withinMs = Infinity): Promise<Left> {
    await this.close();
    return this.leaving ? this.leaving.wait(withinMs, this.logger) : { consumers: 0, stillInGroups: 0 };
  }

  private async closeNow(): Promise<void> {
    // The last heads signed before the producers go (a failure leaves them unsigned, as between two checkpoints).
    await this.checkpoints?.stop();
    this.closed = true;
    const quietly = (what: string) => (err: unknown) => this.logger?.warn({ err }, `closing the Kafka log: ${what} failed`);
    const subscriptions = [...this.subscriptions];
    this.leaving = new GroupLeave([...subscriptions, ...this.departing]);
    await Promise.all(subscriptions.map((s) => s.stop()));
    await Promise.all([...this.readers.values()].map((r) => r.close()));
    this.readers.clear();
    const producers = this.producers.splice(0, this.producers.length, ...this.producers.map(() => undefined));
    const admin = this.admin;
    this.admin = undefined;
    await Promise.all(producers.map((producer) => producer?.then((p) => p.disconnect()).catch(quietly('producer disconnect'))));
    await admin?.then((a) => a.disconnect()).catch(quietly('admin disconnect'));
  }
}
