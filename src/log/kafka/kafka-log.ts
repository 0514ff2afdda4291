import { randomBytes } from 'node:crypto';
import { Kafka, Partitioners, type Admin, type Producer } from 'kafkajs';
import type { AppendRecord, ConsumeOptions, Log, LogPosition, LogRecord, Subscription, Topic } from '../port.js';
import { partitionFor } from '../partitioner.js';
import { kafkajsLogging, type LoggerLike } from './kafka-logger.js';
import { KafkaSubscription, type PartitionOffsets } from './kafka-subscription.js';
import { KafkaTopicReader } from './kafka-reader.js';

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
  logger?: LoggerLike;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The log on Apache Kafka through kafkajs. An append is one produce request with acks from all
 * in-sync replicas, so it resolves only once durable. A key always maps to the same partition
 * (the embedded log's partitionFor), so per-key order is the log's order. Consumers start from
 * the caller's checkpoint, not from the group's committed offsets (see KafkaSubscription).
 */
export class KafkaLog implements Log {
  readonly kind = 'kafka' as const;
  private readonly kafka: Kafka;
  private readonly clientId: string;
  private readonly prefix: string;
  private readonly idempotent: boolean;
  private readonly options: KafkaLogOptions;
  private readonly logger: LoggerLike | undefined;
  private readonly fetchMaxWaitMs: number;
  private admin: Promise<Admin> | undefined;
  private producer: Promise<Producer> | undefined;
  private readonly topics = new Map<string, Promise<number>>();
  private readonly readers = new Map<string, KafkaTopicReader>();
  private readonly subscriptions = new Set<KafkaSubscription>();
  /** The produce request sent last; the next one waits for it to settle (see append). */
  private lastSend: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(options: KafkaLogOptions) {
    if (options.brokers.length === 0) throw new Error('KafkaLog needs at least one broker');
    this.options = options;
    this.clientId = options.clientId ?? 'channel-messaging';
    this.prefix = options.topicPrefix ?? '';
    this.idempotent = options.idempotent ?? true;
    this.logger = options.logger;
    this.fetchMaxWaitMs = options.fetchMaxWaitMs ?? 500;
    this.kafka = new Kafka({
      clientId: this.clientId,
      brokers: options.brokers,
      ...kafkajsLogging(options.logger),
    });
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

  private connectedProducer(): Promise<Producer> {
    return (this.producer ??= (async () => {
      const producer = this.kafka.producer({
        idempotent: this.idempotent,
        // Idempotence needs one request in flight to keep order across retries.
        ...(this.idempotent ? { maxInFlightRequests: 1 } : {}),
        allowAutoTopicCreation: true,
        // Short backoffs: a produce retried after its append timed out holds the next one back
        // (append), so once the broker is back it should be tried again within a second.
        retry: { initialRetryTime: 100, maxRetryTime: 1_000, retries: 10 },
        // Partitions are chosen here (partitionFor); naming the partitioner silences kafkajs' v2 notice.
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await producer.connect();
      return producer;
    })().catch((err) => {
      this.producer = undefined;
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
      ready = this.createTopic(kafkaTopic);
      this.topics.set(kafkaTopic, ready);
      ready.catch(() => this.topics.delete(kafkaTopic));
    }
    return ready;
  }

  private async createTopic(kafkaTopic: string): Promise<number> {
    const admin = await this.connectedAdmin();
    try {
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic: kafkaTopic,
            numPartitions: this.options.numPartitions ?? 4,
            ...(this.options.replicationFactor ? { replicationFactor: this.options.replicationFactor } : {}),
          },
        ],
      });
    } catch (err) {
      this.logger?.debug({ err, topic: kafkaTopic }, 'createTopics failed; relying on auto-creation');
    }
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
    const rows = await admin.fetchTopicOffsets(kafkaTopic);
    return new Map(rows.map((r) => [r.partition, { low: Number(r.low), high: Number(r.high) }]));
  }

  /**
   * Appends with a deadline. A produce that timed out may still be written later (kafkajs keeps
   * retrying it), so the next produce waits until it settles: records land in the order their
   * timestamps were given, and a produce that never started before its deadline is never sent.
   */
  async append(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    if (this.closed) throw new Error('log is closed');
    if (records.length === 0) return [];
    const timeoutMs = this.options.appendTimeoutMs;
    const deadline = { passed: false };
    const send = this.lastSend.then(() => {
      if (deadline.passed) throw new Error('not sent: the append had timed out while an earlier one was in flight');
      return this.produce(topic, records);
    });
    this.lastSend = send.catch(() => undefined);
    if (timeoutMs === undefined) return send;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        deadline.passed = true;
        reject(new Error(`Kafka did not acknowledge the append within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([send, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async produce(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]> {
    const kafkaTopic = this.kafkaTopic(topic);
    const partitions = await this.ensureTopic(kafkaTopic);
    const producer = await this.connectedProducer();

    // kafkajs writes one record batch per partition, in input order: a record's offset is its
    // partition's base offset plus the number of earlier records of this call in that partition.
    const counts = new Map<number, number>();
    const placed = records.map((r) => {
      const partition = partitionFor(r.key, partitions);
      const index = counts.get(partition) ?? 0;
      counts.set(partition, index + 1);
      return { partition, index };
    });
    const results = await producer.send({
      topic: kafkaTopic,
      acks: -1,
      messages: records.map((r, i) => ({
        key: r.key,
        value: Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength),
        timestamp: String(r.timestamp),
        partition: placed[i].partition,
      })),
    });
    const base = new Map<number, number>();
    for (const r of results) if (r.topicName === kafkaTopic) base.set(r.partition, Number(r.baseOffset));
    const positions = placed.map(({ partition, index }) => {
      const first = base.get(partition);
      if (first === undefined || !(first >= 0)) {
        throw new Error(`Kafka returned no base offset for ${kafkaTopic}/${partition}`);
      }
      return { partition, offset: first + index };
    });
    // Subscriptions of this process learn the new end offsets now rather than at their next fetch.
    for (const sub of this.subscriptions) {
      if (sub.kafkaTopic !== kafkaTopic) continue;
      for (const [partition, first] of base) sub.observe(partition, first + (counts.get(partition) ?? 0));
    }
    return positions;
  }

  consume(options: ConsumeOptions): Subscription {
    if (this.closed) throw new Error('log is closed');
    const subscription = KafkaSubscription.start(
      {
        kafka: this.kafka,
        kafkaTopic: this.kafkaTopic(options.topic),
        topic: options.topic,
        ensureTopic: (t) => this.ensureTopic(t),
        offsets: (t) => this.offsets(t),
        logger: this.logger,
        fetchMaxWaitMs: this.fetchMaxWaitMs,
        sessionTimeoutMs: this.options.sessionTimeoutMs,
        retryDelayMs: this.options.retryDelayMs ?? 200,
        onStopped: (s) => this.subscriptions.delete(s),
      },
      options,
    );
    this.subscriptions.add(subscription);
    return subscription;
  }

  async read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]> {
    if (this.closed) throw new Error('log is closed');
    const kafkaTopic = this.kafkaTopic(topic);
    const range = (await this.offsets(kafkaTopic)).get(partition);
    if (!range || maxRecords <= 0) return [];
    const from = Math.max(fromOffset, range.low);
    const end = Math.min(range.high, from + maxRecords);
    if (from >= end) return [];
    return this.readerOf(topic).read(partition, from, end);
  }

  async prepareReads(topic: Topic): Promise<void> {
    if (this.closed) throw new Error('log is closed');
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

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const quietly = (what: string) => (err: unknown) => this.logger?.warn({ err }, `closing the Kafka log: ${what} failed`);
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    await Promise.all([...this.readers.values()].map((r) => r.close()));
    this.readers.clear();
    const producer = this.producer;
    const admin = this.admin;
    this.producer = undefined;
    this.admin = undefined;
    await producer?.then((p) => p.disconnect()).catch(quietly('producer disconnect'));
    await admin?.then((a) => a.disconnect()).catch(quietly('admin disconnect'));
  }
}
