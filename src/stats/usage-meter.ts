import type { AppendBatcher } from '../log/append-batcher.js';
import { Topics } from '../log/port.js';
import { encodeEvent } from '../log/event-codec.js';
import type { Clock } from '../clock.js';
import type { Logger } from 'pino';
import { DEFAULT_LIMITS } from '../limits.js';
import { addCounter, addCounters, Base, intervalOf, SAMPLE_MS, type Counters } from '../domain/stats-sample.js';

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

const OUTBOUND_REALTIME = {
  messages: { count: Base.outbound('realtime', 'messages', 'count'), data: Base.outbound('realtime', 'messages', 'data') },
  presence: { count: Base.outbound('realtime', 'presence', 'count'), data: Base.outbound('realtime', 'presence', 'data') },
};

/** One interval's usage: counters per app, and the reading of open realtime connections per app. */
interface IntervalUsage {
  apps: Map<string, Counters>;
  connections?: Map<string, number>;
}

/** succeeded: 2xx/3xx; refused: authentication, capability, rate limits; failed: the rest. */
export const outcomeOf = (status: number): RequestOutcome =>
  status < 400 ? 'succeeded' : status === 401 || status === 403 || status === 429 ? 'refused' : 'failed';

/**
 * Counts this instance's usage per app and 6-second interval, and appends it to the `usage`
 * topic every 6 seconds (and on close), so the stats projection counts it from the log like
 * everything else. While the log refuses appends (a full disk) the counters stay here and go with
 * the next flush, up to `maxIntervals` intervals; older ones are dropped and logged.
 *
 * Open realtime connections are a level, not a count: once per interval (in its middle) the meter
 * reads how many this instance holds per app, and reports that reading with the interval's
 * counters, once; the stats projection adds the instances' readings up.
 */
export class UsageMeter {
  private readonly pending = new Map<number, IntervalUsage>();
  private timer: NodeJS.Timeout | undefined;
  private readingTimer: NodeJS.Timeout | undefined;
  /** Open realtime connections per app on this instance (the gateway's). */
  private openConnections: (() => Map<string, number>) | undefined;
  /** The newest interval a flush has taken: its reading is reported, a later one would count twice. */
  private flushedUpTo = -Infinity;

  constructor(
    private readonly batcher: AppendBatcher,
    private readonly clock: Clock,
    private readonly instanceId: string,
    private readonly logger: Logger,
    private readonly maxIntervals = DEFAULT_LIMITS.usageBacklogIntervals,
  ) {}

  private usageOf(interval: number): IntervalUsage {
    let usage = this.pending.get(interval);
    if (!usage) this.pending.set(interval, (usage = { apps: new Map() }));
    return usage;
  }

  /** The counters of the app in the current interval. */
  private countersOf(appId: string): Counters {
    const apps = this.usageOf(intervalOf(this.clock.now())).apps;
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

  /**
   * Messages or presence messages sent to a realtime client (MESSAGE, PRESENCE, SYNC): each one
   * sent to each connection counts once, `data` its payload size.
   */
  realtimeOutbound(appId: string, type: 'messages' | 'presence', count: number, data: number): void {
    if (count === 0) return;
    const counters = this.countersOf(appId);
    const keys = OUTBOUND_REALTIME[type];
    addCounter(counters, keys.count, count);
    addCounter(counters, keys.data, data);
  }

  /** Where to read this instance's open realtime connections per app from (the gateway). */
  measureConnections(read: () => Map<string, number>): void {
    this.openConnections = read;
  }

  /**
   * Reads the open realtime connections for the current interval; a later reading in the same
   * interval replaces it, until a flush has taken the interval.
   */
  readConnections(): void {
    if (!this.openConnections) return;
    const interval = intervalOf(this.clock.now());
    if (interval <= this.flushedUpTo) return;
    const reading = new Map([...this.openConnections()].filter(([, n]) => n > 0));
    const usage = this.pending.get(interval);
    if (usage) usage.connections = reading;
    else if (reading.size > 0) this.pending.set(interval, { apps: new Map(), connections: reading });
  }

  start(periodMs = 6000): void {
    this.timer = setInterval(() => {
      this.flush(false).catch((err) => this.logger.warn({ err, keptIntervals: this.pending.size }, 'usage flush failed; its counters go with the next one'));
    }, periodMs);
    this.timer.unref();
    this.scheduleReading();
  }

  /**
   * The next reading, in the middle of an interval: timer jitter cannot move it into another one.
   * After a reading, the next is in the middle of the following interval: a timer that fired a
   * millisecond early (its clock is not Date.now's) read the same interval twice.
   */
  private scheduleReading(afterReading = false): void {
    const now = this.clock.now();
    let delay = intervalOf(now) + SAMPLE_MS / 2 - now;
    if (afterReading || delay <= 0) delay += SAMPLE_MS;
    this.readingTimer = setTimeout(() => {
      this.readConnections();
      this.scheduleReading(true);
    }, delay);
    this.readingTimer.unref();
  }

  /**
   * Appends finished intervals (all of them when `all`). When the log refuses them, they are kept
   * (merged with what was counted meanwhile) for the next flush, and the error is thrown.
   */
  async flush(all = true): Promise<void> {
    const current = intervalOf(this.clock.now());
    const taken = new Map<number, IntervalUsage>();
    const records = [];
    for (const [interval, usage] of this.pending) {
      if (!all && interval >= current) continue;
      this.pending.delete(interval);
      taken.set(interval, usage);
      this.flushedUpTo = Math.max(this.flushedUpTo, interval);
      const appIds = new Set([...usage.apps.keys(), ...(usage.connections?.keys() ?? [])]);
      for (const appId of appIds) {
        const counters = usage.apps.get(appId) ?? {};
        const connections = usage.connections?.get(appId);
        records.push({
          key: appId,
          build: () =>
            encodeEvent({
              type: 'usage.reported',
              appId,
              intervalStart: interval,
              instanceId: this.instanceId,
              counters,
              ...(connections === undefined ? {} : { connections }),
            }),
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
  private keep(taken: Map<number, IntervalUsage>): void {
    for (const [interval, usage] of taken) {
      const into = this.usageOf(interval);
      for (const [appId, counters] of usage.apps) {
        const mine = into.apps.get(appId);
        if (mine) addCounters(mine, counters);
        else into.apps.set(appId, counters);
      }
      // A taken interval gets no new reading (flushedUpTo): the one not appended stands.
      if (usage.connections) into.connections = usage.connections;
    }
    if (this.pending.size <= this.maxIntervals) return;
    const oldestFirst = [...this.pending.keys()].sort((a, b) => a - b);
    const dropped = oldestFirst.slice(0, this.pending.size - this.maxIntervals);
    for (const interval of dropped) this.dropAndLog(interval, 'the log refused usage for longer than the backlog keeps');
  }

  private dropAndLog(interval: number, reason: string): void {
    const usage = this.pending.get(interval);
    this.pending.delete(interval);
    if (!usage) return;
    this.logger.error(
      {
        intervalStart: new Date(interval).toISOString(),
        usage: Object.fromEntries(usage.apps),
        ...(usage.connections?.size ? { connections: Object.fromEntries(usage.connections) } : {}),
      },
      `usage of an interval dropped: ${reason}`,
    );
  }

  /** Flushes everything; what the log refuses is logged and dropped (close never throws). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    clearTimeout(this.readingTimer);
    try {
      await this.flush(true);
    } catch (err) {
      this.logger.error({ err }, 'usage flush on close failed');
      for (const interval of [...this.pending.keys()]) this.dropAndLog(interval, 'the log refused it on close');
    }
  }
}
