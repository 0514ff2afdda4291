import type { Clock } from '../clock.js';
import { ServiceError } from '../errors.js';
import type { Log } from '../log/port.js';
import { Topics } from '../log/port.js';
import { eventOf } from '../log/event-shape.js';
import type { MessagesPublished } from '../domain/events.js';
import type { HistoryProjection } from '../../projections/history/history-projection.js';
import type { HistoryEntry } from '../../projections/history/history-entry.js';
import { MAX_REWIND_COUNT, MAX_REWIND_MS, type Rewind } from './rewind.js';
import type { RealtimeSettings } from './settings.js';

/** How long an attach with `rewind` waits for the history projection to reach its position. */
const REWIND_WAIT_MS = 5_000;

/** Backlogs read from the log at once. */
const REPLAY_SLOTS = 4;

/** Why an ATTACH's channelSerial is not resumed from (`why` follows "unable to recover channel"): the ATTACHED's error. */
export const continuityLost = (why: string, cause?: unknown): ServiceError =>
  new ServiceError('continuityLost', `unable to recover channel${why}; it attached without continuity, read what was missed from history (untilAttach)`, cause);

/** One publish of a backlog, at its offset in the channel's partition. */
export interface BacklogRecord {
  event: MessagesPublished;
  offset: number;
}

export interface BacklogDeps {
  log: Log;
  /** Recent messages for `rewind` (the history projection). */
  history: Pick<HistoryProjection, 'applied' | 'query'>;
  clock: Clock;
  settings: RealtimeSettings;
  /** Whether the gateway is closing (a rewind waiting for history gives up). */
  closing: () => boolean;
}

/**
 * At most `n` holders at once, and one per owner (a connection): the others wait, served by owner in
 * turn, so one connection asking for many backlogs (hundreds of ATTACHes far behind) waits behind
 * its own, not in front of every other connection's resume.
 */
export class FairSlots {
  /** Owners with requests waiting, in the order they are served (one served goes to the back). */
  private readonly waiting = new Map<object, (() => void)[]>();
  private readonly holding = new Set<object>();
  constructor(private free: number) {}

  take(owner: object): Promise<void> {
    if (this.free > 0 && !this.holding.has(owner)) {
      this.free--;
      this.holding.add(owner);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(owner);
      if (queue) queue.push(resolve);
      else this.waiting.set(owner, [resolve]);
    });
  }

  give(owner: object): void {
    this.holding.delete(owner);
    for (const [next, queue] of this.waiting) {
      if (this.holding.has(next)) continue;
      const resolve = queue.shift()!;
      this.waiting.delete(next);
      if (queue.length > 0) this.waiting.set(next, queue);
      this.holding.add(next);
      resolve();
      return;
    }
    this.free++;
  }
}

/**
 * What an attach sends before live delivery: on a resume, the channel's messages the client
 * missed, read from the log (replay); on a clean attach with `rewind`, its most recent messages,
 * from history. Both bounded: a backlog past maxReplayRecords or maxBufferedBytes is not sent, and
 * a replay reads at most maxReplayScanRecords records, all appended within connectionStateTtl.
 */
export class Backlog {
  private readonly replaySlots = new FairSlots(REPLAY_SLOTS);

  constructor(private readonly deps: BacklogDeps) {}

  /**
   * The channel's messages in its partition from `from` up to `to`, read from the log, for an
   * attach of `owner` (its connection); `gone` says the attach was detached meanwhile (then the
   * read ends, and nothing is returned: it throws).
   *
   * Continuity is a short-lived guarantee, as the platform's (README: Resume): a position whose
   * first record after it was appended more than connectionStateTtl ago, or with more than
   * maxReplayScanRecords records after it, throws a ServiceError 90003 (continuityLost) without
   * reading further, whoever made the position: a forged one sends no older messages than a
   * resume within the window would, and makes the service read no more than one would.
   */
  async replay(recordKey: string, partition: number, from: number, to: number, owner: object, gone: () => boolean): Promise<BacklogRecord[]> {
    // Checked before any read: the records a replay reads are at most to - from (offsets may skip).
    const { maxReplayScanRecords } = this.deps.settings;
    if (to - from > maxReplayScanRecords) {
      throw continuityLost(`: ${to - from} records were appended after its channelSerial, more than a resume reads (${maxReplayScanRecords})`);
    }
    // A few backlogs at a time, one per connection, each at most maxBufferedBytes: whatever many
    // clients ask for at once, replay holds a bounded amount of memory, and one client's many
    // backlogs wait behind each other, not in front of the others'.
    await this.replaySlots.take(owner);
    try {
      if (gone()) throw new Error('detached while the backlog waited for its read');
      return await this.readRange(recordKey, partition, from, to, gone);
    } finally {
      this.replaySlots.give(owner);
    }
  }

  private async readRange(recordKey: string, partition: number, from: number, to: number, gone: () => boolean): Promise<BacklogRecord[]> {
    const { maxReplayRecords, maxBufferedBytes, connectionStateTtlMs } = this.deps.settings;
    const now = this.deps.clock.now();
    const expired = (): ServiceError => continuityLost(` (messages expired): its channelSerial is older than the ${connectionStateTtlMs} ms a resume keeps continuity`);
    const found: BacklogRecord[] = [];
    let offset = from;
    let bytes = 0;
    while (offset < to) {
      if (gone()) throw new Error('detached while its backlog was read');
      const records = await this.deps.log.read(Topics.messages, partition, offset, Math.min(1000, to - offset));
      if (records.length === 0 || records[0].offset !== offset) throw continuityLost(` (messages expired): the log no longer holds offset ${offset} of partition ${partition}`);
      // The first record the client may have missed: appended before the window, continuity is
      // lost (the platform keeps it for connectionStateTtl), whatever the channel's records after it.
      if (offset === from && now - records[0].timestamp > connectionStateTtlMs) throw expired();
      for (const r of records) {
        if (r.offset >= to) break;
        if (r.key === recordKey) {
          // A record that is not the service's (another producer's: src/log/event-shape.ts) is no message of the channel.
          const event = eventOf(r.value);
          if (event?.type === 'messages.published') {
            // One of the channel's older than the window behind a newer first record (the
            // instances' clocks differ): continuity is lost as well.
            if (now - r.timestamp > connectionStateTtlMs) throw expired();
            found.push({ event, offset: r.offset });
          }
          bytes += r.value.byteLength;
          if (found.length > maxReplayRecords || bytes > maxBufferedBytes) throw continuityLost(` (message limit exceeded): more than ${maxReplayRecords} messages or ${maxBufferedBytes} bytes were published after its channelSerial`);
        }
      }
      offset = records[records.length - 1].offset + 1;
    }
    return found;
  }

  /**
   * The channel's most recent messages before `target` (the attach position) as `rewind` asks,
   * from the history projection once it has applied everything before `target`: what live
   * delivery sends from `target` on follows them with no gap and no repeat.
   */
  async rewind(appId: string, channel: string, partition: number, target: number, rewind: Rewind): Promise<BacklogRecord[]> {
    const { history, clock } = this.deps;
    const deadline = clock.now() + REWIND_WAIT_MS;
    while ((history.applied().get(partition) ?? 0) < target) {
      if (clock.now() > deadline || this.deps.closing()) throw new Error(`history has not caught up with offset ${target} of partition ${partition}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const now = clock.now();
    const start = 'sinceMs' in rewind ? now - rewind.sinceMs : now - MAX_REWIND_MS;
    // A window sends its newest messages up to the count cap too (the platform's: "rewind returns at
    // most 100 messages"): `2m` on a busy channel read and sent up to maxReplayRecords (10,000).
    const wanted = 'count' in rewind ? rewind.count : MAX_REWIND_COUNT;
    const found: HistoryEntry[] = [];
    let after: number | undefined;
    // Newest first, leaving out what came after the attach position (live delivery sends it).
    while (found.length < wanted) {
      // The end leaves room for another instance's clock running ahead; `target` bounds the rest.
      const page = await history.query({ appId, channel, start, end: now + 600_000, limit: 100, direction: 'backwards', after });
      for (const e of page) if (Math.floor(e.serial / 1024) < target && found.length < wanted) found.push(e);
      if (page.length < 100) break;
      after = page[page.length - 1].serial;
    }
    // One MESSAGE per publish, oldest first.
    const records: BacklogRecord[] = [];
    for (const e of found.reverse()) {
      const offset = Math.floor(e.serial / 1024);
      const last = records[records.length - 1];
      if (last && last.offset === offset) last.event.messages.push(e.message);
      else records.push({ offset, event: { type: 'messages.published', appId, channel, transport: 'rest', messages: [e.message] } });
    }
    return records;
  }
}
