// Runs only the stats benchmarks: `npx tsx test/bench/stats-only.ts` (production too when its
// infrastructure is found, as `npm run bench` finds it). `BENCH_STATS_PART=query` or `=rebuild`
// runs one of the two parts.
import { replayBench, statsQueryBench } from './stats-bench.js';
import { productionEnv } from './production-env.js';

const progress = (s: string): void => void process.stderr.write(`${s}\n`);
const part = process.env.BENCH_STATS_PART;
const found = await productionEnv(process.env, process.cwd());
if ('skipped' in found) progress(`production: skipped (${found.skipped})`);
const production = 'skipped' in found ? undefined : found.env;
if (part !== 'rebuild') {
  console.log(await statsQueryBench({ samples: Number(process.env.BENCH_STATS_SAMPLES ?? 1000), production, progress }));
  console.log();
}
if (part !== 'query') console.log(await replayBench({ events: Number(process.env.BENCH_REPLAY_EVENTS ?? 200_000), production, progress }));
