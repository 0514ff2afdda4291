// The fuzz tier's knobs. A run is a function of its seed: the same FUZZ_SEED (and FUZZ_RUNS)
// replays the same inputs in the same order, so a failure printed with its seed can be replayed.

/** Fixed unless FUZZ_SEED says otherwise, so that `npm test` is repeatable. */
export const DEFAULT_SEED = 20_261_123;

export interface FuzzSettings {
  seed: number;
  /** Inputs per route (each route's property runs this many times, unless its time share runs out). */
  runs: number;
  /** Upper bound on the whole tier's fuzzing time, shared evenly by the routes. */
  budgetMs: number;
}

function integer(env: Record<string, string | undefined>, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name}="${raw}" must be a whole number from ${min} to ${max}`);
  return n;
}

export function fuzzSettings(env: Record<string, string | undefined> = process.env): FuzzSettings {
  return {
    seed: integer(env, 'FUZZ_SEED', DEFAULT_SEED, -(2 ** 31), 2 ** 31 - 1),
    runs: integer(env, 'FUZZ_RUNS', 1500, 1, 1_000_000),
    budgetMs: integer(env, 'FUZZ_SECONDS', 40, 1, 86_400) * 1000,
  };
}

/** How to replay a run, printed with every failure. */
export const replayHint = (s: FuzzSettings): string => `replay with FUZZ_SEED=${s.seed} FUZZ_RUNS=${s.runs} npx vitest run test/fuzz/`;
