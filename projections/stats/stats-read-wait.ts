// Read your own writes for GET /stats when the instances share the writing of stats rows
// (production mode; the reader it waits on: stats-reader.ts). A read waits, boundedly, until the
// store's checkpoint of every partition this instance appended to includes its appends, whichever
// instance writes them. Across a rebalance of the writers' groups nobody writes a partition until
// it is handed on (up to the session timeout for an instance gone), so past half its wait a read
// stands in: it writes the samples of the stalled partitions itself, and with a roller rolls up
// what is written as the roller does (the same rows their writer writes: written twice then,
// merged by ClickHouse as a replay's are).
import type { Log, LogPosition, Topic } from '../../src/log/port.js';
import { positionsAfter, type AppliedPositions } from '../../src/log/applied-positions.js';

/**
 * The reader has applied this instance's appends, but the writers of their partitions have not
 * written their rows: another instance's writer is slow, or dead and its partitions wait for the
 * group's session timeout (KAFKA_SESSION_TIMEOUT_MS) to go to a live one.
 */
export class StatsWritersBehind extends Error {
  constructor(readonly records: number) {
    super(`the stats writers have not written ${records} records this instance appended`);
  }
}

/** What the wait asks of the stats reader. */
export interface WaitedReader {
  /** What the reader has applied of each topic. */
  readonly progress: AppliedPositions;
  /** How many records before `next` of a partition the store's rows may lack, as last read. */
  partitionBehind(topic: Topic, partition: number, next: number): number;
  /** When a partition's checkpoint (as the reader waits on it) last moved (0: never seen to). */
  movedAt(topic: Topic, partition: number): number;
  /** Reads the store's checkpoints of `topics` (the reader lets go of what they include). */
  readStore(topics: Topic[]): Promise<void>;
  /** The next offset of each partition the samples' rows do not include (the writers' checkpoint). */
  samplesWritten(topic: Topic): Promise<Map<number, number>>;
  /** Flushes this instance's own writer. */
  flushOwn?: () => Promise<void>;
  /** Writes the samples of a partition's records up to `upTo` (exclusive), as its writer would. */
  standIn?: (topic: Topic, partition: number, upTo: number) => Promise<void>;
  /** With rollups: whether this instance rolls up now, and a roll-up (one at a time). */
  roller?: { isRoller: () => boolean; rollNow: () => Promise<void> };
  /** Told of a stand-in that failed. */
  onError?: (err: unknown) => void;
}

export class StatsReadWait {
  /** Reads that stood in for the writers. */
  standIns = 0;
  /** The stand-in running for a partition (`topic` NUL `partition`), shared by the reads that wait for it. */
  private readonly standingIn = new Map<string, Promise<void>>();

  constructor(private readonly reader: WaitedReader) {}

  /**
   * Resolves once the store's rows include the records at `positions` of each topic, and the
   * reader has applied them (so the cache holds nothing older); throws after `timeoutMs`. When
   * half of `timeoutMs` has passed with the rows not written, the read stands in (see the top of
   * this file).
   */
  async reflect(targets: [Topic, LogPosition[]][], timeoutMs: number): Promise<void> {
    const reader = this.reader;
    const deadline = Date.now() + timeoutMs;
    const wanted = targets.map(([topic, positions]) => [topic, positionsAfter(positions)] as const).filter(([, target]) => target.size > 0);
    for (const [topic, target] of wanted) {
      if (!(await reader.progress.until(topic, target, Math.max(0, deadline - Date.now())))) {
        throw new Error(`the stats reader has not applied ${reader.progress.behind(topic, target)} records of ${topic}`);
      }
    }
    let pause = 10;
    const half = Math.floor(timeoutMs / 2);
    const standInAt = Date.now() + half;
    let stoodIn = false;
    for (;;) {
      const unmet = wanted.filter(([topic, target]) => !this.storeHas(topic, target));
      if (unmet.length === 0) return;
      if (!stoodIn && Date.now() >= standInAt && (reader.standIn || reader.roller)) {
        // Partitions whose rows nobody has written for half the wait (slow writers still writing are waited for).
        const stalled = unmet
          .map(([topic, target]) => [topic, new Map([...target].filter(([p, next]) => reader.partitionBehind(topic, p, next) > 0 && Date.now() - reader.movedAt(topic, p) >= half))] as const)
          .filter(([, target]) => target.size > 0);
        if (stalled.length > 0) {
          stoodIn = true;
          this.standIns++;
          // Beside the wait, not instead of it: the writers (a rebalance ending) or the roller may
          // write the rows before the stand-in has, and the read ends as soon as the store has them.
          // A stand-in that failed (the log or the store unreachable) leaves the wait to the
          // writers; one still going at the deadline goes on without the read.
          void this.standIn(stalled).catch((err: unknown) => reader.onError?.(err));
        }
      }
      // At the deadline the store is read once more before the read gives up: the rows may have
      // come while it slept or while a stand-in ran (a read waited 5 s under load for rows the
      // roller had written 1.2 s before).
      const last = Date.now() >= deadline;
      if (!last) {
        await reader.flushOwn?.();
        if (reader.roller?.isRoller()) await reader.roller.rollNow();
      }
      await reader.readStore(unmet.map(([topic]) => topic));
      if (unmet.every(([topic, target]) => this.storeHas(topic, target))) return;
      if (last) {
        const behind = unmet.reduce((n, [topic, target]) => n + this.storeBehind(topic, target), 0);
        throw new StatsWritersBehind(behind);
      }
      // Another instance's writer writes at its next flush (every 250 ms by default).
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(0, deadline - Date.now()))));
      pause = Math.min(pause * 2, 100);
    }
  }

  /** Writes what the writers have not written of these targets (their samples, then their rollups). */
  private async standIn(unmet: (readonly [Topic, Map<number, number>])[]): Promise<void> {
    const reader = this.reader;
    if (reader.standIn) {
      await Promise.all(unmet.flatMap(([topic, target]) => [...target].map(([p, upTo]) => this.standInOnce(topic, p, upTo))));
    }
    if (reader.roller) await reader.roller.rollNow();
    else await reader.readStore(unmet.map(([topic]) => topic));
  }

  /**
   * One stand-in a partition at a time, whatever the number of reads waiting (dashboards polling
   * GET /stats while a writer is gone): a read finding one running waits for it, then stands in
   * itself only for what is still not written.
   */
  private async standInOnce(topic: Topic, partition: number, upTo: number): Promise<void> {
    const key = `${topic}\u0000${partition}`;
    for (;;) {
      for (let running = this.standingIn.get(key); running; running = this.standingIn.get(key)) await running.catch(() => undefined);
      const written = await this.reader.samplesWritten(topic);
      if ((written.get(partition) ?? 0) >= upTo) return;
      // Another read may have started one while the checkpoint was read.
      if (this.standingIn.has(key)) continue;
      const done: Promise<void> = this.reader.standIn!(topic, partition, upTo).finally(() => {
        if (this.standingIn.get(key) === done) this.standingIn.delete(key);
      });
      this.standingIn.set(key, done);
      return done;
    }
  }

  private storeHas(topic: Topic, target: Map<number, number>): boolean {
    return this.storeBehind(topic, target) === 0;
  }

  private storeBehind(topic: Topic, target: Map<number, number>): number {
    let n = 0;
    for (const [p, next] of target) n += this.reader.partitionBehind(topic, p, next);
    return n;
  }
}

/** Waits until the stats store holds what `topics` held now (`reflect`: ProjectionSet.statsReflect). */
export async function statsWritten(log: Log, topics: readonly Topic[], reflect: (targets: [Topic, LogPosition[]][]) => Promise<void>): Promise<void> {
  const targets = await Promise.all(
    topics.map(async (topic): Promise<[Topic, LogPosition[]]> => [
      topic,
      [...(await log.endOffsets(topic))].filter(([, end]) => end > 0).map(([partition, end]) => ({ partition, offset: end - 1 })),
    ]),
  );
  await reflect(targets);
}
