// The service's checkpoint signing, as both logs take it (src/adapters.ts, src/production-adapters.ts):
// AUDIT_KEY_FILE's key (made at the first start), endorsed by AUDIT_PREVIOUS_KEY_FILE's after a
// rotation, and the witness beside the key (witness.ts).
import { existsSync } from 'node:fs';
import type { CheckpointOptions, CheckpointWitness } from '../log/port.js';
import { CheckpointSigner } from './checkpoint.js';
import { CheckpointWitness as Witness, witnessPathFor } from './witness.js';

export type Checkpointing<H> = CheckpointOptions<H> & { witness: CheckpointWitness };

/** The settings it takes (src/config.ts's names): the audit layer does not import the service's configuration. */
export interface CheckpointSettings {
  auditKeyFile: string;
  auditPreviousKeyFile?: string;
  auditCheckpointIntervalMs: number;
}

export function checkpointing<H extends { topic: string; partition: number; offset: number; link: Uint8Array; writer?: string; seq?: number }>(config: CheckpointSettings): Checkpointing<H> {
  const signer = CheckpointSigner.loadOrCreate(config.auditKeyFile);
  const retired = config.auditPreviousKeyFile;
  if (retired !== undefined) {
    if (!existsSync(retired)) throw new Error(`AUDIT_PREVIOUS_KEY_FILE ${retired} does not exist (the retired key, PEM, that endorses AUDIT_KEY_FILE's)`);
    signer.endorsedBy(CheckpointSigner.load(retired));
  }
  return { sign: (heads, previous) => signer.encode(heads, Date.now(), previous), intervalMs: config.auditCheckpointIntervalMs, witness: new Witness(witnessPathFor(config.auditKeyFile)) };
}
