// Read your own writes (README: Consistency of reads). An instance notes, per topic and partition,
// the highest offset of every append it made, as the append resolves and so before it answers the
// write. A read then waits until the projection it reads has applied, in this process, at least
// what was noted when the read arrived: every write this instance acknowledged before the read is
// in its answer. The wait is bounded (limits.ts: readYourWritesMs); past it the read fails with
// 50003 (504) rather than answer without a write it acknowledged.
import { ServiceError } from '../errors.js';
import { PartialAppendError, type Log, type LogPosition, type Topic } from './port.js';
import { positionsAfter, type AppliedPositions, type Positions } from './applied-positions.js';

export class OwnWrites {
  private readonly written = new Map<Topic, Map<number, number>>();

  constructor(private readonly timeoutMs: number) {}

  /**
   * `log` with every append's positions noted here. A Proxy rather than a class that forwards each
   * member: whatever the Log port gains (an adapter's in-flight limit, say) reaches the appender as is.
   */
  recording(log: Log): Log {
    const note = (topic: Topic, positions: LogPosition[]): LogPosition[] => {
      this.note(topic, positions);
      return positions;
    };
    return new Proxy(log, {
      get(target, property) {
        if (property === 'append') {
          return (topic: Topic, records: Parameters<Log['append']>[1]) =>
            target.append(topic, records).then(
              (positions) => note(topic, positions),
              (err: unknown) => {
                // Part written (a producer's request failed, another's did not): the batcher
                // acknowledges the writes that landed, so their positions are noted as well.
                if (err instanceof PartialAppendError) note(topic, err.positions.filter((p): p is LogPosition => p !== undefined));
                throw err;
              },
            );
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  note(topic: Topic, positions: LogPosition[]): void {
    let partitions = this.written.get(topic);
    if (!partitions) this.written.set(topic, (partitions = new Map()));
    for (const [partition, next] of positionsAfter(positions)) {
      if (next > (partitions.get(partition) ?? 0)) partitions.set(partition, next);
    }
  }

  /** What this instance has appended to `topic` so far: the next offset after its last, per partition. */
  of(topic: Topic): Positions {
    return new Map(this.written.get(topic));
  }

  /** The last position this instance appended to `topic`, per partition. */
  last(topic: Topic): LogPosition[] {
    return [...(this.written.get(topic) ?? [])].map(([partition, next]) => ({ partition, offset: next - 1 }));
  }

  /**
   * Resolves once `applied` includes every append this instance made to `topics` before the call;
   * throws ServiceError timeout after the limit. `reader` names what lags in the error.
   */
  async reflectedIn(applied: AppliedPositions, topics: readonly Topic[], reader: string): Promise<void> {
    const targets = topics.map((topic) => [topic, this.of(topic)] as const);
    const waits = await Promise.all(targets.map(([topic, target]) => applied.until(topic, target, this.timeoutMs)));
    if (waits.every(Boolean)) return;
    const behind = targets.reduce((n, [topic, target]) => n + applied.behind(topic, target), 0);
    throw new ServiceError(
      'timeout',
      `this instance acknowledged writes that its ${reader} has not applied within ${this.timeoutMs} ms (${behind} records behind); the answer would leave them out, so it is not given: retry`,
    );
  }
}
