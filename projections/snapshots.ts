import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { decode, encode } from '@msgpack/msgpack';
import type { Logger } from 'pino';
import type { Checkpoint, Log, Topic } from '../src/log/port.js';

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
 * log the positions are of, the positions, and the body's length and SHA-256.
 */

export const SNAPSHOT_FORMAT = 'channel-messaging-snapshot/1';

/** Log positions per topic: the next offset to read, per partition. */
export type SnapshotPositions = Map<Topic, Checkpoint>;

export interface Snapshot<S> {
  name: string;
  version: number;
  positions: SnapshotPositions;
  writtenAt: number;
  state: S;
}

interface Header {
  format: string;
  name: string;
  version: number;
  log: string;
  positions: Record<string, [number, number][]>;
  writtenAt: number;
  bytes: number;
  sha256: string;
}

export interface SnapshotStoreOptions {
  /** The folder (DATA_DIR/snapshots). */
  dir: string;
  /** Which log the positions are of (a snapshot of another log is never used). */
  logId: string;
  /** Where each partition ends: a snapshot past a log's end (a log reset) is not used. */
  log: Pick<Log, 'endOffsets'>;
  logger: Logger;
  /** Snapshots kept per projection (default 6). */
  keep?: number;
  /** The clock of writtenAt (file names order by it). */
  now?: () => number;
}

/** Why a snapshot is not used: `warn` for one that cannot be read, not for one merely too new. */
export interface Refusal {
  reason: string;
  warn?: boolean;
}

const SUFFIX = '.snap';

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
   * Saves a snapshot. The state is encoded before the first await, so it is the state at the
   * call, consistent with `positions`; the write goes on in the background of the returned promise.
   */
  save(name: string, version: number, positions: SnapshotPositions, state: unknown): Promise<void> {
    const body = encode(state, { ignoreUndefined: true });
    const writtenAt = this.now();
    const header: Header = {
      format: SNAPSHOT_FORMAT,
      name,
      version,
      log: this.options.logId,
      positions: Object.fromEntries([...positions].map(([topic, cp]) => [topic, [...cp]])),
      writtenAt,
      bytes: body.byteLength,
      sha256: createHash('sha256').update(body).digest('hex'),
    };
    const previous = this.writing.get(name) ?? Promise.resolve();
    const done = previous.then(() => this.write(name, writtenAt, header, body));
    this.writing.set(name, done.catch(() => undefined));
    return done;
  }

  private async write(name: string, writtenAt: number, header: Header, body: Uint8Array): Promise<void> {
    const dir = join(this.options.dir, name);
    mkdirSync(dir, { recursive: true });
    const file = `${String(writtenAt).padStart(15, '0')}-${randomBytes(4).toString('hex')}${SUFFIX}`;
    const temp = join(dir, `.${file}.tmp`);
    const handle = await open(temp, 'w');
    try {
      await handle.write(`${JSON.stringify(header)}\n`);
      await handle.write(body);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, join(dir, file));
    for (const old of this.files(name).slice(this.keep)) await rm(join(dir, old), { force: true });
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
   * The newest snapshot of `name` that can be used: readable, of this `version` and this log,
   * within the log's end for every topic it names, and accepted by `accept` (a projection's own
   * condition). Each one passed over is logged with its reason; undefined means a full replay.
   */
  async load<S>(name: string, version: number, accept?: (s: Snapshot<S>) => Refusal | undefined): Promise<Snapshot<S> | undefined> {
    const { logger } = this.options;
    const files = this.files(name);
    if (files.length === 0) {
      logger.info({ projection: name }, 'no snapshot yet: the projection replays its topics whole');
      return undefined;
    }
    const ends = new Map<Topic, Map<number, number>>();
    for (const file of files) {
      const path = join(this.options.dir, name, file);
      const read = this.read<S>(path, name, version);
      let refusal = 'reason' in read ? read : undefined;
      if (!refusal && 'snapshot' in read) {
        refusal = await this.beyondEnd(read.snapshot.positions, ends);
        refusal ??= accept?.(read.snapshot);
        if (!refusal) {
          logger.info({ projection: name, file: path, writtenAt: new Date(read.snapshot.writtenAt).toISOString(), positions: describe(read.snapshot.positions) }, 'projection restored from its snapshot; reading the log after it');
          return read.snapshot;
        }
      }
      const fields = { projection: name, file: path, reason: refusal!.reason };
      if (refusal!.warn === false) logger.info(fields, 'snapshot passed over');
      else logger.warn(fields, 'snapshot not used');
    }
    logger.warn({ projection: name, snapshots: files.length }, 'no usable snapshot: the projection replays its topics whole');
    return undefined;
  }

  private read<S>(path: string, name: string, version: number): { snapshot: Snapshot<S> } | Refusal {
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch (err) {
      return { reason: `cannot be read: ${(err as Error).message}` };
    }
    const eol = bytes.indexOf(10);
    let header: Header;
    try {
      if (eol < 0) throw new Error('no header line');
      header = JSON.parse(bytes.subarray(0, eol).toString('utf8')) as Header;
    } catch (err) {
      return { reason: `its header is not readable (${(err as Error).message}): corrupt or truncated` };
    }
    if (header.format !== SNAPSHOT_FORMAT) return { reason: `format "${String(header.format)}", this build reads ${SNAPSHOT_FORMAT}` };
    if (header.name !== name) return { reason: `it is of projection "${String(header.name)}"` };
    if (header.version !== version) return { reason: `version ${String(header.version)} of the projection's state, this build reads version ${version} (written by ${header.version < version ? 'an older' : 'a newer'} build)` };
    if (header.log !== this.options.logId) return { reason: `its positions are of another log (${String(header.log)}, this one is ${this.options.logId})` };
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
    return { snapshot: { name, version, positions, writtenAt: header.writtenAt, state } };
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

  private async beyondEnd(positions: SnapshotPositions, ends: Map<Topic, Map<number, number>>): Promise<Refusal | undefined> {
    for (const [topic, cp] of positions) {
      if (![...cp.values()].some((offset) => offset > 0)) continue; // nothing of it read: nothing to be past
      let end = ends.get(topic);
      if (!end) {
        try {
          end = await this.endOf(topic);
        } catch (err) {
          return { reason: `the ${topic} topic's end could not be read to check it against (${(err as Error).message})` };
        }
        ends.set(topic, end);
      }
      for (const [partition, offset] of cp) {
        const at = end.get(partition) ?? 0;
        if (offset > at) return { reason: `its ${topic} position ${partition}:${offset} is past the log's end (${at}): the log was reset or is another one` };
      }
    }
    return undefined;
  }
}

const describe = (positions: SnapshotPositions): Record<string, string> =>
  Object.fromEntries([...positions].map(([topic, cp]) => [topic, [...cp].map(([p, o]) => `${p}:${o}`).join(',')]));

/** One projection's part in the schedule: what it saves, taken at one instant. */
export interface SnapshotSource {
  name: string;
  version: number;
  /** The state and the positions it reflects, or undefined when there is nothing to save yet. */
  take: () => { positions: SnapshotPositions; state: unknown } | undefined;
}

/**
 * Saves each source every `intervalMs` when its positions moved, and once more at close (after
 * the consumers stopped). A failed write (a full disk) is logged; the next one tries again.
 */
export class SnapshotSchedule {
  private timer: NodeJS.Timeout | undefined;
  private readonly saved = new Map<string, string>();
  private running: Promise<void> | undefined;

  constructor(
    private readonly store: SnapshotStore,
    private readonly sources: SnapshotSource[],
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.intervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => void this.saveAll(), this.intervalMs);
    this.timer.unref();
  }

  /** Saves what moved since the last save; resolves when written (failures are logged, not thrown). */
  saveAll(): Promise<void> {
    const run = async (): Promise<void> => {
      for (const source of this.sources) {
        const taken = source.take();
        if (!taken) continue;
        const mark = JSON.stringify(describe(taken.positions));
        if (this.saved.get(source.name) === mark) continue;
        try {
          await this.store.save(source.name, source.version, taken.positions, taken.state);
          this.saved.set(source.name, mark);
        } catch (err) {
          this.logger.warn({ err, projection: source.name }, 'snapshot write failed; the next one tries again');
        }
      }
    };
    const next = (this.running ?? Promise.resolve()).then(run);
    this.running = next;
    return next;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.intervalMs > 0) await this.saveAll();
  }
}

/** Per partition, whether `a` is at or before `b` (a partition missing from either is at 0). */
export function atOrBefore(a: Checkpoint, b: Checkpoint): boolean {
  for (const [p, o] of a) if (o > (b.get(p) ?? 0)) return false;
  return true;
}
