import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { decode } from '@msgpack/msgpack';
import type { Logger } from 'pino';
import { Topics, type Checkpoint, type Log, type Topic } from '../src/log/port.js';
import type { SharedSnapshots } from './shared-snapshots.js';
import { marksOf, otherLog, type SnapshotMark } from './snapshot-marks.js';
import { encodeInSlices } from './snapshot-encode.js';

/**
 * Snapshots of the in-memory projections (README: A bounded start). A projection rebuilt from its
 * topics at every start (the presence member set, channel activity, apps and revocations) saves
 * its state with the log positions it reflects; a start restores the newest usable snapshot and
 * reads only the log after it. A snapshot that cannot be used is skipped with a warning saying
 * why, and with none left the projection replays its topics whole, as it did before snapshots.
 *
 * One file per snapshot, `DATA_DIR/snapshots/<projection>/<written at>-<random>.snap`, written to a
 * temporary name, synced and renamed (a crash leaves the old file or the new, never half of one).
 * The newest `keep` of each projection are kept: presence needs one older than the history window
 * (projections/presence). The file: one line of JSON (the header), then the state as MessagePack
 * (message data may be bytes). The header names the format, the projection and its version, the
 * log the positions are of, the positions, the topics' partition counts, and the body's length
 * and SHA-256.
 *
 * Production mode also keeps them in a store every instance reads (`shared`, ClickHouse:
 * projections/shared-snapshots.ts), the same bytes: an instance with an empty DATA_DIR starts from
 * the newest there. A start tries every snapshot, local and shared, the furthest into the log
 * first (the local one first at equal positions), under the same checks. Not every save goes
 * there: only one when the newest shared one of the projection (any instance's) is older than
 * `sharedEveryMs`, and every graceful stop's (SnapshotSchedule.close).
 */

export const SNAPSHOT_FORMAT = 'channel-messaging-snapshot/2';
/**
 * The format of earlier builds, still read: its header has no checksum of its own (`headerSha256`),
 * so a bit flipped in a position went unnoticed (README: A bounded start). /2 cannot become /1 by
 * one flipped bit.
 */
const SNAPSHOT_FORMAT_1 = 'channel-messaging-snapshot/1';

/** Log positions per topic: the next offset to read, per partition. */
export type SnapshotPositions = Map<Topic, Checkpoint>;

export type { SnapshotMark } from './snapshot-marks.js';

export interface Snapshot<S> {
  name: string;
  version: number;
  positions: SnapshotPositions;
  /** Each topic's partition count when written (undefined: a file of an earlier build). */
  partitions?: Record<string, number>;
  /** Per topic, the record it was taken after (absent in files of earlier builds: not checked). */
  marks?: Record<string, SnapshotMark>;
  writtenAt: number;
  state: S;
}

interface Header {
  format: string;
  name: string;
  version: number;
  log: string;
  positions: Record<string, [number, number][]>;
  /** Each topic's partition count when written (absent in files of earlier builds). */
  partitions?: Record<string, number>;
  marks?: Record<string, SnapshotMark>;
  writtenAt: number;
  bytes: number;
  sha256: string;
  /** SHA-256 of the header line as written without this field (format /2 on). */
  headerSha256?: string;
}

export interface SnapshotStoreOptions {
  /** The folder (DATA_DIR/snapshots). */
  dir: string;
  /** Which log the positions are of (a snapshot of another log is never used). */
  logId: string;
  /**
   * Where each partition ends: a snapshot past a log's end (a log reset) is not used. With `read`,
   * each snapshot also names the record it was taken after (SnapshotMark), checked at a start.
   */
  log: Pick<Log, 'endOffsets'> & Partial<Pick<Log, 'read'>>;
  logger: Logger;
  /** Snapshots kept per projection (default 6). */
  keep?: number;
  /** The clock of writtenAt (file names order by it). */
  now?: () => number;
  /** The store every instance reads (production mode), and how often one of a projection goes there at most. */
  shared?: { store: SharedSnapshots; everyMs: number; instance: string };
}

/** Which stores a save writes: `due` writes the shared one when its newest is older than `sharedEveryMs`. */
export interface SaveTo {
  local?: boolean;
  shared?: 'no' | 'due' | 'now';
}

/** One snapshot a start may try: where it is, how far into the log it goes, and its bytes when asked. */
interface Candidate {
  where: string;
  shared: boolean;
  covered: number;
  bytes: () => Promise<Buffer | undefined>;
}

/** Why a snapshot is not used: `warn` for one that cannot be read, not for one merely too new. */
export interface Refusal {
  reason: string;
  warn?: boolean;
}

const SUFFIX = '.snap';
/** How old a temporary file must be to count as a crash's leftover (a write takes seconds at most). */
const LEFTOVER_AGE_MS = 10 * 60_000;

export class SnapshotStore {
  private readonly keep: number;
  private readonly now: () => number;
  /** Writes in progress per projection: one at a time, so files are pruned in order. */
  private readonly writing = new Map<string, Promise<void>>();
  private readonly ends = new Map<Topic, Promise<Map<number, number>>>();

  constructor(private readonly options: SnapshotStoreOptions) {
    this.keep = Math.max(1, options.keep ?? 6);
    this.now = options.now ?? Date.now;
  }

  /**
   * Saves a snapshot. `state` is the state at the call, consistent with `positions`, made of
   * lists the caller made for it and values it never changes in place (each take()): it is encoded
   * in slices from the call on (encodeInSlices: the event loop is not held for all of it), and the
   * write goes on in the background of the returned promise,
   * which tells whether the shared store was written. A shared write that fails, or a snapshot
   * too large for the shared store, is logged and not thrown (the local one stands).
   */
  save(name: string, version: number, positions: SnapshotPositions, state: unknown, to: SaveTo = {}): Promise<{ shared: boolean }> {
    const encoding = encodeInSlices(state);
    encoding.catch(() => {}); // awaited below, after the previous write
    const writtenAt = this.now();
    // Copied now, as the state: the caller's maps may move on while the write waits its turn.
    const held: SnapshotPositions = new Map([...positions].map(([topic, cp]) => [topic, new Map(cp)]));
    const previous = this.writing.get(name) ?? Promise.resolve();
    const done = previous.then(async () => {
      const body = await encoding;
      const header: Header = {
        format: SNAPSHOT_FORMAT,
        name,
        version,
        log: this.options.logId,
        positions: Object.fromEntries([...held].map(([topic, cp]) => [topic, [...cp]])),
        partitions: await this.partitionCounts(held),
        marks: await marksOf(this.options.log, held, (err, topic) => this.options.logger.warn({ err, projection: name, topic }, 'the record a snapshot was taken after could not be read: the snapshot is saved without it (a start cannot tell a reset log by it)')),
        writtenAt,
        bytes: body.byteLength,
        sha256: createHash('sha256').update(body).digest('hex'),
      };
      header.headerSha256 = headerHash(header);
      const bytes = Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), body]);
      let localError: unknown;
      if (to.local !== false) {
        try {
          await this.write(name, writtenAt, bytes);
        } catch (err) {
          localError = err;
        }
      }
      const shared = await this.saveShared(name, version, writtenAt, held, bytes, to.shared ?? 'due');
      if (localError !== undefined) throw localError;
      return { shared };
    });
    this.writing.set(name, done.then(() => undefined, () => undefined));
    return done;
  }

  /** Partition counts of the topics a snapshot covers (from the log's ends, read once per store). */
  private async partitionCounts(positions: SnapshotPositions): Promise<Record<string, number> | undefined> {
    const counts: Record<string, number> = {};
    try {
      for (const topic of positions.keys()) counts[topic] = (await this.endOf(topic)).size;
    } catch {
      return undefined; // the log did not say: the snapshot is checked against the log's ends only
    }
    return counts;
  }

  private async saveShared(name: string, version: number, writtenAt: number, positions: SnapshotPositions, bytes: Buffer, when: 'no' | 'due' | 'now'): Promise<boolean> {
    const shared = this.options.shared;
    if (!shared || when === 'no') return false;
    const { logger } = this.options;
    try {
      if (when === 'due') {
        const newest = Math.max(0, ...(await shared.store.list(name, this.options.logId)).map((e) => e.writtenAt));
        if (writtenAt - newest < shared.everyMs) return false;
      }
      if (bytes.byteLength > shared.store.maxBytes) {
        logger.warn({ projection: name, bytes: bytes.byteLength, maxBytes: shared.store.maxBytes }, 'snapshot too large for the shared store: not shared (a new instance replays this projection from its topics)');
        return false;
      }
      const id = `${String(writtenAt).padStart(15, '0')}-${randomBytes(4).toString('hex')}`;
      await shared.store.write({ name, log: this.options.logId, version, covered: coveredBy(positions), writtenAt, id, instance: shared.instance }, bytes);
      await shared.store.prune(name, this.options.logId, this.keep);
      logger.info({ projection: name, where: shared.store.where, id, bytes: bytes.byteLength }, 'snapshot shared');
      return true;
    } catch (err) {
      logger.warn({ err, projection: name, where: shared.store.where }, 'shared snapshot write failed; a later one tries again');
      return false;
    }
  }

  private async write(name: string, writtenAt: number, bytes: Buffer): Promise<void> {
    const dir = join(this.options.dir, name);
    mkdirSync(dir, { recursive: true });
    const file = `${String(writtenAt).padStart(15, '0')}-${randomBytes(4).toString('hex')}${SUFFIX}`;
    const temp = join(dir, `.${file}.tmp`);
    const handle = await open(temp, 'w');
    try {
      await handle.write(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, join(dir, file));
    // The rename made durable before an older file goes: a power loss leaves the new file or the old.
    const folder = await open(dir, 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    for (const old of this.files(name).slice(this.keep)) await rm(join(dir, old), { force: true });
    await this.removeLeftovers(dir);
  }

  /**
   * Temporary files a crash left (a kill -9 or a power loss during a write), each as large as a
   * snapshot: never read, so removed, once old enough not to be another process's write in
   * progress (a service holds its DATA_DIR in both modes; the age is a margin, not the guard).
   */
  private async removeLeftovers(dir: string): Promise<void> {
    const before = Date.now() - LEFTOVER_AGE_MS;
    for (const f of readdirSync(dir)) {
      if (!f.startsWith('.') || !f.endsWith('.tmp')) continue;
      const path = join(dir, f);
      try {
        if ((await stat(path)).mtimeMs < before) await rm(path, { force: true });
      } catch {
        // removed meanwhile
      }
    }
  }

  /** Snapshot files of a projection, newest first. */
  private files(name: string): string[] {
    try {
      return readdirSync(join(this.options.dir, name))
        .filter((f) => f.endsWith(SUFFIX) && !f.startsWith('.'))
        .sort()
        .reverse();
    } catch {
      return [];
    }
  }

  /**
   * The newest snapshot of `name` that can be used: readable, of this `version` and this log, of
   * the topics' partitions as they are, within the log's end for every topic it names, and
   * accepted by `accept` (a projection's own condition). Local and shared ones are tried the
   * furthest into the log first. Each one passed over is logged with its reason; undefined means a
   * full replay.
   */
  async load<S>(name: string, version: number, accept?: (s: Snapshot<S>) => Refusal | undefined): Promise<Snapshot<S> | undefined> {
    const { logger } = this.options;
    const candidates = [...this.localCandidates(name), ...(await this.sharedCandidates(name))];
    // Stable: at equal positions the local one (first in the list) is tried first.
    candidates.sort((x, y) => y.covered - x.covered);
    if (candidates.length === 0) {
      logger.info({ projection: name }, 'no snapshot yet: the projection replays its topics whole');
      return undefined;
    }
    const ends = new Map<Topic, Map<number, number>>();
    for (const candidate of candidates) {
      const where = { projection: name, file: candidate.where, ...(candidate.shared ? { shared: true } : {}) };
      let read: { snapshot: Snapshot<S> } | Refusal;
      try {
        const bytes = await candidate.bytes();
        read = bytes ? this.read<S>(bytes, name, version) : { reason: 'gone (removed meanwhile)', warn: false };
      } catch (err) {
        read = { reason: `cannot be read: ${(err as Error).message}` };
      }
      let refusal = 'reason' in read ? read : undefined;
      if (!refusal && 'snapshot' in read) {
        refusal = await this.beyondEnd(read.snapshot, ends);
        refusal ??= accept?.(read.snapshot);
        refusal ??= await otherLog(this.options.log, read.snapshot.marks);
        if (!refusal) {
          logger.info({ ...where, writtenAt: new Date(read.snapshot.writtenAt).toISOString(), positions: describe(read.snapshot.positions) }, 'projection restored from its snapshot; reading the log after it');
          return read.snapshot;
        }
      }
      const fields = { ...where, reason: refusal!.reason };
      if (refusal!.warn === false) logger.info(fields, 'snapshot passed over');
      else logger.warn(fields, 'snapshot not used');
    }
    logger.warn({ projection: name, snapshots: candidates.length }, 'no usable snapshot: the projection replays its topics whole');
    return undefined;
  }

  /** The local files, each placed by its header's positions (one whose header cannot be read last: it is reported). */
  private localCandidates(name: string): Candidate[] {
    return this.files(name).map((file) => {
      const path = join(this.options.dir, name, file);
      return { where: path, shared: false, covered: headerCovered(path), bytes: async () => readFileSync(path) };
    });
  }

  /** The shared store's, by what their rows say; none (with a warning) when it cannot be listed. */
  private async sharedCandidates(name: string): Promise<Candidate[]> {
    const shared = this.options.shared?.store;
    if (!shared) return [];
    try {
      const entries = await shared.list(name, this.options.logId);
      return entries.map((e) => ({ where: `${shared.where}#${e.id}`, shared: true, covered: e.covered, bytes: () => shared.read(e.id) }));
    } catch (err) {
      this.options.logger.warn({ err, projection: name, where: shared.where }, 'shared snapshots could not be listed: only local ones are tried');
      return [];
    }
  }

  private read<S>(bytes: Buffer, name: string, version: number): { snapshot: Snapshot<S> } | Refusal {
    const eol = bytes.indexOf(10);
    let header: Header;
    try {
      if (eol < 0) throw new Error('no header line');
      header = JSON.parse(bytes.subarray(0, eol).toString('utf8')) as Header;
    } catch (err) {
      return { reason: `its header is not readable (${(err as Error).message}): corrupt or truncated` };
    }
    if (header.format !== SNAPSHOT_FORMAT && header.format !== SNAPSHOT_FORMAT_1) return { reason: `format "${String(header.format)}", this build reads ${SNAPSHOT_FORMAT}` };
    if (header.name !== name) return { reason: `it is of projection "${String(header.name)}"` };
    if (header.version !== version) return { reason: `version ${String(header.version)} of the projection's state, this build reads version ${version} (written by ${header.version < version ? 'an older' : 'a newer'} build)` };
    if (header.log !== this.options.logId) return { reason: `its positions are of another log (${String(header.log)}, this one is ${this.options.logId})` };
    // (After the reasons above, which refuse it anyway.) Its positions, log and marks are in the header: a bit flipped there would resume the log elsewhere than the state is.
    if (header.format === SNAPSHOT_FORMAT && (typeof header.headerSha256 !== 'string' || headerHash(header) !== header.headerSha256)) return { reason: "its header's checksum does not match: corrupt" };
    const body = bytes.subarray(eol + 1);
    if (body.byteLength !== header.bytes) return { reason: `truncated or padded: ${body.byteLength} bytes of state where the header says ${header.bytes}` };
    if (createHash('sha256').update(body).digest('hex') !== header.sha256) return { reason: 'its checksum does not match: corrupt' };
    let state: S;
    try {
      // From a plain Uint8Array: bytes in the state come back as Uint8Array, as the log's events decode them.
      state = decode(new Uint8Array(body.buffer, body.byteOffset, body.byteLength)) as S;
    } catch (err) {
      return { reason: `its state does not decode: ${(err as Error).message}` };
    }
    const positions: SnapshotPositions = new Map(Object.entries(header.positions).map(([topic, cp]) => [topic as Topic, new Map(cp)]));
    return { snapshot: { name, version, positions, partitions: header.partitions, marks: header.marks, writtenAt: header.writtenAt, state } };
  }

  /**
   * A topic's end, read once per store (it only grows, so a start's first reading serves every
   * projection), tried three times: kafkajs's offsets lookup fails now and then against
   * librdkafka's mock broker (an empty ListOffsets answer).
   */
  private endOf(topic: Topic): Promise<Map<number, number>> {
    let end = this.ends.get(topic);
    if (!end) {
      end = (async () => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await this.options.log.endOffsets(topic);
          } catch (err) {
            if (attempt === 3) throw err;
            await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
          }
        }
      })();
      this.ends.set(topic, end);
      end.catch(() => this.ends.delete(topic));
    }
    return end;
  }

  private async beyondEnd(snapshot: Snapshot<unknown>, ends: Map<Topic, Map<number, number>>): Promise<Refusal | undefined> {
    for (const [topic, cp] of snapshot.positions) {
      const counted = snapshot.partitions?.[topic];
      if (counted === undefined && ![...cp.values()].some((offset) => offset > 0)) continue; // nothing of it read: nothing to be past
      const past = (end: Map<number, number>) => [...cp].find(([partition, offset]) => offset > (end.get(partition) ?? 0));
      let end = ends.get(topic);
      try {
        const earlier = end === undefined;
        end ??= await this.endOf(topic);
        // The end this store read earlier (at the start) may be older than a snapshot saved since: read it again, once per load.
        if (earlier && past(end)) {
          this.ends.delete(topic);
          end = await this.endOf(topic);
        }
      } catch (err) {
        return { reason: `the ${topic} topic's end could not be read to check it against (${(err as Error).message})` };
      }
      ends.set(topic, end);
      const beyond = past(end);
      if (beyond) {
        const [partition, offset] = beyond;
        return { reason: `its ${topic} position ${partition}:${offset} is past the log's end (${end.get(partition) ?? 0}): the log was reset or is another one` };
      }
      // Another partition count: its keys were on other partitions (its state is of another layout).
      if (counted !== undefined && counted !== end.size) return { reason: `it covers ${counted} partitions of the ${topic} topic, which has ${end.size}` };
    }
    return undefined;
  }
}

/** The SHA-256 of a header as written without its own checksum. */
function headerHash(header: Header): string {
  const { headerSha256: _, ...rest } = header;
  return createHash('sha256').update(JSON.stringify(rest)).digest('hex');
}

/** How far into the log positions are: the sum of their offsets. */
const coveredBy = (positions: SnapshotPositions): number => [...positions.values()].reduce((sum, cp) => sum + [...cp.values()].reduce((a, b) => a + b, 0), 0);

/** How far a local file goes (its header line alone read); one whose header cannot be read is tried last, to be reported. */
function headerCovered(path: string): number {
  try {
    const handle = openSync(path, 'r');
    try {
      const head = Buffer.alloc(64 * 1024);
      const n = readSync(handle, head, 0, head.length, 0);
      const eol = head.subarray(0, n).indexOf(10);
      const header = JSON.parse(head.subarray(0, eol < 0 ? n : eol).toString('utf8')) as Header;
      return coveredBy(new Map(Object.entries(header.positions).map(([topic, cp]) => [topic as Topic, new Map(cp)])));
    } finally {
      closeSync(handle);
    }
  } catch {
    return -1;
  }
}

export const describe = (positions: SnapshotPositions): Record<string, string> =>
  Object.fromEntries([...positions].map(([topic, cp]) => [topic, [...cp].map(([p, o]) => `${p}:${o}`).join(',')]));

/** Per partition, whether `a` is at or before `b` (a partition missing from either is at 0). */
export function atOrBefore(a: Checkpoint, b: Checkpoint): boolean {
  for (const [p, o] of a) if (o > (b.get(p) ?? 0)) return false;
  return true;
}

/** The topics the snapshotted projections read (presence, channels, apps). */
const SNAPSHOT_TOPICS: Topic[] = [Topics.presence, Topics.connections, Topics.messages, Topics.apps];

/** The settings it reads (src/config.ts: SNAPSHOT_INTERVAL_MS, SHARED_SNAPSHOT_INTERVAL_MS, …). */
export interface SnapshotSettings {
  dataDir: string;
  instanceId: string;
  snapshotIntervalMs: number;
  sharedSnapshotIntervalMs: number;
  historyTailMs: number;
  kafkaBrokers?: readonly string[];
}

/**
 * Where the in-memory projections keep their snapshots: DATA_DIR/snapshots, and in production
 * mode the shared store too (ClickHouse), which an instance with an empty DATA_DIR starts from
 * (every instance holds these projections whole, so any instance's snapshot serves any other).
 * None with SNAPSHOT_INTERVAL_MS=0; no shared ones with SHARED_SNAPSHOT_INTERVAL_MS=0.
 */
export function snapshotStoreFor(
  config: SnapshotSettings,
  log: Pick<Log, 'kind' | 'endOffsets'> & Partial<Pick<Log, 'read' | 'prepareReads'>>,
  logger: Logger,
  shared: SharedSnapshots | undefined,
): SnapshotStore | undefined {
  if (config.snapshotIntervalMs <= 0) return undefined;
  // Each snapshot's mark is read at its save and checked at a start (SnapshotMark): the Kafka
  // log's readers join their groups now, together, rather than one after another at the first reads.
  for (const topic of SNAPSHOT_TOPICS) log.prepareReads?.(topic).catch(() => {}); // a failure leaves the first read to start it
  // Presence needs a snapshot older than the history window: keep enough to reach past it.
  const keep = Math.min(20, Math.max(3, Math.ceil(config.historyTailMs / config.snapshotIntervalMs) + 2));
  const logId = log.kind === 'kafka' ? `kafka:${(config.kafkaBrokers ?? []).join(',')}` : `embedded:${join(config.dataDir, 'log.db')}`;
  return new SnapshotStore({
    dir: join(config.dataDir, 'snapshots'),
    logId,
    log,
    logger: logger.child({ component: 'snapshots' }),
    keep,
    ...(shared && config.sharedSnapshotIntervalMs > 0 ? { shared: { store: shared, everyMs: config.sharedSnapshotIntervalMs, instance: config.instanceId } } : {}),
  });
}
