// An audit export's lines (src/audit/export-format.ts exportLines): a line longer than the limit is
// refused before it is held whole, as an export format error naming the line.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExportFormatError, exportLines } from '../../src/audit/export-format.js';

const fileWith = (text: string): string => {
  const file = join(mkdtempSync(join(tmpdir(), 'cm-export-')), 'export.ndjson');
  writeFileSync(file, text);
  return file;
};

const all = async (path: string, max: number): Promise<string[]> => {
  const out: string[] = [];
  for await (const line of exportLines(path, max)) out.push(line);
  return out;
};

describe('exportLines', () => {
  it('gives each line without its end (\\n or \\r\\n), the last one too', async () => {
    expect(await all(fileWith('{"a":1}\n{"b":"é"}\r\n\n{"c":3}'), 64)).toEqual(['{"a":1}', '{"b":"é"}', '', '{"c":3}']);
  });

  it('refuses a line longer than the limit, naming it, in the middle or at the end of the file', async () => {
    const long = 'x'.repeat(200);
    await expect(all(fileWith(`{"a":1}\n${long}\n{"b":2}\n`), 100)).rejects.toThrow(ExportFormatError);
    await expect(all(fileWith(`{"a":1}\n${long}\n{"b":2}\n`), 100)).rejects.toThrow(/export\.ndjson:2: a line longer than 100 bytes/);
    await expect(all(fileWith(`{"a":1}\n${long}`), 100)).rejects.toThrow(/:2: a line longer than 100 bytes/);
    expect(await all(fileWith(`${'y'.repeat(100)}\n`), 100)).toEqual(['y'.repeat(100)]);
  });
});
