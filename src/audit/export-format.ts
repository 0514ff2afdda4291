// What an audit export is made of, shared by the embedded log's proof (proof.ts) and Kafka's
// (kafka-proof.ts, kafka-verify.ts): its version, the partitions it covers, its lines, and the
// check that a line's printed event is what its record holds.
import { createReadStream } from 'node:fs';
import { Topics, type Log, type Topic } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import type { AuditCheckpoint } from './checkpoint.js';
import { auditView, INCLUDES, lineOf, readingPlan, type ChannelScope, type Include, type ScopeRequest } from './replay-scope.js';

export const EXPORT_VERSION = 1;

/** The partitions a request's proof covers: its own, and the audit topic's (the checkpoints), first. */
export async function partitionsOf(log: Pick<Log, 'partitions' | 'endOffsets'>, request: ScopeRequest): Promise<{ topic: Topic; partition: number; end: number }[]> {
  const out: { topic: Topic; partition: number; end: number }[] = [];
  const auditEnds = await log.endOffsets(Topics.audit);
  for (let p = 0; p < (await log.partitions(Topics.audit)); p++) out.push({ topic: Topics.audit, partition: p, end: auditEnds.get(p) ?? 0 });
  out.push(...(await readingPlan(log, request)).parts);
  return out;
}

/** An export's first line: what it covers, and the keys whose signatures it carries (`log`: "kafka" for a Kafka export). */
export function exportHeader(request: ScopeRequest, publicKeys: Iterable<string>, partitions: { topic: Topic; partition: number; end: number; low?: number }[], log?: 'kafka'): string {
  const header = {
    export: {
      version: EXPORT_VERSION,
      ...(log ? { log } : {}),
      appId: request.appId,
      channels: request.channels,
      include: [...request.include],
      from: request.from,
      to: request.to,
      createdAt: new Date().toISOString(),
      publicKeys: [...new Set(publicKeys)],
      partitions,
    },
  };
  return `${JSON.stringify(header)}\n`;
}

export interface ExportLine {
  /** `log`: "kafka" for a Kafka export (kafka-proof.ts), whose partitions say their first offset (`low`) */
  export?: {
    version: number;
    log?: string;
    appId?: unknown;
    channels?: unknown;
    include?: unknown;
    from?: unknown;
    to?: unknown;
    publicKeys: string[];
    partitions: { topic: string; partition: number; end: number; low?: number }[];
  };
  topic?: string;
  partition?: number;
  offset?: number;
  time?: number;
  event?: unknown;
  credential?: unknown;
  checkpoint?: AuditCheckpoint;
  key?: string;
  value?: string;
  digest?: string;
  link?: string;
  prev?: string;
  /** a Kafka record's chain headers (kafka-chain.ts), or chain: "malformed" */
  writer?: unknown;
  seq?: unknown;
  chain?: unknown;
}

/** The scope an export's header declares (the request it was made for), or an ExportFormatError. */
export function scopeOf(header: NonNullable<ExportLine['export']>, where: string): ScopeRequest {
  const { appId, channels, include, from, to } = header;
  const c = channels as Partial<{ kind: string; name: unknown; prefix: unknown }> | null | undefined;
  const channelsOk = !!c && typeof c === 'object' && (c.kind === 'all' || (c.kind === 'channel' && typeof c.name === 'string') || (c.kind === 'prefix' && typeof c.prefix === 'string'));
  const includeOk = Array.isArray(include) && include.every((k) => (INCLUDES as readonly unknown[]).includes(k));
  if (typeof appId !== 'string' || !channelsOk || !includeOk || !Number.isSafeInteger(from) || !Number.isSafeInteger(to)) {
    throw new ExportFormatError(`${where}: the header does not say its scope (appId, channels, include, from, to) as replay --with-proof writes it`);
  }
  return { appId, channels: c as ChannelScope, include: new Set(include as Include[]), from: from as number, to: to as number };
}

const TOPIC_OF: Record<Include, string> = { messages: Topics.messages, presence: Topics.presence, 'app-events': Topics.apps };

/**
 * A record line printed in full, against its value and the export's scope: "changed" when its event
 * or credential as printed are not what the value holds, "out of scope" when the record is not one
 * the header's scope gives in full (the header changed, or lines of another export put in).
 */
export function checkPrinted(line: ExportLine, value: Uint8Array, scope: ScopeRequest): 'ok' | 'changed' | 'out of scope' {
  if (!printedMatches(line, value)) return 'changed';
  const topics = [...scope.include].map((k) => TOPIC_OF[k]);
  if (!topics.includes(line.topic!)) return 'out of scope';
  const record = { topic: line.topic!, partition: line.partition!, offset: line.offset!, key: line.key!, timestamp: line.time!, value };
  try {
    return lineOf(record, scope) ? 'ok' : 'out of scope';
  } catch {
    return 'changed';
  }
}

export const outOfScope = (place: string): string =>
  `record out of the export's scope: ${place} is printed in full, but it is not a record of the scope its header declares (the header was changed, or lines of another export put in)`;

/** Whether a record line's event and credential, as printed, are what its value holds. */
export function printedMatches(line: ExportLine, value: Uint8Array): boolean {
  let view: ReturnType<typeof auditView>;
  try {
    view = auditView(decodeEvent(value));
  } catch {
    return false; // not an event the service writes
  }
  const credential = view.credential && Object.keys(view.credential).length > 0 ? view.credential : undefined;
  return JSON.stringify(view.event) === JSON.stringify(line.event) && JSON.stringify(credential) === JSON.stringify(line.credential);
}

export class ExportFormatError extends Error {}

/**
 * The export is written a piece at a time, its lines joined into strings of about this many
 * characters (one write each): a piece of a whole read batch (5,000 records) went past the longest
 * string V8 makes (2^29 - 24 characters) when the records were large, and the export stopped
 * ("Invalid string length"; 145 publishes of MAX_PUBLISH_BYTES at their defaults did it).
 */
export const EXPORT_PIECE_CHARS = 4 * 1024 * 1024;

/** The longest line an export may have: a record's value (MAX_MESSAGE_SIZE at most 16 MiB a message) in base64, and its event printed. */
export const MAX_EXPORT_LINE_BYTES = 256 * 1024 * 1024;

/** The lines of an export file, without their end (\n or \r\n); a line longer than maxBytes is an ExportFormatError, read no further. */
export async function* exportLines(path: string, maxBytes = MAX_EXPORT_LINE_BYTES): AsyncGenerator<string> {
  let parts: Buffer[] = [];
  let pending = 0;
  let n = 0;
  const text = (last: Buffer): string => {
    n++;
    const whole = parts.length === 0 ? last : Buffer.concat([...parts, last]);
    parts = [];
    pending = 0;
    const end = whole.length > 0 && whole[whole.length - 1] === 0x0d ? whole.length - 1 : whole.length;
    return whole.toString('utf8', 0, end);
  };
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, from)) {
      if (pending + nl - from > maxBytes) throw new ExportFormatError(`${path}:${n + 1}: a line longer than ${maxBytes} bytes (not an export of replay --with-proof)`);
      yield text(chunk.subarray(from, nl));
      from = nl + 1;
    }
    if (from < chunk.length) {
      pending += chunk.length - from;
      if (pending > maxBytes) throw new ExportFormatError(`${path}:${n + 1}: a line longer than ${maxBytes} bytes (not an export of replay --with-proof)`);
      parts.push(chunk.subarray(from));
    }
  }
  if (pending > 0) yield text(Buffer.alloc(0));
}

const isIndex = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
export const HEX_LINK = /^[0-9a-f]{64}$/;

/** An export's line parsed: a JSON object, or an ExportFormatError naming the line. */
export function parseExportLine(text: string, where: string): ExportLine {
  let line: unknown;
  try {
    line = JSON.parse(text);
  } catch {
    throw new ExportFormatError(`${where}: not JSON`);
  }
  if (!line || typeof line !== 'object' || Array.isArray(line)) throw new ExportFormatError(`${where}: not a JSON object`);
  return line as ExportLine;
}

/** The header's fields of the kinds an export's have (publicKeys, partitions), or an ExportFormatError. */
export function checkHeader(header: NonNullable<ExportLine['export']>, where: string): void {
  if (!Array.isArray(header.publicKeys) || !header.publicKeys.every((k) => typeof k === 'string')) throw new ExportFormatError(`${where}: the header's publicKeys is not a list of keys`);
  const ok = Array.isArray(header.partitions) && header.partitions.every((p) => p && typeof p === 'object' && typeof p.topic === 'string' && isIndex(p.partition) && isIndex(p.end) && (p.low === undefined || isIndex(p.low)));
  if (!ok) throw new ExportFormatError(`${where}: the header's partitions is not a list of {topic, partition, end}`);
}

/**
 * A record line's fields of the kinds an export's have, or an ExportFormatError: topic, partition
 * and offset; time, key and value (base64) when it carries its value; a digest of 64 hex digits.
 */
export function checkRecordLine(line: ExportLine, where: string): void {
  if (typeof line.topic !== 'string' || !isIndex(line.partition) || !isIndex(line.offset)) throw new ExportFormatError(`${where}: a record line needs topic, partition and offset (whole numbers from 0)`);
  if (line.value !== undefined) {
    if (typeof line.value !== 'string' || !BASE64.test(line.value)) throw new ExportFormatError(`${where}: a record's value is its bytes in base64`);
    if (typeof line.key !== 'string' || !isIndex(line.time)) throw new ExportFormatError(`${where}: a record with a value needs its key and time (ms since the epoch)`);
  }
  if (line.digest !== undefined && (typeof line.digest !== 'string' || !HEX_LINK.test(line.digest))) throw new ExportFormatError(`${where}: a digest is 64 hex digits`);
}
