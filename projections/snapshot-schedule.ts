import type { Logger } from 'pino';
import { describe, type SnapshotPositions, type SnapshotStore } from './snapshots.js';

// When the in-memory projections' snapshots are saved (README: A bounded start); what a snapshot
// is and how it is checked: projections/snapshots.ts.

/** One projection's part in the schedule: what it saves, taken at one instant. */
export interface SnapshotSource {
  name: string;
  version: number;
  /** The state and the positions it reflects, or undefined when there is nothing to save yet. */
  take: () => { positions: SnapshotPositions; state: unknown } | undefined;
}

/**
 * Saves each source every `intervalMs` when its positions moved, and once more at close (after
 * the consumers stopped). A failed write (a full disk) is logged; the next one tries again. With a
 * shared store: an interval's save goes there too when the newest shared one is older than its
 * interval (SnapshotStore), and the close's always does (unless this instance shared those
 * positions already): a stop leaves the newest state for the next instance to start, whichever it is.
 */
export class SnapshotSchedule {
  private timer: NodeJS.Timeout | undefined;
  private readonly saved = new Map<string, string>();
  private readonly shared = new Map<string, string>();
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
  saveAll(final = false): Promise<void> {
    const run = async (): Promise<void> => {
      for (const source of this.sources) {
        const taken = source.take();
        if (!taken) continue;
        const mark = JSON.stringify(describe(taken.positions));
        const local = this.saved.get(source.name) !== mark;
        const shared = this.shared.get(source.name) !== mark;
        if (!local && !(final && shared)) continue;
        try {
          const done = await this.store.save(source.name, source.version, taken.positions, taken.state, { local, shared: !shared ? 'no' : final ? 'now' : 'due' });
          this.saved.set(source.name, mark);
          if (done.shared) this.shared.set(source.name, mark);
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
    if (this.intervalMs > 0) await this.saveAll(true);
  }
}

