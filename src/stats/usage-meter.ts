import type { AppendBatcher } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { encodeEvent } from '../log/events.js';
import type { Clock } from '../clock.js';
import type { Logger } from 'pino';
import { DEFAULT_LIMITS } from '../limits.js';
import { addCounter, addCounters, Base, intervalOf, type Counters } from '../../projections/stats/stats-sample.js';

export type RequestOutcome = 'succeeded' | 'failed' | 'refused';

const API_ALL: Record<RequestOutcome, string> = {
  succeeded: Base.api('all', 'succeeded'),
  failed: Base.api('all', 'failed'),
  refused: Base.api('all', 'refused'),
};
const API_TOKEN: Record<RequestOutcome, string> = {
  succeeded: Base.api('tokenRequests', 'succeeded'),
  failed: Base.api('tokenRequests', 'failed'),
  refused: Base.api('tokenRequests', 'refused'),
};

/** succeeded: 2xx/3xx; refused: authentication, capability, rate limits; failed: the rest. */
export const outcomeOf = (status: number): RequestOutcome =>
  status < 400 ? 'succeeded' : status === 401 || status === 403 || status === 429 ? 'refused' : 'failed';

/**
 * Counts this instance's usage per app and 6-second interval, and appends it to the `usage`
 * topic every 6 seconds (and on close), so the stats projection counts it from the log like
 * everything else. While the log refuses appends (a full disk) the counters stay here and go with
 * the next flush, up to `maxIntervals` intervals; older ones are dropped and logged.
 */
export class UsageMeter {
  /** interval -> appId -> counters */
  private readonly pending = new Map<number, Map<string, Counters>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly batcher: AppendBatcher,
    private readonly clock: Clock,
    private readonly instanceId: string,
    private readonly logger: Logger,
    private readonly maxIntervals = DEFAULT_LIMITS.usageBacklogIntervals,
  ) {}

  /** The counters of the app in the current interval. */
  private countersOf(appId: string): Counters {
    const interval = intervalOf(this.clock.now());
    let apps = this.pending.get(interval);
    if (!apps) this.pending.set(interval, (apps = new Map()));
    let counters = apps.get(appId);
    if (!counters) apps.set(appId, (counters = {}));
    return counters;
  }

  private add(appId: string, counters: Counters): void {
    addCounters(this.countersOf(appId), counters);
  }

  apiRequest(appId: string, status: number, tokenRequest: boolean): void {
    const outcome = outcomeOf(status);
    const counters = this.countersOf(appId);
    addCounter(counters, API_ALL[outcome], 1);
    if (tokenRequest) addCounter(counters, API_TOKEN[outcome], 1);
  }

  /** Messages read from history go out over REST; persisted ones show in the persisted section too. */
  historyRead(appId: string, count: number, data: number, persisted: boolean): void {
    if (count === 0) return;
    const c: Counters = { [Base.outbound('rest', 'messages', 'count')]: count, [Base.outbound('rest', 'messages', 'data')]: data };
    if (persisted) {
      c[Base.retrieved('count')] = count;
      c[Base.retrieved('data')] = data;
    }
    this.add(appId, c);
  }

  start(periodMs = 6000): void {
    this.timer = setInterval(() => {
      this.flush(false).catch((err) => this.logger.warn({ err, keptIntervals: this.pending.size }, 'usage flush failed; its counters go with the next one'));
    }, periodMs);
    this.timer.unref();
  }

  /**
   * Appends finished intervals (all of them when `all`). When the log refuses them, they are kept
   * (merged with what was counted meanwhile) for the next flush, and the error is thrown.
   */
  async flush(all = true): Promise<void> {
    const current = intervalOf(this.clock.now());
    const taken = new Map<number, Map<string, Counters>>();
    const records = [];
    for (const [interval, apps] of this.pending) {
      if (!all && interval >= current) continue;
      this.pending.delete(interval);
      taken.set(interval, apps);
      for (const [appId, counters] of apps) {
        records.push({
          key: appId,
          build: () => encodeEvent({ type: 'usage.reported', appId, intervalStart: interval, instanceId: this.instanceId, counters }),
        });
      }
    }
    if (records.length === 0) return;
    try {
      await this.batcher.append(Topics.usage, records);
    } catch (err) {
      this.keep(taken);
      throw err;
    }
  }

  /** Puts counters that were not appended back, then drops the oldest intervals past the bound. */
  private keep(taken: Map<number, Map<string, Counters>>): void {
    for (const [interval, apps] of taken) {
      let into = this.pending.get(interval);
      if (!into) this.pending.set(interval, (into = new Map()));
      for (const [appId, counters] of apps) {
        const mine = into.get(appId);
        if (mine) addCounters(mine, counters);
        else into.set(appId, counters);
      }
    }
    if (this.pending.size <= this.maxIntervals) return;
    const oldestFirst = [...this.pending.keys()].sort((a, b) => a - b);
    const dropped = oldestFirst.slice(0, this.pending.size - this.maxIntervals);
    for (const interval of dropped) this.dropAndLog(interval, 'the log refused usage for longer than the backlog keeps');
  }

  private dropAndLog(interval: number, reason: string): void {
    const apps = this.pending.get(interval);
    this.pending.delete(interval);
    if (!apps) return;
    this.logger.error(
      { intervalStart: new Date(interval).toISOString(), usage: Object.fromEntries(apps) },
      `usage of an interval dropped: ${reason}`,
    );
  }

  /** Flushes everything; what the log refuses is logged and dropped (close never throws). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    try {
      await this.flush(true);
    } catch (err) {
      this.logger.error({ err }, 'usage flush on close failed');
      for (const interval of [...this.pending.keys()]) this.dropAndLog(interval, 'the log refused it on close');
    }
  }
}
