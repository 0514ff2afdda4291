// Tamper evidence (issue 27), what someone with write access to log.db (not to the audit key) can
// try beyond editing or deleting a row (replay-verify.test.ts), on the real log.db: a row edited
// and its link removed, as if it were older than the chain; the first rows so; and the export's
// lines a third party is given, malformed or forged, which --verify-file refuses with a clear error.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import Database from '../../src/stores/sqlite/driver.mjs';
import { startTestService, uniqueChannel, type TestService } from '../helpers/service.js';
import { audited as auditedLog, replay, rowsOf, type Row } from './audited-log.js';

/** A data directory whose log holds `count` messages on one channel, and the checkpoint the service's close takes. */
const audited = (count = 5, dataDir?: string) => auditedLog(count, dataDir, 'tampered');
import { packSegment, type SegmentRecords } from '../../src/log/embedded/segment.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import { chainSegment, ZERO_LINK } from '../../src/log/embedded/chain.mjs';
import { decodeCheckpoint } from '../../src/audit/checkpoint.js';
import type { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';

/** Rewrites a row's messages' data, and empties its chain column (rows written before the log kept a chain have none). */
function forgeUnlinked(db: Database.Database, row: Row): void {
  const records = (unpackValue(row.records) as SegmentRecords).map(([key, timestamp, value]) => {
    const event = unpackValue(value) as { messages: { data: string }[] };
    for (const m of event.messages) m.data = 'forged';
    return { key, timestamp, value: packValue(event) };
  });
  db.prepare('UPDATE log_segments SET records = ?, chain = NULL WHERE id = ?').run(Buffer.from(packSegment(records)), row.id);
}

/** Checkpoints only when the test takes them (and at start and stop), not on the interval. */
const ENV = { AUDIT_CHECKPOINT_INTERVAL_MS: '3600000' };

async function publish(t: TestService, channel: string, names: string[]): Promise<void> {
  for (const name of names) {
    const res = await t.service.app.inject({ method: 'POST', url: `/channels/${channel}/messages`, headers: { authorization: t.auth, 'content-type': 'application/json' }, payload: { name, data: `payload ${name}` } });
    expect(res.statusCode).toBe(201);
  }
}

const verify = (dataDir: string, appId: string, channel: string) => replay('--app', appId, '--channel', channel, '--verify', '--data-dir', dataDir);

describe('replay --verify: links removed from log.db', () => {
  it('a log whose first rows were appended before it kept a chain verifies (exit 0): they are counted, the chain after them checked', async () => {
    const { dataDir, appId, channel } = await audited(3);
    // As an older version left it: no link in its rows, no checkpoint, no witness.
    const db = new Database(join(dataDir, 'log.db'));
    const legacy = db.prepare("SELECT SUM(count) FROM log_segments WHERE topic = 'messages'").pluck().get() as number;
    db.prepare('UPDATE log_segments SET chain = NULL').run();
    db.prepare("DELETE FROM log_segments WHERE topic = 'audit'").run();
    db.close();
    rmSync(join(dataDir, 'audit-last-checkpoint.json'));
    await audited(3, dataDir); // this version: it chains what it appends, from 32 zero bytes, and signs it
    const r = await verify(dataDir, appId, channel);
    expect(r.stdout).toBe('');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`\\([1-9]\\d* heads matched\\); ${legacy} records carry no link \\(appended before the log kept a chain\\): not verified`));
  }, 60_000);

  it('a row edited and its link removed, after linked rows: "record not chained" (exit 4), not "appended before the log kept a chain"', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const rows = rowsOf(db, 'messages');
    expect(rows.length).toBeGreaterThan(2);
    const row = rows[2];
    forgeUnlinked(db, row);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toContain(`record not chained: messages/0 offset ${row.first_offset} carries no link, after records that do (its link was removed`);
    expect(r.stderr).not.toContain('appended before the log kept a chain');
  }, 60_000);

  it('the first rows edited and their links removed: the next row does not start a chain (exit 4)', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const rows = rowsOf(db, 'messages');
    forgeUnlinked(db, rows[0]);
    forgeUnlinked(db, rows[1]);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toContain(`chain broken: messages/0 offset ${rows[2].first_offset} is the first record with a link after records with none, but does not start a chain`);
  }, 60_000);

  it('the newest row, which the checkpoint names, edited and its link removed: the checkpoint does not match (exit 4)', async () => {
    const { dataDir, appId, channel } = await audited();
    const db = new Database(join(dataDir, 'log.db'));
    const rows = rowsOf(db, 'messages');
    const last = rows[rows.length - 1];
    forgeUnlinked(db, last);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toMatch(new RegExp(`^checkpoint does not match: the checkpoint at audit/0 offset \\d+ \\(.*\\) gives messages/0 offset ${last.first_offset + last.count - 1} the link [0-9a-f]+…, the record there carries no link`, 'm'));
  }, 60_000);
});

describe('replay --verify: bytes that decode to nothing', () => {
  it('a checkpoint\'s value replaced by bytes that are no MessagePack: "record changed" (exit 4), not a crash', async () => {
    const { dataDir, appId, channel } = await audited(2);
    const db = new Database(join(dataDir, 'log.db'));
    const [row] = rowsOf(db, 'audit');
    const [[key, timestamp]] = unpackValue(row.records) as SegmentRecords;
    db.prepare('UPDATE log_segments SET records = ? WHERE id = ?').run(Buffer.from(packSegment([{ key, timestamp, value: Buffer.from([0xc1, 0xff]) }])), row.id);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.stderr).not.toContain('replay failed');
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toContain(`record changed: audit/0 offset ${row.first_offset} does not give the link stored with it`);
  }, 60_000);

  it('a row\'s records replaced by bytes that are no segment: "record changed" at its offsets (exit 4), the rows after it still checked, not a crash', async () => {
    const { dataDir, appId, channel } = await audited(3);
    const db = new Database(join(dataDir, 'log.db'));
    const [row] = rowsOf(db, 'messages');
    db.prepare('UPDATE log_segments SET records = ? WHERE id = ?').run(Buffer.from([0xc1, 0xff]), row.id);
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.stderr).not.toContain('replay failed');
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toContain(`record changed: messages/0 offset ${row.first_offset}: the row holding it is not records the log writes (its bytes were overwritten)`);
    expect(r.stderr).toMatch(/\([1-9]\d* heads matched\)/);
    const exported = await replay('--app', appId, '--channel', channel, '--with-proof', '--data-dir', dataDir);
    expect(exported.code).toBe(1);
    expect(exported.stderr).toContain(`replay failed: messages/0 offset ${row.first_offset}: the row of log.db holding it does not decode`);
  }, 60_000);
});

describe('replay --verify: the oldest rows deleted', () => {
  it('verifies, as retention would leave it, but the summary says where the partition starts and how many checkpoint heads before it went unchecked', async () => {
    const t = await startTestService(ENV);
    const channel = uniqueChannel('head-cut');
    const appId = t.service.registry.all()[0].appId;
    await publish(t, channel, ['m0', 'm1']);
    await (t.service.log as EmbeddedLog).checkpoint();
    await publish(t, channel, ['m2', 'm3']);
    await t.close();
    const db = new Database(join(t.dataDir, 'log.db'));
    const rows = rowsOf(db, 'messages');
    for (const r of rows.slice(0, 2)) db.prepare('DELETE FROM log_segments WHERE id = ?').run(r.id);
    db.close();
    const r = await verify(t.dataDir, appId, channel);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`partitions read from past offset 0: messages/0 from offset ${rows[2].first_offset} \\([1-9]\\d* checkpoint heads name records before it, not checked\\); the records before are not there \\(deleted by retention, or cut: the chain cannot tell\\)`));
  }, 60_000);
});

describe('replay --verify-file: an export edited or malformed', () => {
  it('a checkpoint edited as printed (its value left as signed) is "checkpoint altered"; records printed in full out of the header\'s scope are reported; malformed lines and fields are refused with the line named, exit 4, no crash', async () => {
    const { dataDir, appId, channel } = await audited(3);
    const exported = await replay('--app', appId, '--channel', channel, '--with-proof', '--data-dir', dataDir);
    expect(exported.code, exported.stderr).toBe(0);
    const lines = exported.stdout.trim().split('\n');
    const cpAt = lines.findIndex((l) => l.includes('"checkpoint":'));
    const last = lines.length - 1;
    const withLine = (at: number, edit: (line: Record<string, unknown>) => unknown): string[] => lines.map((l, i) => (i === at ? JSON.stringify(edit(JSON.parse(l) as Record<string, unknown>)) : l));
    const check = async (name: string, content: string[]) => {
      const file = join(dataDir, `${name}.ndjson`);
      writeFileSync(file, content.join('\n'));
      return { file, ...(await replay('--verify-file', file)) };
    };

    // What the auditor reads of a checkpoint is what was signed: the printed heads edited.
    const printed = await check('printed', withLine(cpAt, (l) => {
      const cp = l.checkpoint as { heads: { offset: number }[] };
      cp.heads[0].offset -= 1;
      return l;
    }));
    expect(printed.code, printed.stderr).toBe(4);
    expect(printed.stdout).toMatch(/^checkpoint altered: the checkpoint at audit\/0 offset \d+ as printed is not what its value holds/m);

    // The header's scope changed (or another export's lines put under it): the records printed in
    // full are not the scope's.
    const header = JSON.parse(lines[0]) as { export: Record<string, unknown> };
    const rescoped = await check('rescoped', [JSON.stringify({ export: { ...header.export, channels: { kind: 'channel', name: 'another' } } }), ...lines.slice(1)]);
    expect(rescoped.code, rescoped.stderr).toBe(4);
    expect(rescoped.stdout).toMatch(/^record out of the export's scope: messages\/0 offset \d+ is printed in full, but it is not a record of the scope its header declares/m);
    const later = await check('later', [JSON.stringify({ export: { ...header.export, from: Date.now() + 3_600_000 } }), ...lines.slice(1)]);
    expect(later.code, later.stderr).toBe(4);
    expect(later.stdout).toContain("record out of the export's scope");

    const cases: [string, string[], string][] = [
      ['null-header', ['null', ...lines.slice(1)], ':1: not a JSON object'],
      ['null-line', [lines[0], 'null', ...lines.slice(1)], ':2: not a JSON object'],
      ['scope', [JSON.stringify({ export: { ...(JSON.parse(lines[0]) as { export: object }).export, include: ['everything'] } }), ...lines.slice(1)], ':1: the header does not say its scope'],
      ['partitions', [JSON.stringify({ export: { ...(JSON.parse(lines[0]) as { export: object }).export, partitions: { a: 1 } } }), ...lines.slice(1)], ":1: the header's partitions is not a list of {topic, partition, end}"],
      ['value', withLine(last, (l) => ({ ...l, value: 5 })), `:${last + 1}: a record's value is its bytes in base64`],
      ['prev', withLine(last, (l) => ({ ...l, prev: 5 })), `:${last + 1}: a record line's prev is 64 hex digits`],
      ['offset', withLine(last, (l) => ({ ...l, offset: -1 })), `:${last + 1}: a record line needs topic, partition and offset (whole numbers from 0)`],
      ['time', withLine(last, (l) => ({ ...l, time: 1e300 })), `:${last + 1}: a record with a value needs its key and time`],
    ];
    for (const [name, content, message] of cases) {
      const r = await check(name, content);
      expect(r.stderr, name).toContain(`replay: ${r.file}${message}`);
      expect(r.code, name).toBe(4);
      expect(r.stderr, name).not.toMatch(/replay failed|\n\s+at /);
    }

    // Bytes that are no event, and a checkpoint whose time is no date: problems reported, no crash.
    const garbage = await check('garbage', withLine(last, (l) => ({ ...l, value: 'AAAA' })));
    expect(garbage.code, garbage.stderr).toBe(4);
    expect(garbage.stdout).toMatch(/^record changed: messages\/0 offset \d+: its event or credential as printed is not what its value holds/m);
    const cpLine = JSON.parse(lines[cpAt]) as { value: string };
    const cp = unpackValue(Buffer.from(cpLine.value, 'base64')) as Record<string, unknown>;
    const badTime = await check('bad-time', withLine(cpAt, (l) => ({ ...l, value: Buffer.from(packValue({ ...cp, at: 1e20 })).toString('base64') })));
    expect(badTime.code, badTime.stderr).toBe(4);
    expect(badTime.stdout).toContain('record changed: audit/0 offset');
    expect(badTime.stderr).not.toMatch(/replay failed|Invalid time value/);
  }, 90_000);
});

describe('replay --verify: the audit topic rewritten', () => {
  it('a checkpoint removed from the middle of the audit topic, the ones after it renumbered and the chain rewritten: the next checkpoint does not match (it signs the audit topic\'s head)', async () => {
    const first = await startTestService(ENV);
    const channel = uniqueChannel('witnessed');
    const appId = first.service.registry.all()[0].appId;
    await publish(first, channel, ['m0', 'm1', 'm2']);
    await (first.service.log as EmbeddedLog).checkpoint();
    await publish(first, channel, ['m3', 'm4']);
    await first.close(); // its checkpoint signs m3 and m4, and is remembered beside the key
    const { dataDir } = first;
    // m3 and m4 cut while the service is down, with the checkpoint that signed them.
    let db = new Database(join(dataDir, 'log.db'));
    const audit = rowsOf(db, 'audit');
    const kept = audit[audit.length - 2];
    const keptCp = decodeCheckpoint((unpackValue(kept.records) as SegmentRecords)[0][2])!;
    for (const h of keptCp.heads.filter((h) => h.topic !== 'audit')) db.prepare('DELETE FROM log_segments WHERE topic = ? AND partition = ? AND first_offset > ?').run(h.topic, h.partition, h.offset);
    db.prepare("DELETE FROM log_segments WHERE topic = 'audit' AND first_offset > ?").run(kept.first_offset);
    db.close();
    // The projections' stores, past the cut log's end, would stop the start (README: A log made
    // again): whoever cut the log drops them too.
    for (const f of readdirSync(dataDir)) if (f.startsWith('projections.db')) rmSync(join(dataDir, f));
    const second = await startTestService(ENV, { dataDir }); // its first checkpoint recalls the heads the cut removed
    await publish(second, channel, ['n5', 'n6']);
    await second.close();
    expect((await verify(dataDir, appId, channel)).code).toBe(4);

    // The checkpoint that recalls them removed; the audit topic after it renumbered and chained again.
    db = new Database(join(dataDir, 'log.db'));
    const rows = rowsOf(db, 'audit');
    const recalling = rows.findIndex((r) => decodeCheckpoint((unpackValue(r.records) as SegmentRecords)[0][2])?.previous !== undefined);
    expect(recalling).toBeGreaterThan(0);
    db.prepare('DELETE FROM log_segments WHERE id = ?').run(rows[recalling].id);
    for (const r of rows.slice(recalling + 1)) db.prepare('UPDATE log_segments SET id = id - ?, first_offset = first_offset - ? WHERE id = ?').run(rows[recalling].count, rows[recalling].count, r.id);
    let prev: Buffer = ZERO_LINK;
    for (const r of rowsOf(db, 'audit')) {
      const chain = chainSegment(prev, r.records, r.first_offset);
      db.prepare('UPDATE log_segments SET chain = ? WHERE id = ?').run(chain, r.id);
      prev = chain.subarray(chain.length - 32);
    }
    db.close();
    const r = await verify(dataDir, appId, channel);
    expect(r.code, `${r.stdout}${r.stderr}`).toBe(4);
    expect(r.stdout).toMatch(/^checkpoint does not match: the checkpoint at audit\/0 offset \d+ \(.*\) gives audit\/0 offset \d+ the link/m);
  }, 120_000);
});
