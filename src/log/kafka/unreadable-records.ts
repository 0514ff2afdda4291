// Records on a service topic that are not one of the service's events (src/log/event-shape.ts): left
// out of every consumer's batches, each logged once and counted (README: Records that are not the
// service's). Several consumers of this process read the same record (the projections' feed, the
// writers, realtime delivery): it is told of once, by whichever reads it first.
// An event type this version does not know is what a newer version of the service writes during a
// rolling upgrade: expected then, and not garbage. It is told of once per type by each instance, at
// warn, saying what it means; each record is counted all the same. Bytes that are no event (or no
// event's shape) stay at error, each record told of (at most LINES_PER_MINUTE a minute).
import { Topics, type LogRecord } from '../port.js';
import type { Unreadable, UnreadableReason } from '../event-shape.js';
import type { LoggerLike } from './kafka-logger.js';

/** Why a value may not be handed to a consumer (the service's: src/log/event-shape.ts's unreadable); undefined: it may. */
export type RecordCheck = (value: Uint8Array) => Unreadable | undefined;

/** Records remembered as told of, the newest (a consumer far behind reading one again logs it again). */
const REMEMBERED = 4_096;
/** At most this many log lines a minute; the counter counts every record. */
const LINES_PER_MINUTE = 60;
/** Unknown event types told of (once each); past this many, further new ones are told of as the other records are. */
const TYPES_TOLD = 256;

export class UnreadableRecords {
  /** Distinct records left out, by topic and reason (`<topic> <reason>`). */
  private readonly counts = new Map<string, number>();
  private readonly told = new Set<string>();
  /** The unknown event types told of, once each (see the file's comment). */
  private readonly typesTold = new Set<string>();
  private window = { start: 0, lines: 0, unlogged: 0 };

  constructor(
    private readonly check: RecordCheck,
    private readonly logger: LoggerLike | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Whether a consumer may be handed `record` (of `kafkaTopic`): one of the service's events. The
   * audit topic holds checkpoints, not events: its readers check them (src/audit/checkpoint.ts).
   */
  admits(kafkaTopic: string, record: LogRecord): boolean {
    if (record.topic === Topics.audit) return true;
    const wrong = this.check(record.value);
    if (!wrong) return true;
    const id = `${kafkaTopic}/${record.partition}/${record.offset}`;
    if (this.told.has(id)) return false;
    this.told.add(id);
    if (this.told.size > REMEMBERED) this.told.delete(this.told.values().next().value!);
    const key = `${record.topic} ${wrong.reason}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    if (wrong.reason === 'unknown-type' && wrong.type !== undefined) {
      if (this.typesTold.has(wrong.type)) return false;
      if (this.typesTold.size < TYPES_TOLD) {
        this.typesTold.add(wrong.type);
        this.logger?.warn(
          { topic: kafkaTopic, partition: record.partition, offset: record.offset, key: record.key.slice(0, 200), bytes: record.value.byteLength, reason: wrong.reason, type: wrong.type, detail: wrong.detail },
          `an event of type ${JSON.stringify(wrong.type)}, which this version does not know, is on the log: written by a newer version of the service (expected during a rolling upgrade), or by another producer. This instance's consumers leave every such event out (told of once per type; counted in cm_log_records_skipped_total{reason="unknown-type"}); an instance of the newer version applies them`,
        );
        return false;
      }
    }
    this.report(kafkaTopic, record, wrong.reason, wrong.detail);
    return false;
  }

  private report(kafkaTopic: string, record: LogRecord, reason: UnreadableReason, detail: string): void {
    const now = this.now();
    if (now - this.window.start >= 60_000) {
      if (this.window.unlogged > 0) this.logger?.error({ unlogged: this.window.unlogged }, 'more log records that are not the service\'s events were left out, unlogged (counted in cm_log_records_skipped_total)');
      this.window = { start: now, lines: 0, unlogged: 0 };
    }
    if (this.window.lines >= LINES_PER_MINUTE) {
      this.window.unlogged++;
      return;
    }
    this.window.lines++;
    this.logger?.error(
      { topic: kafkaTopic, partition: record.partition, offset: record.offset, key: record.key.slice(0, 200), bytes: record.value.byteLength, reason, detail },
      'a log record is not one of the service\'s events: every consumer leaves it out (written by another producer, or a newer version?)',
    );
  }

  /** Records left out so far, by topic and reason. */
  skipped(): { topic: string; reason: UnreadableReason; count: number }[] {
    return [...this.counts].map(([key, count]) => {
      const [topic, reason] = key.split(' ');
      return { topic, reason: reason as UnreadableReason, count };
    });
  }
}
