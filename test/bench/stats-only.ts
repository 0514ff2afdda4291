// Runs only the stats benchmarks: `npx tsx test/bench/stats-only.ts`.
import { replayBench, statsQueryBench } from './stats-bench.js';

const progress = (s: string): void => void process.stderr.write(`${s}\n`);
console.log(await statsQueryBench({ samples: Number(process.env.BENCH_STATS_SAMPLES ?? 20), progress }));
console.log();
console.log(await replayBench({ events: Number(process.env.BENCH_REPLAY_EVENTS ?? 200_000), progress }));
