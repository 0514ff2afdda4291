// The embedded log's signed checkpoints (tamper evidence, src/audit/checkpoint.ts): the chain heads,
// signed and appended to the `audit` topic every intervalMs when they moved, once as the log opens
// (what a run that died left unsigned), and at close; one at a time. `witness` (src/audit/witness.ts):
// the heads the run before signed last, which the next checkpoint carries (`previous`) even when
// the log did not move, and is told of each checkpoint appended.
import type { CheckpointOptions as Options } from '../port.js';
import type { ChainHead } from './chain-reader.js';
import { Topics } from '../port.js';

export type CheckpointOptions = Options<ChainHead>;

export class EmbeddedCheckpoints {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> = Promise.resolve();
  private lastHeads = '';
  private stopped = false;

  constructor(
    private readonly options: CheckpointOptions,
    /** the heads to sign, the audit topic's own with them */
    private readonly heads: () => ChainHead[],
    private readonly append: (value: Uint8Array) => Promise<unknown>,
  ) {
    const take = (): void => void this.checkpoint().catch((err) => options.onError?.(err));
    this.timer = setInterval(take, options.intervalMs);
    this.timer.unref();
    setImmediate(take);
  }

  /** A checkpoint of the heads if they moved (or the run before's are to be carried), after the one in flight. */
  checkpoint(): Promise<void> {
    const next = this.running.then(() => this.take());
    this.running = next.catch(() => undefined);
    return next;
  }

  private async take(): Promise<void> {
    if (this.stopped) return;
    const heads = this.heads();
    // The audit topic's own head is signed too (the checkpoint before this one: the audit topic can
    // then not be rewritten under the signatures, a checkpoint removed from it and the rest renumbered),
    // but a checkpoint alone is not a move of the log: none is taken for it.
    const moved = heads.filter((h) => h.topic !== Topics.audit);
    const seen = moved.map((h) => `${h.topic}/${h.partition}@${h.offset}`).join(',');
    const previous = this.options.witness?.pending();
    if ((moved.length === 0 || seen === this.lastHeads) && !previous) return;
    this.lastHeads = seen;
    const value = this.options.sign(heads, previous);
    await this.append(value);
    await this.options.witness?.appended(value);
  }

  /** The last checkpoint (a failure goes to onError: those heads stay unsigned, as between two checkpoints); none after. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.checkpoint().catch((err) => this.options.onError?.(err));
    this.stopped = true;
  }
}
