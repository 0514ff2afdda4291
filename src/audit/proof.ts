// Tamper evidence for the audit replay: `replay --verify` checks the log's chains and signed
// checkpoints where the log is; `replay --with-proof` writes an export that carries them (every
// record's link, the records of the scope in full, the others as digests, the checkpoints and
// their public keys); `replay --verify-file` checks such an export with no service and no log.
// The embedded log's here; Kafka's (its writers' chains, in record headers) in kafka-proof.ts.
import type { Keyring } from './keyring.js';
import { Topics, type Log, type Topic } from '../log/port.js';
import type { ChainedRecord } from '../log/embedded/embedded-log.js';
import { decodeCheckpoint, type AuditCheckpoint } from './checkpoint.js';
import { ChainVerifier, digestOf, type ChainEntry } from './verify.js';
import { inScope, lineOf, recordsIn, type ScopeProgress, type ScopeRequest } from './replay-scope.js';
import { checkHeader, checkPrinted, checkRecordLine, EXPORT_PIECE_CHARS, EXPORT_VERSION, ExportFormatError, exportHeader, exportLines, HEX_LINK, outOfScope, parseExportLine, partitionsOf, scopeOf } from './export-format.js';
import { KafkaExportVerifier } from './kafka-proof.js';

export { ExportFormatError };

/** A log whose records can be read with their links (the embedded log). */
export interface ChainedLog extends Log {
  readChained(topic: Topic, partition: number, fromOffset: number, maxRecords: number): ChainedRecord[];
}

export const hasChains = (log: Log): log is ChainedLog => log.kind === 'embedded' && typeof (log as Partial<ChainedLog>).readChained === 'function';


async function* chained(log: ChainedLog, topic: Topic, partition: number, end: number, batch = 5000): AsyncGenerator<ChainedRecord[]> {
  // From the first record the log still holds (retention deletes the oldest rows).
  for (let offset = 0; offset < end; ) {
    const records = log.readChained(topic, partition, offset, Math.min(batch, end - offset));
    if (records.length === 0) break;
    yield records;
    offset = records[records.length - 1].offset + 1;
  }
}

const entryOf = (r: ChainedRecord): ChainEntry =>
  r.unreadable
    ? { topic: r.topic, partition: r.partition, offset: r.offset, digest: Buffer.alloc(32), unreadable: true }
    : { topic: r.topic, partition: r.partition, offset: r.offset, digest: digestOf(r.offset, r.key, r.timestamp, r.value), link: r.link, prev: r.prev };


/** The checkpoints of the audit topic, in log order. */
async function checkpointsOf(log: ChainedLog, parts: { topic: Topic; partition: number; end: number }[]): Promise<{ cp: AuditCheckpoint; record: ChainedRecord }[]> {
  const out: { cp: AuditCheckpoint; record: ChainedRecord }[] = [];
  for (const { topic, partition, end } of parts) {
    if (topic !== Topics.audit) continue;
    for await (const records of chained(log, topic, partition, end)) {
      for (const record of records) {
        const cp = decodeCheckpoint(record.value);
        if (cp) out.push({ cp, record });
      }
    }
  }
  return out;
}

/** Verifies the chains and checkpoints of every partition the request reads, whole, where the log is. */
export async function verifyLog(log: ChainedLog, request: ScopeRequest, trusted: Set<string> | Keyring, onRecords: (n: number) => void = () => {}): Promise<ChainVerifier> {
  const verifier = new ChainVerifier(trusted);
  const parts = await partitionsOf(log, request);
  for (const { cp, record } of await checkpointsOf(log, parts)) verifier.checkpoint(cp, `${record.topic}/${record.partition} offset ${record.offset}`);
  for (const { topic, partition, end } of parts) {
    for await (const records of chained(log, topic, partition, end)) {
      for (const r of records) {
        verifier.entry(entryOf(r));
        if (topic !== Topics.audit && !r.unreadable && inScope(r, request)) verifier.inScope++;
      }
      onRecords(records.length);
    }
    verifier.end(topic, partition, end);
  }
  return verifier;
}

const hex = (b: Buffer | undefined): string | undefined => b?.toString('hex');

/** A link as an export line carries it (64 hex digits), or an ExportFormatError. */
function linkOf(text: unknown, at: string, field: 'link' | 'prev'): Buffer {
  if (typeof text !== 'string' || !HEX_LINK.test(text)) throw new ExportFormatError(`${at}: a record line's ${field} is 64 hex digits${field === 'link' ? ' (every record of an export carries its link)' : ''}`);
  return Buffer.from(text, 'hex');
}

/**
 * The export's lines: a header, then each partition's records in offset order (the audit topic's
 * first): a record of the scope as the replay prints it plus its key, value and links; any other
 * as its digest and links.
 */
export async function* exportWithProof(log: ChainedLog, request: ScopeRequest, onProgress: (p: ScopeProgress) => void = () => {}): AsyncGenerator<string> {
  const parts = await partitionsOf(log, request);
  // Every record of the partitions, each to its end, is read once for the export (the checkpoints' small topic once more before).
  const progress: ScopeProgress = { read: 0, total: await recordsIn(log, parts), found: 0 };
  onProgress(progress);
  const checkpoints = await checkpointsOf(log, parts);
  yield exportHeader(request, checkpoints.map(({ cp }) => cp.publicKey), parts);
  for (const { topic, partition, end } of parts) {
    for await (const records of chained(log, topic, partition, end)) {
      let out = '';
      for (const r of records) {
        // a piece at most EXPORT_PIECE_CHARS long (and a line): see there
        if (out.length >= EXPORT_PIECE_CHARS) {
          yield out;
          out = '';
        }
        if (r.unreadable) throw new Error(`${topic}/${partition} offset ${r.offset}: the row of log.db holding it does not decode (replay --verify reports it); no export of it`);
        const proof = { link: hex(r.link), ...(r.prev ? { prev: hex(r.prev) } : {}) };
        const line = topic === Topics.audit ? undefined : lineOf(r, request);
        if (topic === Topics.audit) {
          out += `${JSON.stringify({ topic, partition, offset: r.offset, time: r.timestamp, checkpoint: decodeCheckpoint(r.value), key: r.key, value: Buffer.from(r.value).toString('base64'), ...proof })}\n`;
        } else if (line) {
          progress.found++;
          out += `${JSON.stringify({ ...line, key: r.key, value: Buffer.from(r.value).toString('base64'), ...proof })}\n`;
        } else {
          out += `${JSON.stringify({ topic, partition, offset: r.offset, digest: digestOf(r.offset, r.key, r.timestamp, r.value).toString('hex'), ...proof })}\n`;
        }
      }
      progress.read += records.length;
      onProgress(progress);
      yield out;
    }
  }
}




/**
 * Verifies an export (exportWithProof) alone: every record's digest (from its key, time and value,
 * and its event as printed matches them), the chains, and the checkpoints, signed by a trusted key
 * (`trusted`; absent: the keys the export names, which the caller says it trusts).
 */
export async function verifyFile(path: string, trusted?: Set<string> | Keyring): Promise<{ verifier: ChainVerifier; publicKeys: string[] }> {
  let verifier: ChainVerifier | undefined;
  let publicKeys: string[] = [];
  let n = 0;
  let declared: { topic: string; partition: number; end: number }[] = [];
  const pendingEntries: ChainEntry[] = [];
  let checkpointsDone = false;
  let kafka: KafkaExportVerifier | undefined;
  let scope: ScopeRequest | undefined;
  for await (const text of exportLines(path)) {
    n++;
    if (text.trim() === '') continue;
    const at = `${path}:${n}`;
    const line = parseExportLine(text, at);
    if (!verifier && !kafka) {
      if (n !== 1 || !line.export || typeof line.export !== 'object' || line.export.version !== EXPORT_VERSION) throw new ExportFormatError(`${path}: not an export of replay --with-proof (its first line has no "export" header of version ${EXPORT_VERSION})`);
      checkHeader(line.export, at);
      scope = scopeOf(line.export, at);
      publicKeys = line.export.publicKeys;
      declared = line.export.partitions;
      if (line.export.log === 'kafka') kafka = new KafkaExportVerifier(path, line.export, scope, trusted ?? new Set(publicKeys));
      else verifier = new ChainVerifier(trusted ?? new Set(publicKeys));
      continue;
    }
    checkRecordLine(line, at);
    if (kafka) {
      kafka.line(line, n);
      continue;
    }
    const v = verifier!;
    const link = linkOf(line.link, at, 'link');
    const prev = line.prev === undefined ? undefined : linkOf(line.prev, at, 'prev');
    const topic = line.topic!;
    const partition = line.partition!;
    const offset = line.offset!;
    if (!declared.some((d) => d.topic === topic && d.partition === partition)) throw new ExportFormatError(`${at}: ${topic}/${partition} is not among the partitions its header declares`);
    if (topic === Topics.audit && checkpointsDone) throw new ExportFormatError(`${at}: the audit topic's records (the checkpoints) must come before the other records`);
    const place = `${topic}/${partition} offset ${offset}`;
    let digest: Buffer;
    if (line.value !== undefined) {
      const value = Buffer.from(line.value, 'base64');
      digest = digestOf(offset, line.key!, line.time!, value);
      if (topic === Topics.audit) {
        const cp = decodeCheckpoint(value);
        // What the auditor reads is the printed checkpoint: it must be what the signed value holds.
        if (JSON.stringify(line.checkpoint) !== JSON.stringify(cp)) v.report(`checkpoint altered: the checkpoint at ${place} as printed is not what its value holds`);
        if (cp) v.checkpoint(cp, place);
      } else {
        const printed = checkPrinted(line, value, scope!);
        // Counted as a change: what the auditor reads is not what the chain proves.
        if (printed === 'changed') v.report(`record changed: ${place}: its event or credential as printed is not what its value holds`);
        else if (printed === 'out of scope') v.report(outOfScope(place));
      }
    } else if (line.digest !== undefined) {
      digest = Buffer.from(line.digest, 'hex');
    } else throw new ExportFormatError(`${at}: a record line needs a value or a digest`);
    const entry: ChainEntry = { topic, partition, offset, digest, link, ...(prev ? { prev } : {}) };
    if (topic === Topics.audit) pendingEntries.push(entry);
    else {
      if (!checkpointsDone) {
        checkpointsDone = true;
        for (const e of pendingEntries) v.entry(e);
      }
      v.entry(entry);
    }
  }
  if (kafka) return { verifier: kafka.finish(), publicKeys };
  if (!verifier) throw new ExportFormatError(`${path}: empty, not an export of replay --with-proof`);
  if (!checkpointsDone) for (const e of pendingEntries) verifier.entry(e);
  const seen = new Map(verifier.seen().map((s) => [`${s.topic}/${s.partition}`, s.end]));
  for (const d of declared) {
    const end = seen.get(`${d.topic}/${d.partition}`) ?? 0;
    if (end < d.end) verifier.report(`records missing: the export declares ${d.topic}/${d.partition} up to offset ${d.end - 1}, its lines end at offset ${end - 1}`);
    verifier.end(d.topic, d.partition, end);
  }
  return { verifier, publicKeys };
}
