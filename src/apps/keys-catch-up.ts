// Read-your-writes for keys across instances. A key (or a sandbox app) made through one instance is
// known to another once that one's apps consumer applied its event: a client that got the new key
// from A and used it at once on B was refused (40101, 40400) for as long as B lagged. Now a
// credential naming a key this instance does not know waits, before it is checked, for this
// instance to apply what the apps topic held when the request came (bounded by
// KEY_CHANGE_VISIBLE_MS; then it is checked as it stands). Concurrent requests share one look at
// the topic's end: a flood of unknown keys makes one query of the log at a time, not one each.
import type { Logger } from 'pino';
import type { Limits } from '../limits.js';
import { Topics, type Log } from '../log/port.js';
import type { AppliedPositions, Positions } from '../log/applied-positions.js';

export interface KeysCatchUpDeps {
  /** The apps topic's end now, per partition. */
  end: () => Promise<Positions>;
  /** Resolves once this instance applied the apps topic up to `target` (true), or after `timeoutMs` (false). */
  applied: (target: Positions, timeoutMs: number) => Promise<boolean>;
  timeoutMs: number;
  /** A failed look at the topic's end (the request is then checked as it stands). */
  failed: (err: unknown) => void;
}

export class KeysCatchUp {
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;

  constructor(private readonly deps: KeysCatchUpDeps) {}

  /**
   * Resolves once this instance applied what the apps topic held at the call (or the wait's bound
   * passed); never rejects. A call while a look is in progress waits for the next one, which
   * begins after the call (the one in progress may have read the end before the key was made).
   */
  wait(): Promise<void> {
    if (this.running === undefined) return this.start();
    return (this.queued ??= this.running.then(() => {
      this.queued = undefined;
      return this.start();
    }));
  }

  private start(): Promise<void> {
    const { timeoutMs } = this.deps;
    const deadline = Date.now() + timeoutMs;
    const work = (async () => {
      try {
        const end = await this.deps.end();
        await this.deps.applied(end, Math.max(0, deadline - Date.now()));
      } catch (err) {
        this.deps.failed(err);
      }
    })();
    // The look at the end is bounded too: a log that does not answer holds no request past the bound.
    let timer: NodeJS.Timeout | undefined;
    const run = Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs).unref()))]).finally(() => clearTimeout(timer));
    this.running = run.finally(() => {
      if (this.running === tracked) this.running = undefined;
    });
    const tracked = this.running;
    return run;
  }
}

/** The service's wait for a key made elsewhere: its log's apps topic, as far as its apps consumer applied it. */
export function keysCatchUpOf(log: Pick<Log, 'endOffsets'>, appsApplied: AppliedPositions, limits: Pick<Limits, 'keyChangeVisibleMs'>, logger: Logger): () => Promise<void> {
  const catchUp = new KeysCatchUp({
    end: () => log.endOffsets(Topics.apps),
    applied: (target, timeoutMs) => appsApplied.until(Topics.apps, target, timeoutMs),
    timeoutMs: limits.keyChangeVisibleMs,
    failed: (err) => logger.warn({ err }, 'could not read the end of the apps topic to wait for a key made elsewhere; the credentials are checked as they stand'),
  });
  return () => catchUp.wait();
}
