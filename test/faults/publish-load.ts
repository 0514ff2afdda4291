// A steady, bounded publish load on one channel of a service process, and the reckoning the fault
// tier prints for each fault: acknowledged / found / lost / doubled.
import { basic } from '../helpers/service.js';
import { readHistory, type Target } from '../helpers/server-process.js';

export interface Outcome {
  data: string;
  /** HTTP status; 0 when no answer came (network error or the client's timeout) */
  status: number;
  /** error.code of a non-2xx answer */
  code?: number;
  error?: string;
  sentAt: number;
  ms: number;
}

/**
 * `workers` loops, each publishing one message at a time (data `worker:seq`, unique) until
 * stop(); every request has a client-side timeout, so a hanging publish shows as status 0.
 */
export class PublishLoad {
  readonly outcomes: Outcome[] = [];
  readonly sent = new Set<string>();
  readonly acked = new Set<string>();
  private stopped = false;
  private readonly loops: Promise<void>[] = [];

  constructor(
    readonly target: Target,
    /** `prefix`: put before each message's data, so that several loads on one channel stay apart. */
    private readonly options: { workers: number; answerTimeoutMs: number; pauseMs?: number; prefix?: string },
  ) {}

  start(): this {
    for (let w = 0; w < this.options.workers; w++) this.loops.push(this.loop(w));
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Outcomes of publishes sent in [from, to). */
  sentBetween(from: number, to: number): Outcome[] {
    return this.outcomes.filter((o) => o.sentAt >= from && o.sentAt < to);
  }

  private async loop(worker: number): Promise<void> {
    const url = `http://127.0.0.1:${this.target.port}/channels/${encodeURIComponent(this.target.channel)}/messages`;
    const headers = { authorization: basic(this.target.key), 'content-type': 'application/json' };
    for (let seq = 0; !this.stopped; seq++) {
      const data = `${this.options.prefix ?? ''}${worker}:${seq}`;
      this.sent.add(data);
      const sentAt = Date.now();
      const outcome: Outcome = { data, status: 0, sentAt, ms: 0 };
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: 'fault', data }),
          signal: AbortSignal.timeout(this.options.answerTimeoutMs),
        });
        outcome.status = res.status;
        if (res.status === 201) {
          await res.arrayBuffer();
          this.acked.add(data);
        } else {
          const body = (await res.json().catch(() => undefined)) as { error?: { code?: number; message?: string } } | undefined;
          outcome.code = body?.error?.code;
          outcome.error = body?.error?.message;
        }
      } catch (err) {
        outcome.error = (err as Error).message;
      }
      outcome.ms = Date.now() - sentAt;
      this.outcomes.push(outcome);
      if (this.options.pauseMs) await new Promise((r) => setTimeout(r, this.options.pauseMs));
    }
  }
}

export interface Reckoning {
  acknowledged: number;
  found: number;
  /** acknowledged, not in history */
  lost: string[];
  /** in history more than once */
  doubled: string[];
  /** in history, never acknowledged (in flight or timed out when the fault hit): allowed */
  durableUnacknowledged: number;
  /** in history, never sent: impossible unless history is corrupt */
  phantom: string[];
}

export function reckon(load: PublishLoad, history: string[]): Reckoning {
  const found = new Set<string>();
  const doubled: string[] = [];
  for (const d of history) {
    if (found.has(d)) doubled.push(d);
    else found.add(d);
  }
  return {
    acknowledged: load.acked.size,
    found: found.size,
    lost: [...load.acked].filter((d) => !found.has(d)),
    doubled,
    durableUnacknowledged: [...found].filter((d) => !load.acked.has(d)).length,
    phantom: [...found].filter((d) => !load.sent.has(d)),
  };
}

export function report(fault: string, r: Reckoning, extra = ''): void {
  console.log(
    `[fault tier] ${fault}: acknowledged ${r.acknowledged} / found ${r.found} / lost ${r.lost.length} / doubled ${r.doubled.length}` +
      ` (durable but never acknowledged: ${r.durableUnacknowledged})${extra ? `; ${extra}` : ''}`,
  );
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `check` until it holds; throws, naming `what` (and the last error `check` threw), after
 * `timeoutMs`. A check that throws counts as not holding yet: a read answered 504 "retry" (the
 * instance's projection behind its own writes on a loaded machine) is asked again, as a client would.
 */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, pollMs = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last: ${String(lastError)})` : ''}`);
    await sleep(pollMs);
  }
}

/**
 * The channel's history once it holds every acknowledged message, or as it is after `timeoutMs`
 * (what is missing is then reported by reckon, not thrown here).
 */
export async function historyWithAcked(load: PublishLoad, target: Target, timeoutMs = 30_000): Promise<string[]> {
  let history: string[] = [];
  await until(
    'every acknowledged message in history',
    async () => {
      history = await readHistory(target);
      const inHistory = new Set(history);
      return [...load.acked].every((d) => inHistory.has(d));
    },
    timeoutMs,
  ).catch(() => undefined);
  return history;
}
