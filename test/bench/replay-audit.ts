// The audit replay against the raw log read it is built on (issue 27: replay of 1,000,000 records
// at >= 0.5 of the raw read), on the embedded log (the mock broker's ~5 MiB per partition holds
// some 20,000 of these records per partition, not a million). Prints both side by side, alternating
// in the same run, and the verification of the same log (--verify) beside them. Each figure twice:
// by the clock (records/s) and by the process's own CPU time (process.cpuUsage), which the other
// processes of a loaded machine disturb far less than the clock.
//
//   npx tsx test/bench/replay-audit.ts            (BENCH_REPLAY_RECORDS=1000000 by default)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { readPartition, replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { verifyLog } from '../../src/audit/proof.js';
import { replayNdjson } from '../../src/audit/ndjson.js';

const RECORDS = Number(process.env.BENCH_REPLAY_RECORDS ?? 1_000_000);
const PARTITIONS = 4;
const CHANNELS = 1000;
const log = (line: string): void => void process.stderr.write(`[bench] ${line}\n`);

const dir = mkdtempSync(join(tmpdir(), 'cm-replay-bench-'));
const path = join(dir, 'log.db');

async function build(): Promise<void> {
  const writer = new EmbeddedLog({ path, partitions: PARTITIONS });
  const started = Date.now();
  const t0 = Date.UTC(2030, 0, 1);
  for (let at = 0; at < RECORDS; ) {
    const batch: AppendRecord[] = [];
    for (let i = 0; i < 1000 && at < RECORDS; i++, at++) {
      const channel = `ch-${at % CHANNELS}`;
      const timestamp = t0 + at;
      // The bench's publish: one message of a 129-byte JSON body's size, with its key and client.
      batch.push({ key: `app1:${channel}`, timestamp, value: encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${at}:0`, timestamp, name: 'event', data: `{"n":${at},"text":"${'x'.repeat(60)}"}`, clientId: 'bench' }] }) });
    }
    await writer.append(Topics.messages, batch);
  }
  await writer.close();
  log(`built ${RECORDS} records in ${PARTITIONS} partitions, ${CHANNELS} channels of one app, in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };

/** The raw read: every record of every partition, as Log.read returns them (what replay reads). */
async function raw(l: EmbeddedLog): Promise<number> {
  let n = 0;
  const ends = await l.endOffsets(Topics.messages);
  for (let p = 0; p < PARTITIONS; p++) for await (const records of readPartition(l, Topics.messages, p, ends.get(p) ?? 0)) n += records.length;
  return n;
}

/** The replay as the command runs it: the NDJSON chunks it writes to stdout (here written nowhere: counted). */
async function replay(l: EmbeddedLog): Promise<number> {
  let bytes = 0;
  let found = 0;
  for await (const chunk of replayNdjson(l, request, (p) => (found = p.found))) bytes += chunk.length;
  if (bytes === 0) throw new Error('nothing replayed');
  return found;
}

/** The generic path (the replay before its transcoder): each record decoded, viewed and JSON.stringify'd. */
async function replayGeneric(l: EmbeddedLog): Promise<number> {
  let n = 0;
  let bytes = 0;
  for await (const { line } of replayScope(l, request)) {
    bytes += JSON.stringify(line).length + 1;
    n++;
  }
  if (bytes === 0) throw new Error('nothing replayed');
  return n;
}

async function verify(l: EmbeddedLog): Promise<number> {
  const v = await verifyLog(l, request, new Set());
  if (v.problemTotal > 0) throw new Error(`verification found problems: ${v.problems[0]}`);
  return v.records;
}

interface Row {
  name: string;
  records: number;
  seconds: number;
  cpuSeconds: number;
}

async function timed(name: string, run: (l: EmbeddedLog) => Promise<number>): Promise<Row> {
  // A fresh handle each time: nothing kept in memory between runs, every read from SQLite.
  const l = new EmbeddedLog({ path, partitions: PARTITIONS });
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  const records = await run(l);
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuSeconds = (used.user + used.system) / 1e6;
  await l.close();
  log(`${name}: ${records} records in ${seconds.toFixed(2)} s (${Math.round(records / seconds).toLocaleString('en')} records/s; ${cpuSeconds.toFixed(2)} s of CPU)`);
  return { name, records, seconds, cpuSeconds };
}

await build();
const rows: Row[] = [];
for (let round = 0; round < 2; round++) {
  rows.push(await timed('raw log read', raw));
  rows.push(await timed('replay --all-channels (NDJSON, as the command writes it)', replay));
  rows.push(await timed('replay, generic path (decode, view, JSON.stringify: the replay before)', replayGeneric));
  rows.push(await timed('replay --verify (chains, checkpoints)', verify));
}
const sum = (name: string) =>
  rows.filter((r) => r.name === name).reduce((a, r) => ({ records: a.records + r.records, seconds: a.seconds + r.seconds, cpuSeconds: a.cpuSeconds + r.cpuSeconds }), { records: 0, seconds: 0, cpuSeconds: 0 });
const rawTotal = sum('raw log read');
const rawRate = rawTotal.records / rawTotal.seconds;
const rawCpuRate = rawTotal.records / rawTotal.cpuSeconds;
process.stdout.write(`| Replay of ${RECORDS.toLocaleString('en')} records, embedded, 2 rounds alternating | records/s | vs raw read | records/CPU-s | vs raw read (CPU) |\n|---|---:|---:|---:|---:|\n`);
for (const name of ['raw log read', 'replay --all-channels (NDJSON, as the command writes it)', 'replay, generic path (decode, view, JSON.stringify: the replay before)', 'replay --verify (chains, checkpoints)']) {
  const t = sum(name);
  const rate = t.records / t.seconds;
  const cpuRate = t.records / t.cpuSeconds;
  process.stdout.write(`| ${name} | ${Math.round(rate).toLocaleString('en')} | ${(rate / rawRate).toFixed(2)} | ${Math.round(cpuRate).toLocaleString('en')} | ${(cpuRate / rawCpuRate).toFixed(2)} |\n`);
}
rmSync(dir, { recursive: true, force: true });
