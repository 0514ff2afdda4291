// EMBEDDED_PARTITIONS numbers the topics the embedded log makes; a topic made before keeps its count
// (history serials are offsets within a partition). A start given another count says so, naming the
// topics that keep theirs, instead of keeping it in silence.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedAdapters } from '../../src/adapters.js';
import { parseConfig } from '../../src/config.js';
import { removeDir } from '../helpers/service.js';

const dataDir = mkdtempSync(join(tmpdir(), 'cm-partitions-'));
afterAll(() => removeDir(dataDir));

async function start(partitions: number): Promise<{ msg: string; kept?: unknown }[]> {
  const lines: { msg: string; kept?: unknown }[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const adapters = embeddedAdapters(parseConfig({ DATA_DIR: dataDir, EMBEDDED_PARTITIONS: String(partitions) }), { logger: pino({ level: 'warn' }, stream) });
  await adapters.log.append('messages', [{ key: 'app:channel', value: Buffer.from('x'), timestamp: Date.now() }]);
  expect(await adapters.log.partitions('messages')).toBe(2);
  await adapters.log.close();
  await adapters.close?.();
  return lines;
}

describe('EMBEDDED_PARTITIONS on a log made before', () => {
  it('a topic keeps the partition count it was made with, and a start given another count warns, naming it', async () => {
    expect(await start(2)).toEqual([]);
    const warned = await start(4);
    expect(warned).toHaveLength(1);
    expect(warned[0].msg).toContain('EMBEDDED_PARTITIONS=4 applies only to topics the log has not made yet: audit keeps 2, messages keeps 2 (');
    // The audit topic holds the signed checkpoint the close appended.
    expect(warned[0].kept).toEqual([
      { topic: 'audit', partitions: 2 },
      { topic: 'messages', partitions: 2 },
    ]);
    expect(await start(2)).toEqual([]);
  });
});
