// The Kafka log's hash chains (tamper evidence, README: Replay for audits). Several service
// instances produce to the same partition, each with no knowledge of the others' records, so one
// chain per partition computed by producers would race. Instead each KafkaLog is a *writer* with an
// id of its own (random, new at each start and after a failed produce), and keeps one chain per
// (writer, topic, partition), numbered by a sequence of its own:
//   digest(s) = SHA-256(s as 8 bytes big-endian, the record in its canonical form: chain.mjs)
//   link(s)   = SHA-256(link(s - 1), digest(s)),  link(-1) = SHA-256("channel-messaging kafka chain v1\n" writer \n topic \n partition \n)
// carried in each record's headers: cm-chain-writer, cm-chain-seq (decimal), cm-chain-prev and
// cm-chain-link (32 bytes each). Prev is link(s - 1) again, so that a record whose predecessors
// retention deleted still proves its own content. The genesis link binds a chain to its writer and
// partition: a record moved to another partition breaks both chains.
import { createHash, randomBytes } from 'node:crypto';
import type { IHeaders } from 'kafkajs';
import { nextLink, recordDigest, LINK_BYTES } from '../embedded/chain.mjs';
import { packedBound, packSegmentInto } from '../embedded/segment.js';
import { Topics, type AppendRecord, type CheckpointOptions as Options } from '../port.js';

export const CHAIN_HEADERS = { writer: 'cm-chain-writer', seq: 'cm-chain-seq', prev: 'cm-chain-prev', link: 'cm-chain-link' } as const;

/** A record's place in its writer's chain, as its headers carry it. */
export interface ChainHeaders {
  writer: string;
  seq: number;
  prev: Buffer;
  link: Buffer;
}

/** The link before a writer's first record in a topic partition. */
export const genesisLink = (writer: string, topic: string, partition: number): Buffer =>
  createHash('sha256').update(`channel-messaging kafka chain v1\n${writer}\n${topic}\n${partition}\n`).digest();

/** where chainDigest packs a record (grown for a larger one) */
let scratch = Buffer.allocUnsafe(64 * 1024);
const one: AppendRecord[] = [undefined!];

/** digest(seq) of a record: its canonical form is the embedded log's (chain.mjs), the sequence in place of the offset. */
export function chainDigest(seq: number, record: AppendRecord): Buffer {
  one[0] = record;
  const bound = packedBound(one);
  if (bound > scratch.length) scratch = Buffer.allocUnsafe(bound);
  const end = packSegmentInto(one, scratch, 0);
  return recordDigest(seq, scratch, 5, end);
}

/** The chain headers of a record as read, or undefined when it has none (or they are not well formed: `malformed`). */
export function chainOf(headers: IHeaders | undefined): ChainHeaders | 'malformed' | undefined {
  if (!headers) return undefined;
  const writer = headers[CHAIN_HEADERS.writer];
  const seq = headers[CHAIN_HEADERS.seq];
  const prev = headers[CHAIN_HEADERS.prev];
  const link = headers[CHAIN_HEADERS.link];
  if (writer === undefined && seq === undefined && prev === undefined && link === undefined) return undefined;
  if (!Buffer.isBuffer(writer) || !Buffer.isBuffer(seq) || !Buffer.isBuffer(prev) || !Buffer.isBuffer(link)) return 'malformed';
  const s = Number(seq.toString('latin1'));
  if (!Number.isSafeInteger(s) || s < 0 || prev.length !== LINK_BYTES || link.length !== LINK_BYTES) return 'malformed';
  return { writer: writer.toString('utf8'), seq: s, prev, link };
}

/** A chain's newest acknowledged record: what a checkpoint signs. */
export interface WriterHead {
  topic: string;
  partition: number;
  writer: string;
  seq: number;
  /** the offset Kafka gave it */
  offset: number;
  link: Buffer;
}

interface ChainState {
  writer: string;
  /** the next record's sequence */
  seq: number;
  link: Buffer;
}

/**
 * The producer side: the chain headers of each record as it goes into a produce request, and the
 * heads Kafka acknowledged. A KafkaLog sends one request at a time per partition (its lanes), so a
 * partition's chain is extended in the order Kafka writes it. A request that fails may have been
 * written, in part, twice or not at all: its partitions' chains end there and go on under a new
 * writer id (fail), so that what follows never claims a predecessor that may not exist.
 */
export class ProducerChains {
  private readonly chains = new Map<string, ChainState>();
  /** per topic partition, the newest acknowledged head (by chain: writer ids change) */
  private readonly acked = new Map<string, WriterHead>();
  private writer = newWriterId();
  /** per topic partition, the head last signed (writer and seq) */
  private readonly signed = new Map<string, string>();

  get writerId(): string {
    return this.writer;
  }

  /** The headers of a request's records (in request order; a partition's in the order Kafka writes them). */
  headersFor(topic: string, messages: { record: AppendRecord; partition: number }[]): { headers: IHeaders[]; heads: Map<number, { writer: string; seq: number; link: Buffer }> } {
    const headers: IHeaders[] = new Array(messages.length);
    const heads = new Map<number, { writer: string; seq: number; link: Buffer }>();
    for (let i = 0; i < messages.length; i++) {
      const { record, partition } = messages[i];
      const id = `${topic}/${partition}`;
      let state = this.chains.get(id);
      if (!state) this.chains.set(id, (state = { writer: this.writer, seq: 0, link: genesisLink(this.writer, topic, partition) }));
      const seq = state.seq;
      const prev = state.link;
      // nextLink answers in a buffer of its own each call (crypto.hash), never a shared one.
      const link = nextLink(prev, chainDigest(seq, record));
      headers[i] = { [CHAIN_HEADERS.writer]: state.writer, [CHAIN_HEADERS.seq]: String(seq), [CHAIN_HEADERS.prev]: prev, [CHAIN_HEADERS.link]: link };
      state.seq = seq + 1;
      state.link = link;
      heads.set(partition, { writer: state.writer, seq, link });
    }
    return { headers, heads };
  }

  /** Kafka acknowledged a request: its partitions' last records (`heads`) at `lastOffsets`. */
  acknowledged(topic: string, heads: Map<number, { writer: string; seq: number; link: Buffer }>, lastOffsets: Map<number, number>): void {
    for (const [partition, head] of heads) {
      const offset = lastOffsets.get(partition);
      if (offset !== undefined) this.acked.set(`${topic}/${partition}`, { topic, partition, ...head, offset });
    }
  }

  /** A request failed: the chains of its partitions end (a new writer id from now on). */
  failed(topic: string, partitions: Iterable<number>): void {
    this.writer = newWriterId();
    for (const partition of partitions) this.chains.delete(`${topic}/${partition}`);
  }

  /** The acknowledged heads not yet signed (a checkpoint's), of every topic but `except`. */
  headsToSign(except: string): WriterHead[] {
    const out: WriterHead[] = [];
    for (const [id, head] of this.acked) {
      if (head.topic !== except && this.signed.get(id) !== `${head.writer} ${head.seq}`) out.push(head);
    }
    return out;
  }

  /** A checkpoint of these heads is in the log. */
  markSigned(heads: WriterHead[]): void {
    for (const h of heads) this.signed.set(`${h.topic}/${h.partition}`, `${h.writer} ${h.seq}`);
  }
}

const newWriterId = (): string => `w${randomBytes(6).toString('hex')}`;

export type CheckpointOptions = Options<WriterHead>;

/**
 * A writer's signed checkpoints: every intervalMs, when a head moved, its acknowledged heads
 * signed (`sign`) and appended (`append`: to the `audit` topic), one at a time; once more at stop.
 */
export class ChainCheckpoints {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly chains: ProducerChains,
    private readonly options: CheckpointOptions,
    private readonly append: (value: Uint8Array) => Promise<unknown>,
  ) {
    this.timer = setInterval(() => void this.checkpoint().catch((err) => options.onError?.(err)), options.intervalMs);
    this.timer.unref();
  }

  /** Appends a checkpoint of the heads not signed yet, if any, after the one in flight. */
  checkpoint(): Promise<void> {
    const next = this.running.then(async () => {
      const heads = this.chains.headsToSign(Topics.audit);
      const previous = this.options.witness?.pending();
      if (heads.length === 0 && !previous) return;
      const value = this.options.sign(heads, previous);
      await this.append(value);
      this.chains.markSigned(heads);
      await this.options.witness?.appended(value);
    });
    this.running = next.catch(() => undefined);
    return next;
  }

  /** The last checkpoint (a failure is reported to onError: those heads stay unsigned, as between two checkpoints). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    await this.checkpoint().catch((err) => this.options.onError?.(err));
  }
}
