// Exports that carry their proof, on Kafka (`replay --with-proof` in production mode), and their
// verification with no service and no broker (`replay --verify-file`). The chains are the Kafka
// log's (src/log/kafka/kafka-chain.ts: one per writer and partition, in record headers), so each
// line carries its record's headers (writer, seq, prev, link) where the embedded export carries its
// row's link: a record of the scope in full (its line as the replay prints it, its key and value), any
// other as its chain digest; the audit topic's records (the signed checkpoints) first, in full.
import type { Keyring } from './keyring.js';
import { chainDigest } from '../log/kafka/kafka-chain.js';
import type { KafkaChainedRecord } from '../log/kafka/kafka-reader.js';
import { Topics, type Topic } from '../log/port.js';
import { decodeCheckpoint } from './checkpoint.js';
import { kafkaChained, KafkaChainVerifier, type KafkaChainedLog } from './kafka-verify.js';
import { checkPrinted, EXPORT_PIECE_CHARS, ExportFormatError, exportHeader, outOfScope, partitionsOf, type ExportLine } from './export-format.js';
import { lineOf, type ScopeProgress, type ScopeRequest } from './replay-scope.js';

/** A record's chain headers as an export line carries them (hex), or `chain: "malformed"`; nothing when it has none. */
function chainFields(r: KafkaChainedRecord): Record<string, unknown> {
  if (r.chain === undefined) return {};
  if (r.chain === 'malformed') return { chain: 'malformed' };
  return { writer: r.chain.writer, seq: r.chain.seq, prev: r.chain.prev.toString('hex'), link: r.chain.link.toString('hex') };
}

interface KafkaPart {
  topic: Topic;
  partition: number;
  /** the first offset the partition still held, and its end, when the export was made */
  low: number;
  end: number;
}

/**
 * The export's lines: a header (`"log": "kafka"`, the partitions with their first and end
 * offsets, the checkpoints' public keys), the audit topic's records, then each partition of the
 * scope whole, in offset order.
 */
export async function* exportKafkaWithProof(log: KafkaChainedLog, request: ScopeRequest, onProgress: (p: ScopeProgress) => void = () => {}): AsyncGenerator<string> {
  const parts: KafkaPart[] = [];
  const lows = new Map<Topic, Map<number, number>>();
  for (const { topic, partition, end } of await partitionsOf(log, request)) {
    if (!lows.has(topic)) lows.set(topic, await log.lowOffsets(topic));
    parts.push({ topic, partition, low: lows.get(topic)!.get(partition) ?? 0, end });
  }
  // Every record of the partitions, from the first each held to its end, is read once.
  const progress: ScopeProgress = { read: 0, total: parts.reduce((n, p) => n + Math.max(0, p.end - p.low), 0), found: 0 };
  onProgress(progress);
  // The audit topic is small (a checkpoint per instance and interval): held, for the header's keys.
  const audit: KafkaChainedRecord[] = [];
  for (const { topic, partition, low, end } of parts) {
    if (topic !== Topics.audit) continue;
    for await (const records of kafkaChained(log, topic, partition, low, end)) {
      audit.push(...records);
      progress.read += records.length;
      onProgress(progress);
    }
  }
  const publicKeys = new Set<string>();
  for (const r of audit) {
    const cp = decodeCheckpoint(r.value);
    if (cp) publicKeys.add(cp.publicKey);
  }
  yield exportHeader(request, publicKeys, parts, 'kafka');
  let out = '';
  for (const r of audit) {
    if (out.length >= EXPORT_PIECE_CHARS) {
      yield out;
      out = '';
    }
    out += `${JSON.stringify({ topic: r.topic, partition: r.partition, offset: r.offset, time: r.timestamp, checkpoint: decodeCheckpoint(r.value), key: r.key, value: Buffer.from(r.value).toString('base64'), ...chainFields(r) })}\n`;
  }
  yield out;
  for (const { topic, partition, low, end } of parts) {
    if (topic === Topics.audit) continue;
    for await (const records of kafkaChained(log, topic, partition, low, end)) {
      out = '';
      for (const r of records) {
        // a piece at most EXPORT_PIECE_CHARS long (and a line): see there
        if (out.length >= EXPORT_PIECE_CHARS) {
          yield out;
          out = '';
        }
        const line = lineOf(r, request);
        const chain = chainFields(r);
        if (line) {
          progress.found++;
          out += `${JSON.stringify({ ...line, key: r.key, value: Buffer.from(r.value).toString('base64'), ...chain })}\n`;
        } else if (r.chain !== undefined && r.chain !== 'malformed') {
          out += `${JSON.stringify({ topic, partition, offset: r.offset, digest: chainDigest(r.chain.seq, r).toString('hex'), ...chain })}\n`;
        } else {
          // No chain to prove it: its content is not needed (the verifier counts it, or reports it).
          out += `${JSON.stringify({ topic, partition, offset: r.offset, ...chain })}\n`;
        }
      }
      progress.read += records.length;
      onProgress(progress);
      yield out;
    }
  }
}

const HEX_LINK = /^[0-9a-f]{64}$/;
const NO_VALUE = new Uint8Array(0);

/**
 * Checks a Kafka export's lines after its header, fed one at a time (line()), then finish(): the
 * checkpoints (the audit topic's records, which come first), each writer's chain, each record of
 * the scope as printed against its value, and each partition's offsets, from the first it held
 * to its end as the header declares them.
 */
export class KafkaExportVerifier {
  readonly verifier: KafkaChainVerifier;
  private readonly declared: KafkaPart[];
  /** the audit topic's records, chained once every checkpoint is known */
  private pending: { record: KafkaChainedRecord; digest?: Buffer }[] = [];
  private checkpointsDone = false;
  private current: KafkaPart | undefined;
  /** the next offset expected in the current partition */
  private next = 0;
  private readonly done = new Set<string>();

  constructor(
    private readonly path: string,
    header: NonNullable<ExportLine['export']>,
    private readonly scope: ScopeRequest,
    trusted: Set<string> | Keyring,
  ) {
    this.verifier = new KafkaChainVerifier(trusted);
    this.declared = (header.partitions ?? []).map((p) => ({ topic: p.topic as Topic, partition: p.partition, low: p.low ?? 0, end: p.end }));
  }

  line(line: ExportLine, n: number): void {
    const v = this.verifier;
    if (typeof line.topic !== 'string' || typeof line.partition !== 'number' || typeof line.offset !== 'number') {
      throw new ExportFormatError(`${this.path}:${n}: a record line needs topic, partition and offset`);
    }
    const place = `${line.topic}/${line.partition} offset ${line.offset}`;
    const record: KafkaChainedRecord = { topic: line.topic, partition: line.partition, offset: line.offset, key: '', timestamp: 0, value: NO_VALUE };
    if (line.chain === 'malformed') record.chain = 'malformed';
    else if (line.writer !== undefined || line.seq !== undefined || line.prev !== undefined || line.link !== undefined) {
      const wellFormed = typeof line.writer === 'string' && Number.isSafeInteger(line.seq) && (line.seq as number) >= 0 && HEX_LINK.test(String(line.prev)) && HEX_LINK.test(String(line.link));
      record.chain = wellFormed ? { writer: line.writer as string, seq: line.seq as number, prev: Buffer.from(line.prev as string, 'hex'), link: Buffer.from(line.link as string, 'hex') } : 'malformed';
    }
    let digest: Buffer | undefined;
    if (line.value !== undefined) {
      if (typeof line.key !== 'string' || typeof line.time !== 'number' || typeof line.value !== 'string') throw new ExportFormatError(`${this.path}:${n}: a record with a value needs its key and time`);
      record.key = line.key;
      record.timestamp = line.time;
      record.value = Buffer.from(line.value, 'base64');
      if (line.topic === Topics.audit) {
        const cp = decodeCheckpoint(record.value);
        if (cp) {
          if (this.checkpointsDone) throw new ExportFormatError(`${this.path}:${n}: checkpoints must come before the other records`);
          if (line.checkpoint !== undefined && JSON.stringify(line.checkpoint) !== JSON.stringify(cp)) {
            v.report(`checkpoint altered: the checkpoint at ${place} as printed is not what its value holds`);
          }
          v.checkpoint(cp, place);
        }
      } else {
        const printed = checkPrinted(line, record.value, this.scope);
        if (printed === 'changed') v.report(`record changed: ${place}: its event or credential as printed is not what its value holds`);
        else if (printed === 'out of scope') v.report(outOfScope(place));
      }
    } else if (typeof line.digest === 'string') {
      if (typeof record.chain !== 'object') throw new ExportFormatError(`${this.path}:${n}: a record given by its digest needs its chain (writer, seq, prev, link)`);
      if (!HEX_LINK.test(line.digest)) throw new ExportFormatError(`${this.path}:${n}: a digest is 64 hex digits`);
      digest = Buffer.from(line.digest, 'hex');
    } else if (typeof record.chain === 'object') {
      throw new ExportFormatError(`${this.path}:${n}: a chained record needs its value or its digest`);
    }
    if (line.topic === Topics.audit && !this.checkpointsDone) this.pending.push({ record, digest });
    else {
      this.flushCheckpoints();
      this.feed(record, digest);
    }
  }

  /** The checkpoints are all known: the audit topic's records are chained, then the others. */
  private flushCheckpoints(): void {
    if (this.checkpointsDone) return;
    this.checkpointsDone = true;
    for (const { record, digest } of this.pending) this.feed(record, digest);
    this.pending = [];
  }

  private feed(record: KafkaChainedRecord, digest: Buffer | undefined): void {
    const v = this.verifier;
    const id = `${record.topic}/${record.partition}`;
    if (!this.current || `${this.current.topic}/${this.current.partition}` !== id) {
      this.close();
      if (this.done.has(id)) throw new ExportFormatError(`${this.path}: the records of ${id} must be together, in offset order`);
      const d = this.declared.find((p) => p.topic === record.topic && p.partition === record.partition);
      if (!d) throw new ExportFormatError(`${this.path}: ${id} is not among the partitions its header declares`);
      this.current = d;
      this.next = d.low;
      v.begin(d.topic, d.partition, d.low);
    }
    if (record.offset < this.next) {
      v.report(`records out of order: ${id} offset ${record.offset} after offset ${this.next - 1}`);
      return;
    }
    if (record.offset > this.next) v.report(`records missing: ${id} offsets ${this.next} to ${record.offset - 1} (the export goes from offset ${this.next - 1} to ${record.offset})`);
    this.next = record.offset + 1;
    v.record(record, digest);
  }

  /** The current partition's lines are over: what its header declares past them is missing. */
  private close(): void {
    const d = this.current;
    if (!d) return;
    if (this.next < d.end) this.verifier.report(`records missing: the export declares ${d.topic}/${d.partition} up to offset ${d.end - 1}, its lines end at offset ${this.next - 1}`);
    this.verifier.end(d.topic, d.partition, d.end);
    this.done.add(`${d.topic}/${d.partition}`);
    this.current = undefined;
  }

  finish(): KafkaChainVerifier {
    this.flushCheckpoints();
    this.close();
    for (const d of this.declared) {
      const id = `${d.topic}/${d.partition}`;
      if (this.done.has(id)) continue;
      if (d.end > d.low) this.verifier.report(`records missing: the export declares ${id} from offset ${d.low} to ${d.end - 1}, and holds none of them`);
      this.verifier.begin(d.topic, d.partition, d.low);
      this.verifier.end(d.topic, d.partition, d.end);
    }
    return this.verifier;
  }
}
