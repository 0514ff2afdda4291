// The audit replay's reading (`npm run replay`, src/cli/replay.ts): an app's records in a scope
// (one channel, a channel prefix, every channel) and of the kinds asked for (messages, presence,
// the app's own events), read from the log itself in log order, one line per record, each naming
// its place (topic, partition, offset), its time, the event and the credential that made it.
import { Topics, type Log, type LogRecord, type Topic } from '../log/port.js';
import { isKnownEventType, nestsDeeperThan, RECORD_MAX_DEPTH } from '../log/event-shape.js';
import { decodeEvent } from '../log/event-codec.js';
import type { LogEvent } from '../domain/events.js';
import { partitionFor } from '../log/partitioner.js';
import { messageToWire } from '../codec/message-wire.js';
import type { StoredMessage } from '../domain/message.js';

export const INCLUDES = ['messages', 'presence', 'app-events'] as const;
export type Include = (typeof INCLUDES)[number];

export type ChannelScope = { kind: 'channel'; name: string } | { kind: 'prefix'; prefix: string } | { kind: 'all' };

export interface ScopeRequest {
  appId: string;
  channels: ChannelScope;
  include: ReadonlySet<Include>;
  /** record timestamps, inclusive, ms since the epoch */
  from: number;
  to: number;
}

/** Who made a record: the key of the credentials (basic, or the key a token came from), its clientId, its connection. */
export interface Credential {
  keyName?: string;
  clientId?: string;
  connectionId?: string;
}

export interface ReplayLine {
  topic: Topic;
  partition: number;
  offset: number;
  /** the record's timestamp, ms since the epoch */
  time: number;
  event: Record<string, unknown>;
  credential?: Credential;
}

export interface ScopeProgress {
  /** records read so far, and in all (the partitions' ends when the replay began) */
  read: number;
  total: number;
  found: number;
  /** records of the scope that are not one of the service's events (another producer's: src/log/event-shape.ts), left out */
  foreign?: number;
}

/** What a record of the scope is: where it is, and the record itself. */
export interface ScopedRecord {
  record: LogRecord;
  line: ReplayLine;
}

const APP_EVENTS = new Set<LogEvent['type']>(['app.created', 'app.deleted', 'key.created', 'key.updated', 'key.revoked', 'tokens.revoked', 'rule.created', 'rule.deleted']);

/** The event as an auditor reads it: binary data as base64 (as the REST API's JSON), never a key's secret. */
export function auditView(event: LogEvent): { event: Record<string, unknown>; credential?: Credential } {
  switch (event.type) {
    case 'messages.published': {
      const { messages, ...rest } = event;
      const first: StoredMessage | undefined = messages[0];
      const credential: Credential = {};
      if (event.keyName !== undefined) credential.keyName = event.keyName;
      if (first?.clientId !== undefined) credential.clientId = first.clientId;
      if (first?.connectionId !== undefined) credential.connectionId = first.connectionId;
      return { event: { ...rest, messages: messages.map((m) => messageToWire(m, 'json')) }, credential };
    }
    case 'presence.changed': {
      const { event: change, ...rest } = event;
      const credential: Credential = { connectionId: change.connectionId };
      if (change.clientId !== undefined) credential.clientId = change.clientId;
      return { event: { ...rest, event: messageToWire(change as unknown as StoredMessage, 'json'), action: change.action }, credential };
    }
    case 'key.created': {
      const { keySecret: _secret, ...key } = event.key;
      return { event: { ...event, key } };
    }
    case 'rule.created': {
      // A target's header values may be credentials (an Authorization header): their names only.
      const headers = event.rule.target.headers?.map((h) => ({ name: h.name, value: '(not shown)' }));
      return { event: { ...event, rule: { ...event.rule, target: { ...event.rule.target, ...(headers ? { headers } : {}) } } } };
    }
    case 'app.created': {
      const keys = event.app.keys.map(({ keySecret: _secret, ...key }) => key);
      return { event: { ...event, app: { ...event.app, keys } } };
    }
    default:
      return { event: { ...event } };
  }
}

/** The app and channel a record of the messages or presence topic is about (its key is `appId:channel`). */
export function inScope(record: LogRecord, request: ScopeRequest): boolean {
  const key = record.key;
  const { appId, channels } = request;
  if (key.length <= appId.length || key.charCodeAt(appId.length) !== 58 /* : */ || !key.startsWith(appId)) return false;
  if (channels.kind === 'all') return true;
  const channel = key.slice(appId.length + 1);
  return channels.kind === 'channel' ? channel === channels.name : channel.startsWith(channels.prefix);
}

/** The partitions of each topic the request reads: one for one channel (or the app's events), all of them otherwise. */
export async function partitionsToRead(log: Pick<Log, 'partitions'>, request: ScopeRequest): Promise<{ topic: Topic; partition: number }[]> {
  const out: { topic: Topic; partition: number }[] = [];
  for (const topic of [Topics.messages, Topics.presence] as Topic[]) {
    if (!request.include.has(topic === Topics.messages ? 'messages' : 'presence')) continue;
    const count = await log.partitions(topic);
    if (request.channels.kind === 'channel') out.push({ topic, partition: partitionFor(`${request.appId}:${request.channels.name}`, count) });
    else for (let p = 0; p < count; p++) out.push({ topic, partition: p });
  }
  if (request.include.has('app-events')) out.push({ topic: Topics.apps, partition: partitionFor(request.appId, await log.partitions(Topics.apps)) });
  return out;
}

/**
 * Every record of a partition from offset 0 to its end (as it was when called), in offset order,
 * with whether it is in the request's scope: a verifier needs them all, an export the ones in scope.
 */
export async function* readPartition(log: Log, topic: Topic, partition: number, end: number, batch = 5000): AsyncGenerator<LogRecord[]> {
  for (let offset = 0; offset < end; ) {
    const records = await log.read(topic, partition, offset, Math.min(batch, end - offset));
    if (records.length === 0) break;
    yield records;
    offset = records[records.length - 1].offset + 1;
  }
}

/**
 * The line of a record if it is in the request's scope and time range, else undefined. A record of
 * the scope that is not one of the service's events (another producer's: src/log/event-shape.ts)
 * has none either, and `foreign` is told (`replay --verify` names it as not the service's).
 */
export function lineOf(record: LogRecord, request: ScopeRequest, foreign?: () => void): ReplayLine | undefined {
  if (record.timestamp < request.from || record.timestamp > request.to) return undefined;
  const topic = record.topic as Topic;
  if (topic === Topics.apps) {
    if (record.key !== request.appId) return undefined;
  } else if (!inScope(record, request)) return undefined;
  // The replay shows what the log holds: an event of a known type is printed as it decoded, even
  // with fields the service would not write (the transcoder prints those too: both paths give the
  // same lines); bytes that are no event, an unknown type, or an event the view cannot show are
  // left out and counted.
  const event = replayedEvent(record.value);
  if (!event) {
    foreign?.();
    return undefined;
  }
  if (topic === Topics.apps && !APP_EVENTS.has(event.type)) return undefined;
  if (topic === Topics.messages && event.type !== 'messages.published') return undefined;
  if (topic === Topics.presence && event.type !== 'presence.changed') return undefined;
  let view: ReturnType<typeof auditView>;
  try {
    view = auditView(event);
  } catch {
    foreign?.();
    return undefined;
  }
  const line: ReplayLine = { topic, partition: record.partition, offset: record.offset, time: record.timestamp, event: view.event };
  if (view.credential && Object.keys(view.credential).length > 0) line.credential = view.credential;
  return line;
}

/** The event a record holds for the replay: any decodable event object of a type this version knows. */
function replayedEvent(value: Uint8Array): LogEvent | undefined {
  let event: unknown;
  try {
    event = decodeEvent(value);
  } catch {
    return undefined;
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) return undefined;
  const type = (event as { type?: unknown }).type;
  if (typeof type !== 'string' || !isKnownEventType(type)) return undefined;
  // Nested deeper than the consumers take (they leave it out): its line could not be written either (JSON.stringify recurses).
  return nestsDeeperThan(event, RECORD_MAX_DEPTH) ? undefined : (event as LogEvent);
}

/** What a replay reads: the partitions, each to its end as it was when the plan was made, and the progress of the reading. */
export interface ReadingPlan {
  parts: { topic: Topic; partition: number; end: number }[];
  progress: ScopeProgress;
}

/** The request's reading plan (replayScope's and replayNdjson's): partitionsToRead, with their ends now. */
export async function readingPlan(log: Pick<Log, 'partitions' | 'endOffsets' | 'lowOffsets'>, request: ScopeRequest): Promise<ReadingPlan> {
  const ends = new Map<Topic, Map<number, number>>();
  const parts: ReadingPlan['parts'] = [];
  for (const { topic, partition } of await partitionsToRead(log, request)) {
    if (!ends.has(topic)) ends.set(topic, await log.endOffsets(topic));
    const end = ends.get(topic)!.get(partition) ?? 0;
    parts.push({ topic, partition, end });
  }
  return { parts, progress: { read: 0, total: await recordsIn(log, parts), found: 0 } };
}

/** How many records reading these partitions from offset 0 to their ends meets: from the first each still holds (Log.lowOffsets). */
export async function recordsIn(log: Pick<Log, 'lowOffsets'>, parts: { topic: Topic; partition: number; end: number }[]): Promise<number> {
  const lows = new Map<Topic, Map<number, number>>();
  let total = 0;
  for (const { topic, partition, end } of parts) {
    if (log.lowOffsets && !lows.has(topic)) lows.set(topic, await log.lowOffsets(topic));
    total += Math.max(0, end - (lows.get(topic)?.get(partition) ?? 0));
  }
  return total;
}

/** The request's records, partition by partition (so each channel's in log order). */
export async function* replayScope(log: Log, request: ScopeRequest, onProgress: (p: ScopeProgress) => void = () => {}): AsyncGenerator<ScopedRecord> {
  const { parts, progress } = await readingPlan(log, request);
  const foreign = (): void => void (progress.foreign = (progress.foreign ?? 0) + 1);
  for (const { topic, partition, end } of parts) {
    for await (const records of readPartition(log, topic, partition, end)) {
      for (const record of records) {
        const line = lineOf(record, request, foreign);
        if (!line) continue;
        progress.found++;
        yield { record, line };
      }
      progress.read += records.length;
      onProgress(progress);
    }
  }
}

/**
 * Whether the app is known: the apps topic has an event of it (made by key management or the
 * sandbox, or any of its keys' events), or the configuration names it (`configured`).
 */
export async function appHasEvents(log: Log, appId: string): Promise<boolean> {
  const partition = partitionFor(appId, await log.partitions(Topics.apps));
  const end = (await log.endOffsets(Topics.apps)).get(partition) ?? 0;
  for await (const records of readPartition(log, Topics.apps, partition, end, 1000)) {
    if (records.some((r) => r.key === appId)) return true;
  }
  return false;
}
