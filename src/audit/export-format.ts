// What an audit export is made of, shared by the embedded log's proof (proof.ts) and Kafka's
// (kafka-proof.ts, kafka-verify.ts): its version, the partitions it covers, its lines, and the
// check that a line's printed event is what its record holds.
import { Topics, type Log, type Topic } from '../log/port.js';
import { decodeEvent } from '../log/event-codec.js';
import type { AuditCheckpoint } from './checkpoint.js';
import { auditView, readingPlan, type ScopeRequest } from './replay-scope.js';

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
  export?: { version: number; log?: string; publicKeys: string[]; partitions: { topic: string; partition: number; end: number; low?: number }[] };
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

/** Whether a record line's event and credential, as printed, are what its value holds. */
export function printedMatches(line: ExportLine, value: Uint8Array): boolean {
  const view = auditView(decodeEvent(value));
  const credential = view.credential && Object.keys(view.credential).length > 0 ? view.credential : undefined;
  return JSON.stringify(view.event) === JSON.stringify(line.event) && JSON.stringify(credential) === JSON.stringify(line.credential);
}

export class ExportFormatError extends Error {}
