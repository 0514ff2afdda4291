// An export with proof (`replay --with-proof`) of large publishes: its lines were joined a whole read
// batch (5,000 records) at a time into one string, past the longest string V8 makes (2^29 - 24
// characters) once the records were large, and the export stopped ("Invalid string length", exit 1):
// 145 publishes of MAX_PUBLISH_BYTES at the defaults (8 messages of 65,000 control characters, each
// printed as 6: about 3.8 million characters a line) were enough for a client to keep an app's
// records out of any export with proof.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { Topics } from '../../src/log/port.js';
import { exportWithProof } from '../../src/audit/proof.js';
import { EXPORT_PIECE_CHARS } from '../../src/audit/export-format.js';
import { DEFAULT_LIMITS } from '../../src/limits.js';
import type { ScopeRequest } from '../../src/audit/replay-scope.js';
import type { LogEvent } from '../../src/domain/events.js';

describe('replay --with-proof of large publishes', () => {
  it('145 publishes of MAX_PUBLISH_BYTES of control characters: every record exported, in pieces of a bounded length', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cm-export-large-'));
    const log = new EmbeddedLog({ path: join(dir, 'log.db'), partitions: 1 });
    try {
      const data = '\u0001'.repeat(65_000);
      const messages = Array.from({ length: 8 }, (_, i) => ({ id: `m:${i}`, timestamp: 1, name: `n${i}`, data, clientId: 'c' }));
      expect(8 * 65_000).toBeLessThanOrEqual(DEFAULT_LIMITS.maxPublishBytes);
      const value = encodeEvent({ type: 'messages.published', appId: 'app1', channel: 'flood', transport: 'rest', messages, keyName: 'app1.k' } as LogEvent);
      for (let i = 0; i < 145; i += 29) await log.append(Topics.messages, Array.from({ length: 29 }, (_, j) => ({ key: 'app1:flood', timestamp: 1_000 + i + j, value })));
      const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
      let records = 0;
      let chars = 0;
      let longestPiece = 0;
      let longestLine = 0;
      for await (const piece of exportWithProof(log, request)) {
        expect(piece.endsWith('\n')).toBe(true);
        chars += piece.length;
        longestPiece = Math.max(longestPiece, piece.length);
        for (let from = 0; from < piece.length; ) {
          const end = piece.indexOf('\n', from);
          longestLine = Math.max(longestLine, end - from);
          if (piece.startsWith('{"topic":"messages"', from)) records++;
          from = end + 1;
        }
      }
      expect(records).toBe(145);
      expect(chars).toBeGreaterThan(2 ** 29);
      expect(longestLine).toBeGreaterThan(3_000_000);
      expect(longestPiece).toBeLessThan(EXPORT_PIECE_CHARS + longestLine + 2);
    } finally {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
