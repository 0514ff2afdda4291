// Tamper evidence (issue 27, items 3 and 4): the embedded log's hash chains and signed checkpoints,
// checked by `replay --verify` on the real log.db and by `replay --verify-file` on an export. Each
// test tampers with the store the way someone with the file would, and reads the CLI's verdict.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import Database from '../../src/stores/sqlite/driver.mjs';
import { audited, replay, rowsOf, type Row } from './audited-log.js';
import { packSegment, type SegmentRecords } from '../../src/log/embedded/segment.js';
import { chainSegment, ZERO_LINK } from '../../src/log/embedded/chain.mjs';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';

/** The rows holding a message named `name` of `channel`. */
function rowWith(db: Database.Database, channel: string, name: string): Row {
  const row = rowsOf(db, 'messages').find((r) => {
    const records = unpackValue(r.records) as SegmentRecords;
    return records.some(([key, , value]) => key.endsWith(`:${channel}`) && (unpackValue(value) as { messages: { name: string }[] }).messages.some((m) => m.name === name));
  });
  if (!row) throw new Error(`no row holds ${name}`);
  return row;
}

/** Rewrites a row's records through `edit` (value by value); the chain column stays as it was. */
function editRow(db: Database.Database, row: Row, edit: (value: Record<string, unknown>) => void): void {
  const records = (unpackValue(row.records) as SegmentRecords).map(([key, ts, value]) => {
    const event = unpackValue(value) as Record<string, unknown>;
    edit(event);
    return { key, timestamp: ts, value: packValue(event) };
  });
  db.prepare('UPDATE log_segments SET records = ? WHERE id = ?').run(Buffer.from(packSegment(records)), row.id);
}

const verify = (dataDir: string, appId: string, channel: string, ...more: string[]) => replay('--app', appId, '--channel', channel, '--verify', '--data-dir', dataDir, ...more);

describe('replay --verify: the embedded log\'s hash chains and signed checkpoints', () => {
  it('a clean log verifies (exit 0): every record chained, the checkpoint\'s heads matched', async () => {
    const { dataDir, appId, channel } = await audited();
    const r = await verify(dataDir, appId, channel);
    expect(r.stdout).toBe('');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^replay: verified the embedded log's partitions of messages of app .*: \d+ records, [1-9]\d* checkpoints \([1-9]\d* heads matched\)/m);
  }, 60_000);

  it('an unknown channel (issue 27: an error with a non-zero exit): its partition is verified and reported, then exit 3 naming it', async () => {
    const { dataDir, appId } = await audited();
    const r = await verify(dataDir, appId, 'no-such-channel');
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/^replay: verified the embedded log's partitions/m);
    expect(r.stderr).toMatch(/no record of .*no-such-channel.* an unknown channel \(check --channel\)/);
  }, 60_000);

  it('a row edited in log.db: "record changed" at its offset (exit 4)', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const row = rowWith(db, channel, 'm2');
    editRow(db, row, (e) => ((e.messages as { data: string }[])[0].data = 'payload 2, amended'));
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code).toBe(4);
    expect(r.stdout).toContain(`record changed: messages/0 offset ${row.first_offset} does not give the link stored with it`);
    expect(r.stderr).toMatch(/^replay: verification FAILED/m);
  }, 60_000);

  it('a row edited and every link after it rewritten: the signed checkpoint does not match', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const row = rowWith(db, channel, 'm1');
    editRow(db, row, (e) => ((e.messages as { name: string }[])[0].name = 'forged'));
    // Whoever edits the file can compute links too: every row of the partition chained again.
    let prev: Buffer = ZERO_LINK;
    for (const r of rowsOf(db, 'messages')) {
      const chain = chainSegment(prev, r.records, r.first_offset);
      db.prepare('UPDATE log_segments SET chain = ? WHERE id = ?').run(chain, r.id);
      prev = chain.subarray(chain.length - 32);
    }
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code).toBe(4);
    expect(r.stdout).not.toContain('record changed');
    expect(r.stdout).toMatch(/^checkpoint does not match: the checkpoint at audit\/0 offset \d+ \(.*\) gives messages\/0 offset \d+ the link/m);
  }, 60_000);

  it('a row deleted from log.db: "records missing" with the offsets (exit 4)', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const row = rowWith(db, channel, 'm2');
    db.prepare('DELETE FROM log_segments WHERE id = ?').run(row.id);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code).toBe(4);
    const last = row.first_offset + row.count - 1;
    expect(r.stdout).toContain(`records missing: messages/0 offsets ${row.first_offset} to ${last} (the log goes from offset ${row.first_offset - 1} to ${last + 1})`);
  }, 60_000);

  it('the newest rows deleted: the checkpoint names records the log no longer has', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const rows = rowsOf(db, 'messages');
    const last = rows[rows.length - 1];
    db.prepare('DELETE FROM log_segments WHERE id = ?').run(last.id);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code).toBe(4);
    expect(r.stdout).toMatch(new RegExp(`^records missing: the checkpoint at audit/0 offset \\d+ \\(.*\\) names messages/0 offset ${last.first_offset + last.count - 1}, but messages/0 ends before it \\(at offset ${last.first_offset}\\)`, 'm'));
  }, 60_000);

  it('a checkpoint altered in log.db: its signature does not match its heads', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const [row] = rowsOf(db, 'audit');
    editRow(db, row, (cp) => {
      const heads = cp.heads as { offset: number }[];
      heads[0].offset -= 1; // a checkpoint that would cover fewer records
    });
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code).toBe(4);
    expect(r.stdout).toMatch(/^checkpoint altered: the signature of the checkpoint at audit\/0 offset 0 \(.*\) does not match its heads/m);
    expect(r.stdout).toContain('record changed: audit/0 offset 0');
  }, 60_000);

  it('a key rotated: checkpoints of the retired key are refused until it is trusted again with --trust-key', async () => {
    const first = await audited(3);
    const keyFile = join(first.dataDir, 'audit-key.pem');
    const retired = await replay('--public-key', '--data-dir', first.dataDir);
    expect(retired.code, retired.stderr).toBe(0);
    expect(retired.stdout).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    writeFileSync(join(first.dataDir, 'retired.pub'), retired.stdout);
    renameSync(keyFile, `${keyFile}.old`);
    await audited(2, first.dataDir); // the next start makes a new key, and signs with it
    expect(readFileSync(keyFile, 'utf8')).not.toBe(readFileSync(`${keyFile}.old`, 'utf8'));
    const r = await verify(first.dataDir, first.appId, first.channel);
    expect(r.code).toBe(4);
    const fingerprint = /fingerprint ([0-9a-f:]+)/.exec(retired.stderr)![1];
    expect(r.stdout).toMatch(new RegExp(`^checkpoint signed by an untrusted key: the checkpoint at audit/0 offset 0 .* is signed by key ${fingerprint}, not a trusted one .*add the instance's public key or fingerprint to the keyring \\(--keyring, --trust-key\\), or the retired key of a rotation`, 'm'));
    const current = await replay('--public-key', '--data-dir', first.dataDir);
    writeFileSync(join(first.dataDir, 'current.pub'), current.stdout);
    const both = await verify(first.dataDir, first.appId, first.channel, '--trust-key', join(first.dataDir, 'retired.pub'), '--trust-key', join(first.dataDir, 'current.pub'));
    expect(both.code, both.stdout).toBe(0);
  }, 90_000);
});

describe('replay --with-proof and --verify-file: an export verified without the service', () => {
  it('a clean export verifies alone (the log gone); an edited line, a removed line and a forged checkpoint are caught', async () => {
    const { dataDir, appId, channel } = await audited();
    const exported = await replay('--app', appId, '--channel', channel, '--with-proof', '--data-dir', dataDir);
    expect(exported.code, exported.stderr).toBe(0);
    const file = join(dataDir, 'export.ndjson');
    writeFileSync(file, exported.stdout);
    renameSync(join(dataDir, 'log.db'), join(dataDir, 'log.db.away')); // no log: the export alone
    const lines = exported.stdout.trim().split('\n');
    expect(JSON.parse(lines[0]).export).toMatchObject({ version: 1, appId, publicKeys: [expect.any(String)] });

    const clean = await replay('--verify-file', file);
    expect(clean.code, clean.stdout).toBe(0);
    expect(clean.stderr).toMatch(/trusting the export's own keys \([0-9a-f:]+\)/);
    expect(clean.stderr).toMatch(/^replay: verified .*export\.ndjson: \d+ records, [1-9]\d* checkpoints/m);

    // The event as printed changed (a value that still hashes right cannot be made).
    const at = lines.findIndex((l) => l.includes('"payload 3"'));
    const edited = join(dataDir, 'edited.ndjson');
    writeFileSync(edited, lines.map((l, i) => (i === at ? l.replace('"payload 3"', '"payload 3, amended"') : l)).join('\n'));
    const e = await replay('--verify-file', edited);
    expect(e.code).toBe(4);
    expect(e.stdout).toMatch(/^record changed: messages\/0 offset \d+: its event or credential as printed is not what its value holds/m);

    const removed = join(dataDir, 'removed.ndjson');
    writeFileSync(removed, lines.filter((_, i) => i !== at).join('\n'));
    const m = await replay('--verify-file', removed);
    expect(m.code).toBe(4);
    const offset = (JSON.parse(lines[at]) as { offset: number }).offset;
    expect(m.stdout).toContain(`records missing: messages/0 offsets ${offset} to ${offset}`);

    // A checkpoint's heads altered in the export: its signature no longer holds.
    const cpAt = lines.findIndex((l) => l.includes('"checkpoint":'));
    const cpLine = JSON.parse(lines[cpAt]) as { value: string };
    const cp = unpackValue(Buffer.from(cpLine.value, 'base64')) as { heads: { offset: number }[] };
    cp.heads[0].offset -= 1;
    const forged = join(dataDir, 'forged.ndjson');
    writeFileSync(forged, lines.map((l, i) => (i === cpAt ? JSON.stringify({ ...cpLine, value: Buffer.from(packValue(cp)).toString('base64') }) : l)).join('\n'));
    const f = await replay('--verify-file', forged);
    expect(f.code).toBe(4);
    expect(f.stdout).toMatch(/^checkpoint altered: the signature of the checkpoint at audit\/0 offset 0 .* does not match its heads/m);

    // Trusting the operator's published key instead of the export's own.
    const pub = await replay('--public-key', '--data-dir', dataDir);
    writeFileSync(join(dataDir, 'operator.pub'), pub.stdout);
    const trusted = await replay('--verify-file', file, '--trust-key', join(dataDir, 'operator.pub'));
    expect(trusted.code, trusted.stdout).toBe(0);
    expect(trusted.stderr).not.toContain('trusting the export');
  }, 90_000);
});
