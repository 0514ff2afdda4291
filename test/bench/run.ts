// `npm run bench`: publish throughput of a bare fastify baseline and of the service (embedded, and
// production when its infrastructure is there), and publish-to-visible latency in history.
// A measurement, never a test: it prints figures and fails only when requests failed.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchOptions, commandLine } from './options.js';
import { killAllNow, startServer, StartError, ROOT, type ChildServer } from './servers.js';
import { startServiceChild, PERSISTED_NAMESPACE, type ServiceChild } from './service-child.js';
import { productionEnv } from './production-env.js';
import { InfraCpu } from './infra-cpu.js';
import { replayBench, statsQueryBench } from './stats-bench.js';
import { tailMemoryBench } from './tail-memory.js';
import { channelsBench } from './channels-bench.js';
import { runLoad, startLoad, type LoadResult, type LoadSpec } from './load.js';
import { combined, failuresOf, fmt, log, measure, roundsNote, warmUp, type Measured } from './rounds.js';
import { measureVisibility } from './visibility.js';
import { mainThreadProfile, summarizeProfile } from './cpu-profile.js';
import { machineLine, markdown, sectionOf, table, throughputTable, visibilityTable, withSection, type Report } from './report.js';
import { runSoak, soakMarkdown, soakTable } from './soak.js';
import { probeRealtime, realtimeBench, realtimeUrl, type RealtimeServerResult, type RealtimeTarget } from './realtime-bench.js';
import { fanoutTable, latencyTable, memoryTable, realtimeMarkdown } from './realtime-tables.js';
import { cometBench, cometMarkdown, COMET_SUBSCRIBERS, type CometRow } from './comet-bench.js';

const options = benchOptions(process.env);
const DATA = 'bench payload: the quick brown fox jumps over the lazy dog, then runs back the way it came 0123456789';
const BODY = JSON.stringify([{ name: 'bench', data: DATA }]);
const RATIO_TARGET = 0.6;
/** Publishes are spread over these channels. */
const BENCH_PATHS = Array.from({ length: options.channels }, (_, i) => `/channels/bench-${i}/messages`);
// Above this 1-minute load average, something besides the bench is using the CPUs.
const BUSY_LOAD = 0.5;
const SETTLE_MS = 2000;
const RESULTS_FILE = join(ROOT, 'test/bench/last-results.md');
/**
 * MAX_CONNECTIONS of the realtime service child: WebSocket sockets do not count against it, but the
 * open-file limit is shared, and REALTIME_MAX_CONNECTIONS is lowered to what the HTTP ones leave.
 */
const HTTP_CONNECTIONS_FOR_REALTIME = 1_000;

const loadAverage = (): number => loadavg()[0];
// Children die with the bench: on normal exit, on errors, and on Ctrl-C.
const running = new Set<{ stop(): Promise<void> }>();
process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping the servers`);
    void Promise.allSettled([...running].map((r) => r.stop())).finally(() => process.exit(130));
  });
}

async function using<T extends { stop(): Promise<void> }>(resource: T, use: (r: T) => Promise<void>): Promise<void> {
  running.add(resource);
  try {
    await use(resource);
  } finally {
    running.delete(resource);
    await resource.stop();
  }
}

/** --cpu-prof arguments for a child when BENCH_CPU_PROF=1, and where its profile lands. */
function profiling(name: string): { nodeArgs: string[]; dir?: string } {
  if (!options.cpuProfile) return { nodeArgs: [] };
  const dir = mkdtempSync(join(tmpdir(), `cm-bench-prof-${name}-`));
  return { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir], dir };
}

function printProfile(name: string, dir: string | undefined): void {
  const file = dir && mainThreadProfile(dir);
  if (!file) return;
  const s = summarizeProfile(file, ROOT);
  const rows = (spots: typeof s.functions): string[][] => spots.map((h) => [h.name, h.selfMs.toFixed(0), `${(h.share * 100).toFixed(1)}%`]);
  log(`${name}: CPU profile ${file} (${(s.busyMs / 1000).toFixed(1)} s busy, whole process life)`);
  console.log(table(['self time by function', 'ms', 'share'], rows(s.functions), [false, true, true]));
  console.log(table(['self time by place', 'ms', 'share'], rows(s.places), [false, true, true]));
}

function loadSpec(label: string, url: string, paths: string[], headers: Record<string, string>, durationS: number): LoadSpec {
  return {
    label,
    url,
    paths,
    headers: { 'content-type': 'application/json', ...headers },
    body: BODY,
    connections: options.connections,
    pipelining: options.pipelining,
    durationS,
    progressEveryS: 2,
  };
}

/**
 * Bare and service publish throughput in many short alternating rounds (bare first in odd
 * rounds, the service first in even ones), so that both see the same machine: on a shared or
 * virtual machine throughput drifts by tens of percent within minutes, and rounds measured
 * minutes apart differed by as much as the change being measured. Rounds of equal length, added
 * up, make "vs bare" the ratio of the two totals.
 */
async function alternateWithBare(bare: ChildServer, service: ServiceChild, label: string, infra?: InfraCpu): Promise<{ bareRuns: Measured[]; serviceRuns: Measured[] }> {
  const bareSpec = loadSpec('bare POST /bare', bare.url, ['/bare'], {}, options.roundS);
  const serviceSpec = loadSpec(label, service.server.url, BENCH_PATHS, { authorization: service.auth }, options.roundS);
  await warmUp(bareSpec, options.warmupS);
  await warmUp(serviceSpec, options.warmupS);
  const bareRuns: Measured[] = [];
  const serviceRuns: Measured[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    log(`throughput round ${round} of ${options.rounds} (${label})`);
    const measureService = async (): Promise<void> => {
      const before = infra?.read();
      const run = await measure(serviceSpec, service.server);
      serviceRuns.push(run);
      if (infra && before) infra.add(before, infra.read(), run.result.total);
    };
    if (round % 2 === 1) {
      bareRuns.push(await measure(bareSpec, bare));
      await measureService();
    } else {
      await measureService();
      bareRuns.push(await measure(bareSpec, bare));
    }
  }
  return { bareRuns, serviceRuns };
}

async function interleavedThroughput(report: Report, bare: ChildServer, embedded: ServiceChild): Promise<void> {
  const { bareRuns, serviceRuns } = await alternateWithBare(bare, embedded, 'service embedded publish');
  report.throughput.push({ setup: 'bare fastify (`POST /bare` → 201)', ...combined(bareRuns) });
  report.throughput.push({ setup: 'service, embedded (SQLite log and store)', ...combined(serviceRuns) });
  if ([...bareRuns, ...serviceRuns].some((r) => failuresOf(r.result) > 0)) report.failed = true;
  if (options.rounds > 1) report.notes.push(roundsNote('embedded', bareRuns, serviceRuns));
}

/** Production throughput in rounds alternating with bare rounds of its own (after the embedded ones). */
async function productionThroughput(report: Report, bare: ChildServer, production: ServiceChild, setup: string, infra?: InfraCpu): Promise<void> {
  const { bareRuns, serviceRuns } = await alternateWithBare(bare, production, 'service production publish', infra);
  const infraCpu = infra?.describe();
  if (infraCpu) {
    log(`service production publish: the infrastructure's CPU per publish: ${infraCpu}`);
    report.notes.push(`CPU of the local infrastructure's processes during the production rounds, per publish (/proc, 10 ms ticks): ${infraCpu}; the service's own is the row's "server CPU".`);
  }
  const total = (runs: Measured[]): number => runs.reduce((n, r) => n + r.result.reqPerSec, 0);
  report.throughput.push({ setup, ...combined(serviceRuns), vsBare: total(serviceRuns) / total(bareRuns) });
  if ([...bareRuns, ...serviceRuns].some((r) => failuresOf(r.result) > 0)) report.failed = true;
  if (options.rounds > 1) report.notes.push(roundsNote('production', bareRuns, serviceRuns));
}

/** Throughput and visibility of the service in one mode; errors become "skipped" rows for production. */
async function benchService(
  report: Report,
  mode: 'embedded' | 'production',
  modeEnv: Record<string, string>,
  setup: string,
  started?: { service: ServiceChild; profileDir?: string },
): Promise<void> {
  let prof: { nodeArgs: string[]; dir?: string } = { nodeArgs: [], dir: started?.profileDir };
  let service: ServiceChild;
  if (started) {
    service = started.service;
  } else {
    log(`service, ${mode}: starting the service in a child process`);
    prof = profiling(mode);
    service = await startServiceChild(`service-${mode}`, modeEnv, prof.nodeArgs);
  }
  const { url } = service.server;
  const headers = { authorization: service.auth };
  const spec = loadSpec(`service ${mode} publish`, url, BENCH_PATHS, headers, options.durationS);
  const tag = randomBytes(3).toString('hex');
  const channels = [
    { channel: `vis-${tag}`, label: 'memory tail' },
    { channel: `${PERSISTED_NAMESPACE}:vis-${tag}`, label: `persisted (${mode === 'production' ? 'ClickHouse' : 'SQLite'})` },
  ];
  const visibility = async (load: string, suffix: string): Promise<void> => {
    for (const { channel, label } of channels) {
      log(`service, ${mode}: publish → visible, ${label} channel, ${load}: ${options.samples} samples`);
      const result = await measureVisibility({ url, auth: service.auth, channel: channel + suffix, samples: options.samples, data: DATA });
      log(
        `service, ${mode}: visible p50 ${result.visibleP50.toFixed(2)} ms, p99 ${result.visibleP99.toFixed(2)} ms, ` +
          `max ${result.visibleMax.toFixed(1)} ms (ack p50 ${result.ackP50.toFixed(2)} ms, ${result.polls.toFixed(1)} polls per sample, ${result.failures} not visible)`,
      );
      report.visibility.push({ mode, channel: label, load, result });
      if (result.failures > 0) report.failed = true;
    }
  };

  await using(service, async () => {
    let result: LoadResult;
    if (started) {
      // Throughput was measured in the interleaved rounds.
      result = report.throughput.find((r) => r.setup === setup)!.result!;
      await sleep(SETTLE_MS);
      if (!options.publishOnly) await visibility('idle', '');
    } else {
      await warmUp(spec, options.warmupS);
      // Idle means idle: let the projections finish the warm-up's messages first.
      await sleep(SETTLE_MS);
      if (!options.publishOnly) await visibility('idle', '');
      const measured = await measure(spec, service.server);
      report.throughput.push({ setup, ...measured });
      if (failuresOf(measured.result) > 0) report.failed = true;
      result = measured.result;
    }

    if (options.backgroundLoad > 0 && !options.publishOnly) {
      const rate = Math.max(1, Math.round(result.reqPerSec * options.backgroundLoad));
      const load = `${rate} req/s`;
      log(`service, ${mode}: background load of ${load} on the bench channels`);
      const background = startLoad({ ...spec, label: `service ${mode} background`, overallRate: rate, durationS: 3600, progressEveryS: 0 });
      try {
        await sleep(1000);
        await visibility(load, '-loaded');
      } finally {
        background.stop();
        const bg = await background.done;
        log(`service, ${mode}: background load: ${fmt(bg)}`);
        if (failuresOf(bg) > 0) {
          report.failed = true;
          report.notes.push(`${mode}: the background load had ${failuresOf(bg)} failed requests (${bg.statusCodes}).`);
        }
      }
    }
  });
  printProfile(`service-${mode}`, prof.dir);
}

const previousResults = (): string => (existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : '');

/** BENCH_SOAK=1: the soak alone, on the embedded service; its section of last-results.md replaced. */
async function soakOnly(): Promise<void> {
  const command = commandLine(process.env);
  log(`${machineLine(ROOT)}`);
  if (loadAverage() > BUSY_LOAD) log(`the machine is busy (1-minute load average ${loadAverage().toFixed(2)}): latencies will be pessimistic`);
  log('soak: starting the embedded service in a child process');
  const service = await startServiceChild('service-soak', {}, options.soakGc ? ['--expose-gc', '--heapsnapshot-signal=SIGUSR2'] : []);
  let result;
  await using(service, async () => {
    result = await runSoak(options, service, log);
  });
  const r = result!;
  console.log(`\n${soakTable(r.windows)}\n\n${r.verdict}\nResponses: ${r.statusCodes || 'none'}; ${r.errors} errors.\n`);
  writeFileSync(RESULTS_FILE, withSection(previousResults(), 'soak', soakMarkdown(options, command, machineLine(ROOT), r)));
  log(`soak section written to ${RESULTS_FILE}`);
  if (r.errors > 0) {
    log('some requests failed during the soak: the figures above are not valid');
    process.exitCode = 1;
  }
}

/**
 * The realtime rows: the bare `ws` baseline and the embedded service, each in a child of its own
 * (with --expose-gc, so that memory is read after a full GC), measured side by side. The markdown
 * section, and whether anything failed.
 */
async function realtimeRows(head: string): Promise<{ section: string; failed: boolean }> {
  const o = options.realtime;
  const notes: string[] = [];
  log('realtime: the bare ws baseline and the embedded service: starting a child process each');
  const bare = await startServer({ name: 'bare-ws', entry: 'test/bench/ws-bare-server.ts', env: {}, readyPath: '/', nodeArgs: ['--expose-gc'] });
  running.add(bare);
  let results: RealtimeServerResult[] = [];
  let comet: CometRow[] = [];
  let cometError: string | undefined;
  try {
    // MAX_CONNECTIONS (open HTTP connections, 10,000 by default) takes its share of the open-file
    // limit from the realtime connections: lowered here, so that the ramp finds the gateway's limit.
    const service = await startServiceChild('service-realtime', { MAX_CONNECTIONS: String(HTTP_CONNECTIONS_FOR_REALTIME) }, ['--expose-gc']);
    await using(service, async () => {
      const targets: RealtimeTarget[] = [{ setup: 'bare ws', server: bare, wsUrl: realtimeUrl(bare.url, '') }];
      const url = realtimeUrl(service.server.url, `key=${encodeURIComponent(service.key)}`);
      const notThere = await probeRealtime(url);
      if (notThere) {
        log(`realtime: service skipped (${notThere})`);
        notes.push(`service, embedded: skipped (${notThere}).`);
      } else {
        targets.push({ setup: 'service, embedded', server: service.server, wsUrl: url });
        notes.push(`The service child runs with MAX_CONNECTIONS=${HTTP_CONNECTIONS_FOR_REALTIME}: the open-file limit less those HTTP connections and a reserve of 256 bounds REALTIME_MAX_CONNECTIONS.`);
      }
      results = await realtimeBench(targets, o, log);
      // The comet row: the same service, its subscribers over WebSocket and over comet side by side.
      if (!notThere) {
        try {
          comet = await cometBench(service.server.url, `key=${encodeURIComponent(service.key)}`, { subscribers: COMET_SUBSCRIBERS, rounds: o.rounds, roundS: o.roundS, latencyS: o.latencyS }, log);
        } catch (err) {
          cometError = (err as Error).message;
          log(`comet: failed: ${cometError}`);
        }
      }
    });
  } finally {
    running.delete(bare);
    await bare.stop();
  }
  const cometSection = cometMarkdown(comet, o, cometError);
  console.log(`\n${fanoutTable(results)}\n\n${latencyTable(results)}\n\n${memoryTable(results)}\n\n${cometSection}\n`);
  return { section: realtimeMarkdown(results, o, head, notes, ['', cometSection]), failed: results.some((r) => r.failed) || cometError !== undefined || comet.some((r) => r.lost > 0) };
}

/** BENCH_ONLY=realtime: the realtime rows alone; their section of last-results.md replaced. */
async function realtimeOnly(): Promise<void> {
  const command = commandLine(process.env);
  log(`${machineLine(ROOT)}`);
  if (loadAverage() > BUSY_LOAD) log(`the machine is busy (1-minute load average ${loadAverage().toFixed(2)}): figures will be pessimistic`);
  const { section, failed } = await realtimeRows(`Measured ${new Date().toISOString().slice(0, 10)} with \`${command}\` on ${machineLine(ROOT)}.`);
  const previous = previousResults();
  // Replaced in place of the old section, with the soak's after it as before.
  writeFileSync(RESULTS_FILE, withSection(withSection(previous, 'realtime', section), 'soak', sectionOf(previous, 'soak')));
  console.log('---- markdown for test/bench/README.md (also in test/bench/last-results.md) ----\n');
  console.log(section);
  log(`realtime section written to ${RESULTS_FILE}`);
  if (failed) {
    log('some connections, attachments or deliveries failed: the figures above are not valid');
    process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  if (options.soak) return soakOnly();
  if (options.realtimeOnly) return realtimeOnly();
  if (options.channelsOnly) {
    console.log(await channelsBench({ channels: 100_000, samples: Number(process.env.BENCH_CHANNELS_SAMPLES ?? 100), progress: log }));
    return;
  }
  const productionEnvFound = await productionEnv(process.env, ROOT);
  const report: Report = {
    command: commandLine(process.env, 'skipped' in productionEnvFound ? undefined : productionEnvFound.file ? 'local infrastructure' : 'environment'),
    options,
    body: BODY,
    throughput: [],
    visibility: [],
    notes: [],
    sections: [],
  };
  log(`${machineLine(ROOT)}`);
  const busyAtStart = loadAverage();
  if (busyAtStart > BUSY_LOAD) log(`the machine is busy (1-minute load average ${busyAtStart.toFixed(2)}): req/s will be low`);
  log(`${report.command}: ${options.rounds} alternating rounds of ${options.roundS} s (bare and embedded, then bare and production), ${options.connections} connections, ${options.channels} channels, ${options.samples} visibility samples`);

  log('bare fastify and the embedded service: starting a child process each');
  const bareProf = profiling('bare');
  const bare = await startServer({ name: 'bare', entry: 'test/bench/bare-server.ts', env: {}, readyPath: '/bare', nodeArgs: bareProf.nodeArgs });
  running.add(bare);
  const embeddedProf = profiling('embedded');
  const productionSetup = 'service, production (Kafka + ClickHouse)';
  const productionProf = profiling('production');
  let embedded: ServiceChild | undefined;
  let production: ServiceChild | undefined;
  try {
    embedded = await startServiceChild('service-embedded', {}, embeddedProf.nodeArgs);
    await interleavedThroughput(report, bare, embedded);
    // Production's rounds alternate with bare rounds of their own, once the embedded ones are done.
    if (!options.publishOnly && !('skipped' in productionEnvFound)) {
      log('service, production: starting the service in a child process');
      try {
        production = await startServiceChild('service-production', productionEnvFound.env, productionProf.nodeArgs);
        await productionThroughput(report, bare, production, productionSetup, new InfraCpu({ broker: productionEnvFound.pids.kafka, ClickHouse: productionEnvFound.pids.clickhouse }));
      } catch (err) {
        await production?.stop();
        production = undefined;
        const reason = err instanceof StartError ? err.reason : (err as Error).message;
        log(`production: skipped (${reason})`);
        if (!report.throughput.some((r) => r.setup === productionSetup)) report.throughput.push({ setup: productionSetup, skipped: reason });
      }
    }
  } catch (err) {
    await embedded?.stop();
    await production?.stop();
    throw err;
  } finally {
    running.delete(bare);
    await bare.stop();
    printProfile('bare', bareProf.dir);
  }
  await benchService(report, 'embedded', {}, 'service, embedded (SQLite log and store)', { service: embedded, profileDir: embeddedProf.dir });

  if (options.publishOnly) {
    log('BENCH_ONLY=publish: production mode, visibility, stats and replay skipped');
  } else if ('skipped' in productionEnvFound) {
    log(`production: skipped (${productionEnvFound.skipped})`);
    report.throughput.push({ setup: productionSetup, skipped: productionEnvFound.skipped });
    report.visibility.push({ mode: 'production', channel: '–', load: '–', skipped: productionEnvFound.skipped });
  } else {
    log(`production: infrastructure from ${productionEnvFound.file ?? 'the environment'}: ${Object.entries(productionEnvFound.env).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    if (productionEnvFound.kafkaMock) {
      report.notes.push(
        "production ran on librdkafka's mock broker (infra/local), which answers a consumer's fetch only when the fetch's max wait " +
          `(KafkaLog's fetchMaxWaitMs, set in src/production-adapters.ts) runs out, even when records arrive meanwhile; so "visible" there is mostly that wait. ` +
          'A real broker answers a waiting fetch as soon as records arrive.',
      );
    }
    try {
      if (!production) throw new Error(report.throughput.find((r) => r.setup === productionSetup)?.skipped ?? 'the service did not start');
      await benchService(report, 'production', productionEnvFound.env, productionSetup, { service: production, profileDir: productionProf.dir });
    } catch (err) {
      const reason = err instanceof StartError ? err.reason : (err as Error).message;
      log(`production: skipped (${reason})`);
      if (!report.throughput.some((r) => r.setup === productionSetup)) report.throughput.push({ setup: productionSetup, skipped: reason });
      report.visibility.push({ mode: 'production', channel: '–', load: '–', skipped: reason });
    }
  }

  const statsSamples = Number(process.env.BENCH_STATS_SAMPLES ?? 1000);
  // BENCH_ONLY=production: the publish and visibility rows only.
  const rest = !options.publishOnly && !options.productionOnly;
  if (options.productionOnly && 'skipped' in productionEnvFound) report.failed = true;
  if (rest) {
    log('stats: GET /stats over 30 days of 6-second rollups, then replay rates');
    report.sections.push(
      `**Stats queries.** ${statsSamples} requests per unit, each for the newest records of 30 days of samples (one every 6 seconds, one app), through GET /stats (inject, no network).`,
      await statsQueryBench({ samples: statsSamples, production: 'skipped' in productionEnvFound ? undefined : productionEnvFound.env, progress: log }),
      `**Stats rebuild.** Reading a log of publish events, raw, beside the stats rebuild of the same log (count, roll up, write samples and rollups), alternating, in the same run; embedded, and Kafka into ClickHouse when found.`,
      await replayBench({ events: Number(process.env.BENCH_REPLAY_EVENTS ?? 200_000), production: 'skipped' in productionEnvFound ? undefined : productionEnvFound.env, progress: log }),
      `**Memory.** The in-memory history tail holds every channel's last two minutes; each message costs what this measures (the bench's message, one per publish).`,
      await tailMemoryBench({ messages: 1_000_000, body: BODY, progress: log }),
      `**Channels.** GET /channels and GET /channels/<id> with 100,000 active channels in one app, beside GET /time and a publish in the same service (inject, no network).`,
      await channelsBench({ channels: 100_000, samples: Number(process.env.BENCH_CHANNELS_SAMPLES ?? 100), progress: log }),
    );
  }

  let realtimeSection: string | undefined;
  if (rest) {
    log('realtime: fan-out, latency, memory and connections, bare ws then the embedded service');
    const rt = await realtimeRows('Measured in the same run.');
    realtimeSection = rt.section;
    if (rt.failed) report.failed = true;
  }

  const [bareResult, embeddedResult] = report.throughput.map((r) => r.result);
  if (bareResult && embeddedResult && embeddedResult.reqPerSec / bareResult.reqPerSec < RATIO_TARGET) {
    report.notes.push(
      `The embedded service reaches ${(embeddedResult.reqPerSec / bareResult.reqPerSec).toFixed(2)} of the bare throughput; the target is ${RATIO_TARGET}.`,
    );
  }
  if (busyAtStart > BUSY_LOAD) {
    report.notes.push(`Other work was running (1-minute load average ${busyAtStart.toFixed(2)} when the bench started): req/s and latencies are pessimistic.`);
  }
  for (const mode of ['embedded', 'production']) {
    const rows = report.visibility.filter((r) => r.mode === mode && r.result);
    if (rows.length > 0 && rows.every((r) => r.result!.polls === 1)) {
      report.notes.push(`${mode}: every message was in history on the first request after its publish's 201, so "visible" is the publish plus one history request.`);
    }
  }
  report.notes.push(
    'A persisted channel\'s newest messages are also in the memory tail; its history query merges the tail with the store, so "visible" there includes a store query.',
  );

  const md = markdown(report, ROOT);
  console.log(`\n${throughputTable(report.throughput)}\n\n${visibilityTable(report.visibility)}\n`);
  console.log('---- markdown for test/bench/README.md (also in test/bench/last-results.md) ----\n');
  console.log(md);
  if (realtimeSection) console.log(`${realtimeSection}\n`);
  // The soak's section stays as its own run left it.
  if (rest) writeFileSync(RESULTS_FILE, withSection(withSection(md, 'realtime', realtimeSection), 'soak', sectionOf(previousResults(), 'soak')));
  if (report.failed) {
    log('some requests failed (non-2xx, errors, timeouts or messages never visible): the figures above are not valid');
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(`[bench] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
