import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { LogClosedError, type LogRecord } from '../port.js';
import type { LoggerLike } from './kafka-logger.js';
import { toLogRecord } from './kafka-subscription.js';
import { chainOf, type ChainHeaders } from './kafka-chain.js';

/** A record as read, with its place in its writer's hash chain when its headers carry one (kafka-chain.ts). */
export interface KafkaChainedRecord extends LogRecord {
  chain?: ChainHeaders | 'malformed';
}

export interface ReaderContext {
  kafka: Kafka;
  kafkaTopic: string;
  topic: string;
  groupId: string;
  fetchMaxWaitMs: number;
  timeoutMs: number;
  logger?: LoggerLike;
}

interface PendingRead {
  partition: number;
  next: number;
  end: number;
  records: LogRecord[];
  done: () => void;
  fail: (err: unknown) => void;
}

/**
 * Random access to one topic for replay and audits. kafkajs has no consumer without a group, so
 * one consumer per topic is kept, every partition paused; a read seeks one partition, resumes it
 * until the range is read, and pauses it again. Reads are served one at a time.
 */
export class KafkaTopicReader {
  private consumer: Consumer | undefined;
  private starting: Promise<void> | undefined;
  private current: PendingRead | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Consumers started so far; each one joins a group of its own (as KafkaSubscription's do). */
  private generation = 0;

  constructor(private readonly ctx: ReaderContext) {}

  /** Records [from, end) of one partition, at most `end - from`; `from` must be at or after the low watermark. */
  read(partition: number, from: number, end: number): Promise<LogRecord[]> {
    const result = this.queue.then(() => this.readNow(partition, from, end));
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** Joins the reader's group now rather than on the first read. */
  prepare(): Promise<void> {
    const result = this.queue.then(() => (this.closed ? undefined : this.start()));
    this.queue = result.catch(() => undefined);
    return result;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    const consumer = this.consumer;
    this.consumer = undefined;
    this.starting = undefined;
    await consumer?.disconnect().catch(() => undefined);
  }

  private start(): Promise<void> {
    return (this.starting ??= this.startConsumer().catch(async (err) => {
      const consumer = this.consumer;
      this.consumer = undefined;
      this.starting = undefined;
      await consumer?.disconnect().catch(() => undefined);
      throw err;
    }));
  }

  private async startConsumer(): Promise<void> {
    const { kafka, kafkaTopic } = this.ctx;
    const generation = this.generation++;
    const consumer = kafka.consumer({
      groupId: generation === 0 ? this.ctx.groupId : `${this.ctx.groupId}.${generation}`,
      maxWaitTimeInMs: this.ctx.fetchMaxWaitMs,
      allowAutoTopicCreation: false,
      // A crashed consumer is dropped and the next read starts a new one (see the CRASH handler).
      retry: { retries: 5, restartOnFailure: async () => false },
    });
    this.consumer = consumer;
    let joined!: () => void;
    let failedToJoin!: (err: unknown) => void;
    const hasJoined = new Promise<void>((resolve, reject) => {
      joined = resolve;
      failedToJoin = reject;
    });
    hasJoined.catch(() => undefined); // awaited below, unless connect or subscribe failed first
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.ctx.logger?.warn({ err: payload.error, topic: kafkaTopic }, 'kafka reader crashed; the next read starts a new one');
      if (this.consumer !== consumer) return;
      this.consumer = undefined;
      this.starting = undefined;
      void consumer.disconnect().catch(() => undefined);
      failedToJoin(payload.error);
      this.current?.fail(payload.error);
    });
    consumer.on(consumer.events.GROUP_JOIN, () => {
      // Nothing is fetched but the partition being read; a rejoin restarts that read where it was.
      consumer.pause([{ topic: kafkaTopic }]);
      const current = this.current;
      if (current) {
        consumer.resume([{ topic: kafkaTopic, partitions: [current.partition] }]);
        consumer.seek({ topic: kafkaTopic, partition: current.partition, offset: String(current.next) });
      }
      joined();
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [kafkaTopic], fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: (p) => this.onBatch(p) });
    await hasJoined;
  }

  private async readNow(partition: number, from: number, end: number): Promise<LogRecord[]> {
    if (this.closed) throw new LogClosedError();
    if (from >= end) return [];
    await this.start();
    const consumer = this.consumer!;
    const { kafkaTopic } = this.ctx;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<LogRecord[]>((resolve, reject) => {
        const current: PendingRead = { partition, next: from, end, records: [], done: () => resolve(current.records), fail: reject };
        this.current = current;
        timer = setTimeout(
          () => reject(new Error(`reading ${kafkaTopic}/${partition} from ${from} timed out after ${this.ctx.timeoutMs} ms at ${current.next}`)),
          this.ctx.timeoutMs,
        );
        consumer.seek({ topic: kafkaTopic, partition, offset: String(from) });
        consumer.resume([{ topic: kafkaTopic, partitions: [partition] }]);
      });
    } finally {
      clearTimeout(timer);
      this.current = undefined;
      if (this.consumer === consumer) consumer.pause([{ topic: kafkaTopic }]);
    }
  }

  private async onBatch({ batch, resolveOffset, isStale }: EachBatchPayload): Promise<void> {
    const current = this.current;
    // A batch fetched before the latest seek, or for a partition nobody is reading, is not ours.
    if (!current || batch.partition !== current.partition || isStale()) return;
    for (const m of batch.messages) {
      const offset = Number(m.offset);
      if (offset < current.next) continue;
      if (offset !== current.next) {
        this.ctx.logger?.warn({ topic: this.ctx.kafkaTopic, partition: current.partition, expected: current.next, got: offset }, 'kafka read skipped offsets');
      }
      if (offset >= current.end) break;
      const record: KafkaChainedRecord = toLogRecord(this.ctx.topic, batch.partition, m);
      const chain = chainOf(m.headers);
      if (chain) record.chain = chain;
      current.records.push(record);
      current.next = offset + 1;
    }
    resolveOffset(String(current.next - 1));
    if (current.next >= current.end) current.done();
  }
}
