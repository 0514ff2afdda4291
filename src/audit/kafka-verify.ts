// Verifying the Kafka log's hash chains (src/log/kafka/kafka-chain.ts: one per writer, that is per
// producing instance, and topic partition, carried in record headers) and the signed checkpoints of
// their heads: `replay --verify` in production mode. Each partition is read whole, in offset order,
// after the checkpoints; the records of several writers interleave in it, each writer's chain is
// followed on its own.
import type { Keyring } from './keyring.js';
import { nextLink } from '../log/embedded/chain.mjs';
import { chainDigest, genesisLink } from '../log/kafka/kafka-chain.js';
import type { KafkaChainedRecord } from '../log/kafka/kafka-reader.js';
import { Topics, type Topic } from '../log/port.js';
import { ChainVerifier, type UnsignedTail } from './verify.js';
import { decodeCheckpoint } from './checkpoint.js';
import { partitionsOf } from './export-format.js';
import { inScope, type ScopeRequest } from './replay-scope.js';

interface WriterState {
  first: number;
  last: number;
  lastOffset: number;
  /** the link the last record's headers carry */
  stored: Buffer;
  /** the chain as computed from the records, from the first one seen (anchored at its prev) */
  computed: Buffer;
}

interface KafkaPartitionState {
  /** retention deleted its first records: a writer's chain may start past seq 0 */
  trimmed: boolean;
  /** the first offset it still held */
  low: number;
  /** a record with chain headers was seen: one without them after it was not appended by the service */
  chained: boolean;
}

const where = (topic: string, partition: number, offset: number): string => `${topic}/${partition} offset ${offset}`;

export class KafkaChainVerifier extends ChainVerifier {
  private readonly writers = new Map<string, WriterState>();
  private readonly kafkaPartitions = new Map<string, KafkaPartitionState>();

  /** A partition is about to be read from `low`, its first offset still held. */
  begin(topic: string, partition: number, low: number): void {
    this.kafkaPartitions.set(`${topic}/${partition}`, { trimmed: low > 0, low, chained: false });
  }

  /** A record in offset order; `given`: its chain digest, where an export holds the digest instead of the record. */
  record(r: KafkaChainedRecord, given?: Buffer): void {
    this.records++;
    const pid = `${r.topic}/${r.partition}`;
    let p = this.kafkaPartitions.get(pid);
    if (!p) this.kafkaPartitions.set(pid, (p = { trimmed: false, low: 0, chained: false }));
    const place = where(r.topic, r.partition, r.offset);
    if (r.chain === undefined) {
      if (p.chained) this.report(`record not chained: ${place} carries no chain headers, after records that do (it was not appended by the service)`);
      else this.unchained++;
      return;
    }
    if (r.chain === 'malformed') {
      this.report(`record changed: ${place} carries chain headers that are not well formed`);
      return;
    }
    p.chained = true;
    const { writer, seq, prev, link } = r.chain;
    const wid = `${pid}/${writer}`;
    const digest = given ?? chainDigest(seq, r);
    const own = nextLink(prev, digest);
    if (!own.equals(link)) this.report(`record changed: ${place} (writer ${writer} seq ${seq}) does not give the link its headers carry (its key, time or value was altered)`);
    let w = this.writers.get(wid);
    if (!w) {
      if (seq === 0) {
        if (!prev.equals(genesisLink(writer, r.topic, r.partition))) {
          this.report(`chain broken: ${place} is writer ${writer}'s first record in ${pid} but does not follow the start of its chain there (moved from another partition, or forged)`);
        }
      } else if (!p.trimmed) {
        this.report(`records missing: writer ${writer}'s chain in ${pid} starts at seq ${seq} (${place}) though the partition is whole from offset 0: its seqs 0 to ${seq - 1} are gone`);
      }
      this.writers.set(wid, (w = { first: seq, last: seq, lastOffset: r.offset, stored: link, computed: own }));
    } else {
      if (seq <= w.last) {
        if (seq === w.last && link.equals(w.stored)) {
          this.report(`record duplicated: ${place} repeats writer ${writer} seq ${seq} of offset ${w.lastOffset} (a forged copy, or a produce retried without an idempotent producer)`);
        } else {
          this.report(`records out of order: ${place} is writer ${writer} seq ${seq}, after its seq ${w.last} at offset ${w.lastOffset} (re-ordered or forged)`);
        }
        return;
      }
      if (seq > w.last + 1) {
        this.report(`records missing: writer ${writer}'s seqs ${w.last + 1} to ${seq - 1} in ${pid} (between offsets ${w.lastOffset} and ${r.offset})`);
        w.computed = own;
      } else {
        if (!prev.equals(w.stored)) {
          this.report(`chain broken: ${place} follows a link that is not the one of writer ${writer}'s record before it (offset ${w.lastOffset}): a record was changed or replaced`);
        }
        w.computed = nextLink(w.computed, digest);
      }
      w.last = seq;
      w.lastOffset = r.offset;
      w.stored = link;
    }
    const heads = this.wanted.get(wid)?.get(seq);
    if (heads) {
      const got = w.computed.toString('hex');
      for (const h of heads) {
        if (h.link === got) this.headsMatched++;
        else this.report(`checkpoint does not match: ${h.checkpoint} gives writer ${writer} seq ${seq} (${place}) the link ${h.link.slice(0, 16)}…, the records give ${got.slice(0, 16)}… (records up to it were changed, or their links rewritten)`);
      }
    }
  }

  /** The partition was read to its end: checkpoint heads past a writer's last record there mean records missing at its end. */
  override end(topic: string, partition: number, end: number): void {
    const pid = `${topic}/${partition}`;
    const trimmed = this.kafkaPartitions.get(pid)?.trimmed ?? false;
    for (const [id, seqs] of this.wanted) {
      if (!id.startsWith(`${pid}/`)) continue;
      const writer = id.slice(pid.length + 1);
      const w = this.writers.get(id);
      for (const [seq, heads] of seqs) {
        if (w ? seq > w.last : !trimmed) {
          const seen = w ? `its chain there ends at seq ${w.last} (offset ${w.lastOffset})` : 'no record of it is there';
          this.report(`records missing: ${heads[0].checkpoint} names writer ${writer} seq ${seq} in ${pid}, but ${seen}; the partition ends at offset ${end}`);
        }
      }
    }
  }

  /** Records after the newest checkpoint head of their writer's chain: chained, not signed yet. */
  override unsignedTails(): UnsignedTail[] {
    const out: UnsignedTail[] = [];
    for (const [id, w] of this.writers) {
      if (id.startsWith(`${Topics.audit}/`)) continue;
      const named = this.wanted.get(id);
      const signed = Math.max(-1, ...(named?.keys() ?? []));
      const from = Math.max(signed + 1, w.first);
      if (w.last >= from) out.push({ chain: id, count: w.last - from + 1, from, to: w.last, unit: 'seqs', ...(named ? {} : { neverSigned: true }) });
    }
    return out;
  }

  /** Partitions read from past offset 0 (retention, or a cut: the chains cannot tell), with the checkpoint heads naming seqs before each writer's first there. */
  override laterStarts(): { chain: string; first: number; heads: number }[] {
    const out: { chain: string; first: number; heads: number }[] = [];
    for (const [pid, p] of this.kafkaPartitions) {
      if (!p.trimmed) continue;
      let heads = 0;
      for (const [id, seqs] of this.wanted) {
        if (!id.startsWith(`${pid}/`)) continue;
        const first = this.writers.get(id)?.first ?? Infinity;
        for (const [seq, list] of seqs) if (seq < first) heads += list.length;
      }
      out.push({ chain: pid, first: p.low, heads });
    }
    return out;
  }

  override summary(): string {
    const never = this.unsignedTails().filter((t) => t.neverSigned);
    const count = never.reduce((n, t) => n + t.count, 0);
    return never.length === 0 ? super.summary() : `${super.summary()}; ${count} of them of writers no signed checkpoint names at all`;
  }

  /** Writers (producing instances, one per start) seen. */
  writerCount(): number {
    return new Set([...this.writers.keys()].map((id) => id.slice(id.lastIndexOf('/') + 1))).size;
  }
}

/** What verifyKafkaLog reads: the Kafka log (KafkaLog) with its chain headers. */
export interface KafkaChainedLog {
  readonly kind: 'kafka';
  readChained(topic: Topic, partition: number, fromOffset: number, maxRecords: number): Promise<KafkaChainedRecord[]>;
  lowOffsets(topic: Topic): Promise<Map<number, number>>;
  partitions(topic: Topic): Promise<number>;
  endOffsets(topic: Topic): Promise<Map<number, number>>;
}

export const isKafkaChained = (log: { kind: string }): log is KafkaChainedLog => log.kind === 'kafka' && typeof (log as Partial<KafkaChainedLog>).readChained === 'function';

export async function* kafkaChained(log: KafkaChainedLog, topic: Topic, partition: number, low: number, end: number, batch = 5000): AsyncGenerator<KafkaChainedRecord[]> {
  for (let offset = low; offset < end; ) {
    const records = await log.readChained(topic, partition, offset, Math.min(batch, end - offset));
    if (records.length === 0) break;
    yield records;
    offset = records[records.length - 1].offset + 1;
  }
}

/** Verifies the chains and checkpoints of every partition the request reads, whole, and of the audit topic, on Kafka. */
export async function verifyKafkaLog(log: KafkaChainedLog, request: ScopeRequest, trusted: Set<string> | Keyring, onRecords: (n: number) => void = () => {}): Promise<KafkaChainVerifier> {
  const verifier = new KafkaChainVerifier(trusted);
  const parts = await partitionsOf(log, request);
  const lows = new Map<Topic, Map<number, number>>();
  const lowOf = async (topic: Topic, partition: number): Promise<number> => {
    if (!lows.has(topic)) lows.set(topic, await log.lowOffsets(topic));
    return lows.get(topic)!.get(partition) ?? 0;
  };
  for (const { topic, partition, end } of parts) {
    if (topic !== Topics.audit) continue;
    for await (const records of kafkaChained(log, topic, partition, await lowOf(topic, partition), end)) {
      for (const r of records) {
        const cp = decodeCheckpoint(r.value);
        if (cp) verifier.checkpoint(cp, where(r.topic, r.partition, r.offset));
      }
    }
  }
  for (const { topic, partition, end } of parts) {
    const low = await lowOf(topic, partition);
    verifier.begin(topic, partition, low);
    for await (const records of kafkaChained(log, topic, partition, low, end)) {
      for (const r of records) {
        verifier.record(r);
        if (topic !== Topics.audit && inScope(r, request)) verifier.inScope++;
      }
      onRecords(records.length);
    }
    verifier.end(topic, partition, end);
  }
  return verifier;
}
