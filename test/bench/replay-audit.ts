// The audit replay against the raw log read it is built on (issue 27: replay of 1,000,000 records
// at >= 0.5 of the raw read), on the embedded log (the mock broker's ~5 MiB per partition holds
// some 20,000 of these records per partition, not a million). Each figure twice: by the clock
// (records/s) and by the process's own CPU time (process.cpuUsage), which the other processes of a
// loaded machine disturb less than the clock, but still (a shared core's caches, the host's load).
// So the two are measured in pairs under the same conditions: many rounds in one process, each a
// raw read and a replay of the whole log back to back (which goes first alternates), each on a
// fresh handle after a full garbage collection (neither pays for the other's garbage), the first
// rounds discarded (warm-up: code not optimised yet, caches cold); the ratio is taken per round and
// its median printed, with every round's figures on stderr. The raw read is Log.read of every
// record (what a plain full read of the log costs), unchanged. The generic path and --verify
// (seconds each) run once after the rounds.
//
//   npx tsx test/bench/replay-audit.ts
//   BENCH_REPLAY_RECORDS=1000000 BENCH_REPLAY_ROUNDS=12 BENCH_REPLAY_WARMUP=2 (defaults);
//   BENCH_REPLAY_ONLY=rounds: the rounds alone (no generic path, no --verify)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { EmbeddedLog } from '../../src/log/embedded/embedded-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { readPartition, replayScope, type ScopeRequest } from '../../src/audit/replay-scope.js';
import { verifyLog } from '../../src/audit/proof.js';
import { replayNdjson } from '../../src/audit/ndjson.js';

const RECORDS = Number(process.env.BENCH_REPLAY_RECORDS ?? 1_000_000);
const PARTITIONS = 4;
const CHANNELS = 1000;
const ROUNDS = Number(process.env.BENCH_REPLAY_ROUNDS ?? 12);
const WARMUP = Number(process.env.BENCH_REPLAY_WARMUP ?? 2);
const ONLY_ROUNDS = process.env.BENCH_REPLAY_ONLY === 'rounds';
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
  for await (const chunk of replayNdjson(l, request, (p) => (found = p.found), true)) bytes += chunk.length;
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

interface Run {
  records: number;
  seconds: number;
  cpuSeconds: number;
  /** time spent in garbage collection during the run */
  gcSeconds: number;
  /** times the system took the CPU from the process during the run (other processes' load) */
  switches: number;
}

// A full collection before each run, so a run does not pay for the garbage of the one before.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
setFlagsFromString('--no-expose-gc');
/** garbage collections: start and duration, ms on performance.now()'s clock */
const collections: { start: number; duration: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) collections.push({ start: e.startTime, duration: e.duration });
}).observe({ entryTypes: ['gc'] });

async function timed(run: (l: EmbeddedLog) => Promise<number>): Promise<Run> {
  // A fresh handle each time: nothing kept in memory between runs, every read from SQLite.
  const l = new EmbeddedLog({ path, partitions: PARTITIONS });
  collect();
  await new Promise((r) => setImmediate(r));
  const from = performance.now();
  const switchesBefore = process.resourceUsage().involuntaryContextSwitches;
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  const records = await run(l);
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuSeconds = (used.user + used.system) / 1e6;
  const switches = process.resourceUsage().involuntaryContextSwitches - switchesBefore;
  const to = performance.now();
  await new Promise((r) => setTimeout(r, 20)); // the observer's entries come after
  const gcSeconds = collections.filter((c) => c.start >= from && c.start < to).reduce((a, c) => a + c.duration, 0) / 1000;
  if (collections.length > 10_000) collections.splice(0, collections.length - 1000);
  await l.close();
  return { records, seconds, cpuSeconds, gcSeconds, switches };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const rate = (r: Run): string => `${Math.round(r.records / r.seconds).toLocaleString('en')}/s, ${r.cpuSeconds.toFixed(3)} s CPU (gc ${r.gcSeconds.toFixed(3)} s, ${r.switches} involuntary switches)`;

await build();
const rounds: { raw: Run; replay: Run }[] = [];
for (let round = 0; round < WARMUP + ROUNDS; round++) {
  let rawRun: Run;
  let replayRun: Run;
  if (round % 2 === 0) {
    rawRun = await timed(raw);
    replayRun = await timed(replay);
  } else {
    replayRun = await timed(replay);
    rawRun = await timed(raw);
  }
  if (rawRun.records !== RECORDS || replayRun.records !== RECORDS) throw new Error(`read ${rawRun.records} and replayed ${replayRun.records} of ${RECORDS}`);
  const warm = round >= WARMUP;
  if (warm) rounds.push({ raw: rawRun, replay: replayRun });
  log(
    `round ${round + 1}${warm ? '' : ' (warm-up, not counted)'}${round % 2 === 0 ? ' raw first' : ' replay first'}: raw ${rate(rawRun)}; replay ${rate(replayRun)}; ` +
      `replay/raw ${(rawRun.seconds / replayRun.seconds).toFixed(2)} by the clock, ${(rawRun.cpuSeconds / replayRun.cpuSeconds).toFixed(2)} by CPU`,
  );
}
const clockRatios = rounds.map((r) => r.raw.seconds / r.replay.seconds);
const cpuRatios = rounds.map((r) => r.raw.cpuSeconds / r.replay.cpuSeconds);
const range = (xs: number[]): string => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;
const perRecordUs = (pick: (r: { raw: Run; replay: Run }) => Run) => median(rounds.map((r) => (pick(r).cpuSeconds / pick(r).records) * 1e6));
const perSecond = (pick: (r: { raw: Run; replay: Run }) => Run) => Math.round(median(rounds.map((r) => pick(r).records / pick(r).seconds)));
process.stdout.write(
  `| ${RECORDS.toLocaleString('en')} records, embedded, ${rounds.length} rounds (${WARMUP} warm-up not counted), medians | records/s | µs of CPU a record | vs raw read, clock (median, range) | vs raw read, CPU (median, range) |\n|---|---:|---:|---:|---:|\n` +
    `| raw log read | ${perSecond((r) => r.raw).toLocaleString('en')} | ${perRecordUs((r) => r.raw).toFixed(3)} | 1 | 1 |\n` +
    `| replay --all-channels (NDJSON, as the command writes it) | ${perSecond((r) => r.replay).toLocaleString('en')} | ${perRecordUs((r) => r.replay).toFixed(3)} | **${median(clockRatios).toFixed(2)}** (${range(clockRatios)}) | **${median(cpuRatios).toFixed(2)}** (${range(cpuRatios)}) |\n`,
);
if (!ONLY_ROUNDS) {
  // The slow ones, once each, against the median raw read.
  const rawCpu = median(rounds.map((r) => r.raw.cpuSeconds / r.raw.records));
  const rawClock = median(rounds.map((r) => r.raw.seconds / r.raw.records));
  for (const [name, run] of [
    ['replay, generic path (decode, view, JSON.stringify: the replay before)', replayGeneric],
    ['replay --verify (chains, checkpoints)', verify],
  ] as const) {
    const r = await timed(run);
    log(`${name}: ${rate(r)}`);
    process.stdout.write(`| ${name}, once | ${Math.round(r.records / r.seconds).toLocaleString('en')} | ${((r.cpuSeconds / r.records) * 1e6).toFixed(3)} | ${(rawClock / (r.seconds / r.records)).toFixed(2)} | ${(rawCpu / (r.cpuSeconds / r.records)).toFixed(2)} |\n`);
  }
}
rmSync(dir, { recursive: true, force: true });
