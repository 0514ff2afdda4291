import type { Adapters } from '../../src/service.js';
import type { Log } from '../../src/log/port.js';

/**
 * The adapters with their log handing each consumer's records on as before, noting the position
 * of each record a consumer was handed (by the consumer's base name: the Kafka adapter's names
 * end in `-<instance id>-<random>`). How a test tells what a start read, without timing it.
 */
export function countingAdapters(adapters: Adapters, instanceId: string): { adapters: Adapters; handed: Map<string, { partition: number; offset: number }[]> } {
  const handed = new Map<string, { partition: number; offset: number }[]>();
  const log = adapters.log;
  const wrapped: Log = {
    kind: log.kind,
    maxAppendsInFlight: log.maxAppendsInFlight,
    append: (topic, records) => log.append(topic, records),
    consume: (options) => {
      const name = options.consumer.split(`-${instanceId}-`)[0];
      return log.consume({
        ...options,
        handle: (records) => {
          let positions = handed.get(name);
          if (!positions) handed.set(name, (positions = []));
          for (const r of records) positions.push({ partition: r.partition, offset: r.offset });
          return options.handle(records);
        },
      });
    },
    read: (topic, partition, from, max) => log.read(topic, partition, from, max),
    scan: log.scan && ((topic, partition, from, max, visit) => log.scan!(topic, partition, from, max, visit)),
    prepareReads: log.prepareReads && ((topic) => log.prepareReads!(topic)),
    partitions: (topic) => log.partitions(topic),
    endOffsets: (topic) => log.endOffsets(topic),
    close: () => log.close(),
  };
  return { adapters: { ...adapters, log: wrapped }, handed };
}

/** How many of the positions lie before `ends` (the log's end, per partition, at some moment). */
export const handedBefore = (positions: { partition: number; offset: number }[] | undefined, ends: Map<number, number>): number =>
  (positions ?? []).filter((p) => p.offset < (ends.get(p.partition) ?? 0)).length;
