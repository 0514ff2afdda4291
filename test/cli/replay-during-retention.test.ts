// replay --verify (and its export) reading a partition in batches while the service's retention
// deletes the oldest rows of it: the replay reads the log as it was when it opened it (one SQLite
// read transaction), so the rows deleted meanwhile are still read and no gap shows between two
// batches; before, the second batch began at the first row left, and the verification reported
// "records missing" (exit 4, a tampering alarm) for what retention had deleted.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { EmbeddedLogReader } from '../../src/log/embedded/embedded-log-reader.js';
import { Topics } from '../../src/log/port.js';
import { exportWithProof, verifyLog } from '../../src/audit/proof.js';
import { replayScope, type ScopeProgress, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { removeDir } from '../helpers/service.js';

const dir = mkdtempSync(join(tmpdir(), 'cm-retention-read-'));
afterAll(() => removeDir(dir));

it("a replay's reader reads the partition as it was at its opening while the service's retention deletes its oldest rows: no gap between batches, the verification finds nothing wrong", async () => {
  const path = join(dir, 'log.db');
  const service = new EmbeddedLog({ path, retentionMs: 3600_000 });
  let reader: EmbeddedLogReader | undefined;
  const fresh = (): EmbeddedLogReader => new EmbeddedLogReader({ path });
  try {
    // Twelve rows of 1,000 records past retention, and a recent one (retention never deletes a partition's newest row).
    const old = Date.now() - 10 * 3600_000;
    for (let s = 0; s < 12; s++) {
      await service.append(Topics.messages, Array.from({ length: 1000 }, (_, i) => ({ key: 'app:ch', timestamp: old + s * 1000 + i, value: new Uint8Array([s, i & 255]) })));
    }
    await service.append(Topics.messages, [{ key: 'app:ch', timestamp: Date.now(), value: new Uint8Array([1]) }]);
    // What replay opens: one reader for the batches, another for a verification after the retention.
    reader = new EmbeddedLogReader({ path, snapshot: true });
    const other = new EmbeddedLogReader({ path, snapshot: true });

    // The replay's batches, with the service's retention run between the first and the second.
    const first = reader.readChained(Topics.messages, 0, 0, 5000);
    expect(first.map((r) => r.offset)).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(await service.enforceRetention(Date.now())).toBe(12);
    const now = fresh();
    expect(now.readChained(Topics.messages, 0, 0, 10).map((r) => r.offset)).toEqual([12000]); // the rows are gone
    await now.close();
    const second = reader.readChained(Topics.messages, 0, 5000, 5000);
    expect(second[0].offset).toBe(5000);
    expect(second.map((r) => r.offset)).toEqual(Array.from({ length: 5000 }, (_, i) => 5000 + i));

    // A verification from a reader opened before the retention: every record, nothing missing.
    const request: ScopeRequest = { appId: 'app', channels: { kind: 'channel', name: 'ch' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
    const verifier = await verifyLog(other, request, new Set());
    expect(verifier.problems).toEqual([]);
    expect(verifier.records).toBe(12001);
    await other.close();

    // After the retention: the replay and the export count the records the partition still holds, not its offsets from 0.
    const after = new EmbeddedLogReader({ path, snapshot: true });
    try {
      expect(await after.lowOffsets(Topics.messages)).toEqual(new Map([[0, 12000]]));
      let replayed: ScopeProgress | undefined;
      for await (const _ of replayScope(after, request, (p) => (replayed = { ...p })));
      expect(replayed).toMatchObject({ read: 1, total: 1 });
      let exported: ScopeProgress | undefined;
      for await (const _ of exportWithProof(after, request, (p) => (exported = { ...p })));
      expect(exported).toMatchObject({ read: 1, total: 1 });
    } finally {
      await after.close();
    }
  } finally {
    await reader?.close();
    await service.close();
  }
}, 60_000);
