// The log port: every write in the service is an event appended here; every projection consumes it.
// Two adapters implement it (embedded SQLite, Kafka) and run the same contract suite
// (test/contract/log.contract.ts).

export const Topics = {
  messages: 'messages',
  presence: 'presence',
  usage: 'usage',
  apps: 'apps',
  /** The realtime gateways' connections and instances (src/realtime/connection-events.ts). */
  connections: 'connections',
  /** Signed checkpoints of the log's hash chains (src/audit/checkpoint.ts): tamper evidence for audits. */
  audit: 'audit',
} as const;
export type Topic = (typeof Topics)[keyof typeof Topics];
export const ALL_TOPICS: Topic[] = Object.values(Topics);

export interface AppendRecord {
  key: string;
  value: Uint8Array;
  /** ms since epoch; assigned by the appender so that it is monotonic per process. */
  timestamp: number;
}

export interface LogPosition {
  partition: number;
  offset: number;
}

export interface LogRecord extends AppendRecord, LogPosition {
  topic: string;
}

/** Where a consumer resumes: the next offset to read, per partition. Missing partitions start at 0. */
export type Checkpoint = Map<number, number>;

export interface ConsumeOptions {
  topic: string;
  /** Stable name of the consumer (a projection); the Kafka adapter derives its group id from it. */
  consumer: string;
  from: Checkpoint;
  /**
   * Applies one batch (records of one partition, in offset order). The adapter does not advance
   * past a batch until the promise resolves; the projection stores its own checkpoint.
   */
  handle: (records: LogRecord[]) => Promise<void> | void;
  /** Called when a batch fails; the adapter retries the batch after a pause. */
  onError?: (err: unknown) => void;
  /**
   * The processes running a consumer of this name share the topic's partitions (Kafka: one
   * consumer group named after it), each partition delivered to one of them at a time; absent,
   * this consumer gets every partition. Partitions given to this consumer start where `from` says,
   * asked at each hand-over (another process may have moved them on since); `revoked` is told of
   * those taken away. positions() and highWatermarks() hold the partitions this consumer has, and
   * caughtUp resolves once it has applied, of the first ones it was given, what the log held at
   * its start. The embedded log has one process: it delivers every partition, from `from`.
   */
  shared?: {
    from: (partitions: number[]) => Promise<Checkpoint> | Checkpoint;
    revoked?: (partitions: number[]) => void;
  };
  /**
   * The log no longer holds the records of `partition` before `next` that this consumer had yet to
   * apply (retention deleted them first): it goes on from `next`, and they count as applied (what
   * waits for positions: read-your-writes). Told before the batch from `next` on, if any comes.
   */
  lost?: (partition: number, next: number) => void;
}

export interface Subscription {
  /** Resolves once the consumer has delivered everything that was in the log when it started. */
  caughtUp: Promise<void>;
  /**
   * Resolves once the consumer reads the log: on Kafka once its group is joined and its partitions
   * sought (a shared one: its first assignment), which takes the broker's initial rebalance delay
   * (about 3 s); before that caughtUp may have resolved already (nothing to read at its start),
   * while what is appended meanwhile waits for the join. Also resolves when stopped. Absent: at
   * once (the embedded log reads without a join).
   */
  reading?: Promise<void>;
  /** Per-partition end offsets (next offset to be written), as last observed by this consumer. */
  highWatermarks(): Map<number, number>;
  /** Per-partition next offset this consumer will deliver (its lag: highWatermarks minus this). */
  positions(): Map<number, number>;
  /**
   * Partitions handed to this consumer whose start is still being asked (a shared consumer's
   * hand-over: `shared.from`), none of them applied yet, so not in `positions()` (README: A bounded
   * start, the drain). Absent or empty where every partition read has a position.
   */
  starting?(): number[];
  stop(): Promise<void>;
}

/** Records a consumer has yet to apply: the log's end as it last saw it, minus its position, over its partitions. */
export function lagOf(subscription: Pick<Subscription, 'positions' | 'highWatermarks'>): number {
  const at = subscription.positions();
  let lag = 0;
  for (const [p, end] of subscription.highWatermarks()) lag += Math.max(0, end - (at.get(p) ?? 0));
  return lag;
}

/**
 * One record seen in place: its value is bytes[start, end) of a buffer the log owns, and its key
 * where `key` says, valid during the call only (copy what is kept).
 */
export type RecordVisitor = (offset: number, timestamp: number, bytes: Uint8Array, start: number, end: number, key: RecordKeyBytes) => void;

/**
 * A visited record's key: as UTF-8 in place, keyBytes[start, end), or already decoded (`text`,
 * where the log holds records decoded); valid during the call only, like the value.
 */
export interface RecordKeyBytes {
  keyBytes: Uint8Array;
  start: number;
  end: number;
  text?: string;
}

export interface ScanResult {
  /** records visited (0: nothing from fromOffset on) */
  count: number;
  /** the offset after the last record visited */
  next: number;
  /** the last record's timestamp */
  lastTimestamp: number;
}

/**
 * An append of which some records are durable and others are not (a Kafka append whose produce
 * requests went to several partitions, one of which failed): `positions` holds each written
 * record's position and undefined for the others, so that a group commit fails only the callers
 * whose records were not written (AppendBatcher).
 */
export class PartialAppendError extends Error {
  constructor(
    message: string,
    readonly positions: (LogPosition | undefined)[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'PartialAppendError';
  }
}

/**
 * What a closed log's calls fail with: the service is stopping (a stop during the start closes the
 * log under the parts of the start still running). Expected then, and logged at debug level by
 * those parts (isLogClosed), never as a warning.
 */
export class LogClosedError extends Error {
  constructor() {
    super('log is closed');
    this.name = 'LogClosedError';
  }
}

/** Whether `err` is a closed log's refusal (LogClosedError). */
export const isLogClosed = (err: unknown): boolean => err instanceof LogClosedError;

export interface Log {
  readonly kind: 'embedded' | 'kafka';
  /**
   * How many appends may be in flight at once with each key's records still landing in call order
   * (1 when absent). What a failed append means for the ones after it is the adapter's: the
   * embedded log fails them all, the Kafka log fails none (a record lands after its key's earlier
   * records or not at all).
   */
  readonly maxAppendsInFlight?: number;
  /**
   * Appends and resolves only once every record is durable; positions in input order. May reject
   * with a PartialAppendError naming the records that were written.
   */
  append(topic: Topic, records: AppendRecord[]): Promise<LogPosition[]>;
  consume(options: ConsumeOptions): Subscription;
  /** Reads records in offset order from one partition, for replay and audits. */
  read(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<LogRecord[]>;
  /**
   * Visits records in offset order from one partition where they lie, making no LogRecord of
   * each (a rebuild's read). Optional: where it is absent, read serves.
   */
  scan?(topic: Topic, partition: number, fromOffset: number, maxRecords: number, visit: RecordVisitor): Promise<ScanResult>;
  /**
   * Makes the first read of a topic as quick as the next ones (the Kafka adapter's reader joins a
   * consumer group, some 3 s on a new group); optional, and a failure only leaves reads as they were.
   */
  prepareReads?(topic: Topic): Promise<void>;
  partitions(topic: Topic): Promise<number>;
  /**
   * The first offset each partition still holds (retention deletes the oldest records), for how
   * many records a read from offset 0 meets; optional (absent: 0).
   */
  lowOffsets?(topic: Topic): Promise<Map<number, number>>;
  /** Next offset to be written, per partition. */
  endOffsets(topic: Topic): Promise<Map<number, number>>;
  /**
   * Records its consumers left out as not the service's events (src/log/event-shape.ts), by topic
   * and reason: the Kafka log's, whose topics anyone may write to. Absent: it holds none (the
   * embedded log holds only what this service appended).
   */
  skippedRecords?(): { topic: string; reason: string; count: number }[];
  /**
   * Records deleted from the log before a consumer of this process applied them (ConsumeOptions.lost),
   * by topic, each counted once (src/log/lost-records.ts). Absent: the log never deletes what a
   * consumer has yet to read.
   */
  lostRecords?(): { topic: string; count: number }[];
  close(): Promise<void>;
  /**
   * close(), resolving once every consumer has left its group or `withinMs` (default: no bound) has
   * passed, with how many consumers there were and how many were still in their groups then (Kafka:
   * KafkaLog.closeAndLeave); absent where close() does.
   */
  closeAndLeave?(withinMs?: number): Promise<{ consumers: number; stillInGroups: number }>;
}

/** A chain head as a signed checkpoint names it (src/audit/checkpoint.ts): the link as hex; Kafka's with its writer and seq. */
export interface SignedHead {
  topic: string;
  partition: number;
  offset: number;
  link: string;
  writer?: string;
  seq?: number;
}

/**
 * What a log's checkpoints need of the witness (src/audit/witness.ts): the heads the run before
 * signed last, for the next checkpoint to carry, and word of each checkpoint appended.
 */
export interface CheckpointWitness {
  pending(): SignedHead[] | undefined;
  appended(value: Uint8Array): Promise<void> | void;
}

/**
 * How a log takes signed checkpoints of its chain heads `H` (the embedded log's per partition, Kafka's
 * per writer): signed by `sign` every `intervalMs` when a head moved; `witness` (src/audit/witness.ts)
 * holds the heads the run before signed last, which the first checkpoint after a start carries.
 */
export interface CheckpointOptions<H> {
  sign: (heads: H[], previous?: SignedHead[]) => Uint8Array;
  intervalMs: number;
  onError?: (err: unknown) => void;
  witness?: CheckpointWitness;
}
