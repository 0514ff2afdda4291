// The Kafka log's hash chains (tamper evidence, README: Replay for audits). Several service
// instances produce to the same partition, each with no knowledge of the others' records, so one
// chain per partition computed by producers would race. Instead each KafkaLog is a *writer* with an
// id of its own (random, new at each start and after a failed produce), and keeps one chain per
// (writer, topic, partition), numbered by a sequence of its own:
//   digest(s) = SHA-256(s as 8 bytes big-endian, the record in its canonical form: chain.mjs)
//   link(s)   = SHA-256(link(s - 1), digest(s)),  link(-1) = SHA-256("channel-messaging kafka chain v1\n" writer \n topic \n partition \n)
// carried in one header of each record, cm-chain: format 1 (1 byte), s (8 bytes big-endian),
// link(s - 1) and link(s) (32 bytes each), the writer id (UTF-8, the rest). Prev is link(s - 1) again,
// so that a record whose predecessors retention deleted still proves its own content. The genesis
// link binds a chain to its writer and partition: a record moved to another partition breaks both
// chains. Versions before carried the same four fields in four headers (CHAIN_HEADERS_V0): one header
// is one encoding and one decoding per record instead of four, on the publish path and in every
// consumer; records in that format are still read (chainOf), for the logs they wrote.
import { createHash, randomBytes } from 'node:crypto';
import type { IHeaders } from 'kafkajs';
import { nextLink, recordDigest, LINK_BYTES } from '../embedded/chain.mjs';
import { packedBound, packSegmentInto } from '../embedded/segment.js';
import { Topics, type AppendRecord, type CheckpointOptions as Options } from '../port.js';

/** The header that carries a record's place in its writer's chain. */
export const CHAIN_HEADER = 'cm-chain';
/** The chain's headers before CHAIN_HEADER: read still, never written (seq in decimal). */
export const CHAIN_HEADERS_V0 = { writer: 'cm-chain-writer', seq: 'cm-chain-seq', prev: 'cm-chain-prev', link: 'cm-chain-link' } as const;

const FORMAT = 1;
/** where each field of CHAIN_HEADER's value starts: the writer id is the rest */
const AT = { seq: 1, prev: 9, link: 9 + LINK_BYTES, writer: 9 + 2 * LINK_BYTES } as const;
/** Where link(s) starts in CHAIN_HEADER's value (kafka-own-values.ts finds a record by it). */
export const CHAIN_LINK_AT = AT.link;

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

/** CHAIN_HEADER's value for a record: `writer` is the writer id's UTF-8 bytes. */
export function encodeChainHeader(writer: Buffer, seq: number, prev: Buffer, link: Buffer): Buffer {
  const out = Buffer.allocUnsafe(AT.writer + writer.length);
  out[0] = FORMAT;
  out.writeUInt32BE(Math.floor(seq / 0x1_0000_0000), AT.seq);
  out.writeUInt32BE(seq >>> 0, AT.seq + 4);
  out.set(prev, AT.prev);
  out.set(link, AT.link);
  out.set(writer, AT.writer);
  return out;
}

/**
 * The chain of a record as its headers carry it (CHAIN_HEADER, or the four CHAIN_HEADERS_V0 of
 * earlier versions), undefined when they carry none, `malformed` when they are not well formed
 * (both formats at once included).
 */
export function chainOf(headers: IHeaders | undefined): ChainHeaders | 'malformed' | undefined {
  if (!headers) return undefined;
  const one = headers[CHAIN_HEADER];
  const writer = headers[CHAIN_HEADERS_V0.writer];
  const seq = headers[CHAIN_HEADERS_V0.seq];
  const prev = headers[CHAIN_HEADERS_V0.prev];
  const link = headers[CHAIN_HEADERS_V0.link];
  const v0 = writer !== undefined || seq !== undefined || prev !== undefined || link !== undefined;
  if (one !== undefined) return v0 ? 'malformed' : decodeChainHeader(one);
  if (!v0) return undefined;
  if (!Buffer.isBuffer(writer) || !Buffer.isBuffer(seq) || !Buffer.isBuffer(prev) || !Buffer.isBuffer(link)) return 'malformed';
  const digits = seq.toString('latin1');
  const s = Number(digits);
  if (!DECIMAL.test(digits) || !Number.isSafeInteger(s) || prev.length !== LINK_BYTES || link.length !== LINK_BYTES) return 'malformed';
  const id = writer.toString('latin1');
  return WRITER_ID.test(id) ? { writer: id, seq: s, prev, link } : 'malformed';
}

/** A writer id as newWriterId makes them, the only form there has been. */
const WRITER_ID = /^w[0-9a-f]{12}$/;
const WRITER_ID_BYTES = 13;
const DECIMAL = /^(0|[1-9][0-9]*)$/;

function decodeChainHeader(value: IHeaders[string]): ChainHeaders | 'malformed' {
  if (!Buffer.isBuffer(value) || value.length !== AT.writer + WRITER_ID_BYTES || value[0] !== FORMAT) return 'malformed';
  const seq = value.readUInt32BE(AT.seq) * 0x1_0000_0000 + value.readUInt32BE(AT.seq + 4);
  const writer = value.toString('latin1', AT.writer);
  if (!Number.isSafeInteger(seq) || !WRITER_ID.test(writer)) return 'malformed';
  return { writer, seq, prev: value.subarray(AT.prev, AT.link), link: value.subarray(AT.link, AT.writer) };
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
  /** the writer id's UTF-8 bytes, as CHAIN_HEADER carries it */
  writerBytes: Buffer;
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
  /**
   * per chain (topic, partition and writer), the newest acknowledged head: a chain ended by a failed
   * request keeps its head here until a checkpoint has signed it, the new writer's beside it
   */
  private readonly acked = new Map<string, WriterHead>();
  private writer = newWriterId();
  /** per chain, the head last signed (writer and seq) */
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
      if (!state) this.chains.set(id, (state = { writer: this.writer, writerBytes: Buffer.from(this.writer), seq: 0, link: genesisLink(this.writer, topic, partition) }));
      const seq = state.seq;
      const prev = state.link;
      // nextLink answers in a buffer of its own each call (crypto.hash), never a shared one.
      const link = nextLink(prev, chainDigest(seq, record));
      headers[i] = { [CHAIN_HEADER]: encodeChainHeader(state.writerBytes, seq, prev, link) };
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
      if (offset !== undefined) this.acked.set(`${topic}/${partition}/${head.writer}`, { topic, partition, ...head, offset });
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

  /** A checkpoint of these heads is in the log: an ended chain's, signed, is forgotten. */
  markSigned(heads: WriterHead[]): void {
    for (const h of heads) {
      const id = `${h.topic}/${h.partition}/${h.writer}`;
      if (this.chains.get(`${h.topic}/${h.partition}`)?.writer === h.writer) this.signed.set(id, `${h.writer} ${h.seq}`);
      else if (this.acked.get(id)?.seq === h.seq) {
        this.acked.delete(id);
        this.signed.delete(id);
      } else this.signed.set(id, `${h.writer} ${h.seq}`);
    }
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
