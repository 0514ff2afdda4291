// The bench's own settings, from BENCH_* variables (the service children get their own env).

export interface BenchOptions {
  /** seconds of each measured publish run */
  durationS: number;
  /**
   * bare and embedded throughput are measured in this many alternating rounds of roundS seconds
   * each; a setup's figures add its rounds up
   */
  rounds: number;
  roundS: number;
  /** seconds of unmeasured load before measuring, so the JIT is warm */
  warmupS: number;
  connections: number;
  pipelining: number;
  /** publishes are spread over this many channels */
  channels: number;
  /** publish-to-visible samples per scenario */
  samples: number;
  /** background load while sampling visibility, as a fraction of the measured throughput (0: none) */
  backgroundLoad: number;
  /** run the server children with --cpu-prof and print their hot spots */
  cpuProfile: boolean;
  /** BENCH_ONLY=publish: publish throughput only (bare and embedded), for quick comparisons */
  publishOnly: boolean;
  /**
   * BENCH_ONLY=production: the publish rounds (bare and embedded), then production throughput and
   * publish-to-visible beside the embedded visibility rows (printed, not written); needs the infrastructure
   */
  productionOnly: boolean;
  /** BENCH_ONLY=channels: the channel status and enumeration rows only (printed, not written) */
  channelsOnly: boolean;
  /** BENCH_ONLY=realtime: the realtime rows only (bare `ws` baseline and the embedded service) */
  realtimeOnly: boolean;
  /**
   * the realtime rows: load-generator children per server, throughput rounds per scenario and
   * their seconds, seconds of each latency run, the connection ramp's cap and step
   */
  realtime: { clients: number; rounds: number; roundS: number; latencyS: number; maxConnections: number; rampStep: number };
  /** BENCH_SOAK=1: only the soak (steady publish and read load for soakS seconds), nothing else */
  soak: boolean;
  soakS: number;
  /** the soak samples memory and latencies this often */
  soakSampleS: number;
  /** publishes per second during the soak, over all channels */
  soakPublishRate: number;
  /** reads (history, presence, stats) per second during the soak */
  soakReadRate: number;
  /** the soak's reads, in percent: history, presence, stats (BENCH_SOAK_READ_MIX=60,30,10) */
  soakReadMix: { history: number; presence: number; stats: number };
  /**
   * BENCH_SOAK_GC=1: the soak's child runs with --expose-gc and each sample forces a full GC
   * before reading the heap, so heap used is what survives (a leak) rather than garbage not yet
   * collected; the GC pauses show in that window's latencies. `kill -USR2 <child pid>` then
   * writes a heap snapshot into the child's working directory (--heapsnapshot-signal)
   */
  soakGc: boolean;
}

const DEFAULTS: Record<string, number> = {
  BENCH_DURATION: 10,
  BENCH_WARMUP: 3,
  BENCH_ROUNDS: 10,
  BENCH_ROUND_DURATION: 3,
  BENCH_CONNECTIONS: 50,
  BENCH_CHANNELS: 100,
  BENCH_SAMPLES: 300,
  BENCH_BACKGROUND_LOAD: 0.5,
  BENCH_CPU_PROF: 0,
  BENCH_SOAK: 0,
  BENCH_SOAK_SECONDS: 600,
  BENCH_SOAK_SAMPLE_SECONDS: 30,
  BENCH_SOAK_PUBLISH_RATE: 2000,
  BENCH_SOAK_READ_RATE: 500,
  BENCH_SOAK_GC: 0,
  BENCH_RT_CLIENTS: 2,
  BENCH_RT_ROUNDS: 3,
  BENCH_RT_ROUND_DURATION: 3,
  BENCH_RT_LATENCY_DURATION: 4,
  BENCH_RT_MAX_CONNECTIONS: 20_000,
  BENCH_RT_RAMP_STEP: 2000,
};

function numberOf(env: Record<string, string | undefined>, name: string, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return DEFAULTS[name];
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) throw new Error(`${name}="${raw}" must be a number from ${min} to ${max}`);
  return n;
}

function readMixOf(env: Record<string, string | undefined>): BenchOptions['soakReadMix'] {
  const raw = env.BENCH_SOAK_READ_MIX;
  if (raw === undefined || raw === '') return { history: 60, presence: 30, stats: 10 };
  const parts = raw.split(',').map((x) => Number(x.trim()));
  if (parts.length !== 3 || parts.some((n) => !Number.isInteger(n) || n < 0) || parts[0] + parts[1] + parts[2] !== 100) {
    throw new Error(`BENCH_SOAK_READ_MIX="${raw}" must be three whole percentages adding up to 100: history,presence,stats (such as 60,30,10)`);
  }
  return { history: parts[0], presence: parts[1], stats: parts[2] };
}

function onlyOf(env: Record<string, string | undefined>): string | undefined {
  const raw = env.BENCH_ONLY;
  if (raw === undefined || raw === '') return undefined;
  if (!['publish', 'production', 'realtime', 'channels'].includes(raw)) {
    throw new Error(`BENCH_ONLY="${raw}" must be "publish", "production", "realtime" or "channels" (or unset for everything)`);
  }
  return raw;
}

export function benchOptions(env: Record<string, string | undefined>): BenchOptions {
  return {
    durationS: numberOf(env, 'BENCH_DURATION', 1, 3600),
    warmupS: numberOf(env, 'BENCH_WARMUP', 0, 600),
    rounds: Math.round(numberOf(env, 'BENCH_ROUNDS', 1, 99)),
    roundS: numberOf(env, 'BENCH_ROUND_DURATION', 1, 3600),
    connections: Math.round(numberOf(env, 'BENCH_CONNECTIONS', 1, 10_000)),
    pipelining: 1,
    channels: Math.round(numberOf(env, 'BENCH_CHANNELS', 1, 100_000)),
    samples: Math.round(numberOf(env, 'BENCH_SAMPLES', 10, 100_000)),
    backgroundLoad: numberOf(env, 'BENCH_BACKGROUND_LOAD', 0, 1),
    cpuProfile: numberOf(env, 'BENCH_CPU_PROF', 0, 1) === 1,
    publishOnly: onlyOf(env) === 'publish',
    productionOnly: onlyOf(env) === 'production',
    realtimeOnly: onlyOf(env) === 'realtime',
    channelsOnly: onlyOf(env) === 'channels',
    realtime: {
      clients: Math.round(numberOf(env, 'BENCH_RT_CLIENTS', 1, 10)),
      rounds: Math.round(numberOf(env, 'BENCH_RT_ROUNDS', 1, 99)),
      roundS: Math.round(numberOf(env, 'BENCH_RT_ROUND_DURATION', 1, 3600)),
      latencyS: Math.round(numberOf(env, 'BENCH_RT_LATENCY_DURATION', 1, 3600)),
      maxConnections: Math.round(numberOf(env, 'BENCH_RT_MAX_CONNECTIONS', 10_000, 1_000_000)),
      rampStep: Math.round(numberOf(env, 'BENCH_RT_RAMP_STEP', 100, 100_000)),
    },
    soak: numberOf(env, 'BENCH_SOAK', 0, 1) === 1,
    soakS: Math.round(numberOf(env, 'BENCH_SOAK_SECONDS', 10, 86_400)),
    soakSampleS: Math.round(numberOf(env, 'BENCH_SOAK_SAMPLE_SECONDS', 1, 3600)),
    soakPublishRate: Math.round(numberOf(env, 'BENCH_SOAK_PUBLISH_RATE', 1, 1_000_000)),
    soakReadRate: Math.round(numberOf(env, 'BENCH_SOAK_READ_RATE', 1, 1_000_000)),
    soakReadMix: readMixOf(env),
    soakGc: numberOf(env, 'BENCH_SOAK_GC', 0, 1) === 1,
  };
}

/**
 * The command that reproduces this run: `npm run bench` with the BENCH_* settings that were given,
 * after starting the local infrastructure when production mode ran on it.
 */
export function commandLine(env: Record<string, string | undefined>, production?: 'local infrastructure' | 'environment'): string {
  const given = [...Object.keys(DEFAULTS), 'BENCH_ONLY', 'BENCH_SOAK_READ_MIX']
    .filter((name) => env[name] !== undefined && env[name] !== '')
    .map((name) => `${name}=${env[name]}`);
  if (production === 'environment') given.unshift('KAFKA_BROKERS=… CLICKHOUSE_URL=…');
  const bench = [...given, 'npm run bench'].join(' ');
  return production === 'local infrastructure' ? `bash infra/local/start.sh && ${bench}` : bench;
}
