// What closes the gap after a writer's last checkpoint, as far as the service can (README: Replay
// for audits, "What is and is not provable"): records appended after the newest signed checkpoint
// and then cut from the log leave no trace in the log itself. So each checkpoint the service
// appends is also remembered outside the log, in a file beside the signing key (the witness); the
// first checkpoint after a start carries the heads the run before signed last (`previous`), so a
// tail cut while the service was down (the checkpoint that covered it cut with it) no longer
// matches a signed head once the service has started again.
import { existsSync, readFileSync } from 'node:fs';
import { open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { decodeCheckpoint, type CheckpointHead } from './checkpoint.js';

/** The witness of the key in `keyFile`: beside it, not in DATA_DIR's log. */
export const witnessPathFor = (keyFile: string): string => join(dirname(keyFile), 'audit-last-checkpoint.json');

interface WitnessFile {
  /** ms since the epoch, the checkpoint's own time */
  at: number;
  heads: CheckpointHead[];
}

export class CheckpointWitness {
  /** heads the run before signed last, until a checkpoint carrying them is in the log */
  private previous: CheckpointHead[] | undefined;

  constructor(private readonly path: string) {
    if (!existsSync(path)) return;
    try {
      const file = JSON.parse(readFileSync(path, 'utf8')) as Partial<WitnessFile>;
      if (Array.isArray(file.heads) && file.heads.length > 0) this.previous = file.heads;
    } catch (err) {
      throw new Error(`${path}: not the witness of the last audit checkpoint (${(err as Error).message.split('\n')[0]}); move it away to start without it`);
    }
  }

  /** The heads the next checkpoint carries as `previous` (undefined once one carrying them is in the log). */
  pending(): CheckpointHead[] | undefined {
    return this.previous;
  }

  /**
   * A checkpoint (its record value) is in the log: the newest head of each chain this run signed is
   * remembered, durably (a Kafka writer signs only the heads that moved); once a checkpoint carried
   * `previous`, the run before is in the log and is no longer remembered here.
   */
  async appended(value: Uint8Array): Promise<void> {
    const cp = decodeCheckpoint(value);
    if (!cp) return;
    for (const h of cp.heads) this.signed.set(chainOf(h), h);
    if (cp.previous && cp.previous.length > 0) this.previous = undefined;
    const file: WitnessFile = { at: cp.at, heads: [...(this.previous ?? []), ...this.signed.values()] };
    // Off the event loop (an fsync on a busy disk takes long), one at a time (the log's checkpoints are).
    const tmp = `${this.path}.tmp`;
    const handle = await open(tmp, 'w', 0o600);
    try {
      await handle.writeFile(JSON.stringify(file));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, this.path);
  }

  /** this run's newest signed head of each chain */
  private readonly signed = new Map<string, CheckpointHead>();
}

/** A head's chain: the embedded log's partition, or a Kafka writer's chain in it. */
const chainOf = (h: CheckpointHead): string => `${h.topic}/${h.partition}/${h.writer ?? ''}`;
