// What a start read, for the bounded-start tests (README: A bounded start): the records each
// projection's consumer was handed, and whether the shared writers caught up before a stop.
import { Topics, type Topic } from '../../src/log/port.js';
import type { Service } from '../../src/service.js';

/**
 * What a projection's consumer was handed. On Kafka the projections reading a whole topic share one
 * consumer (projections/runner.ts, `<topic>-feed`), which starts at the earliest of their positions:
 * what it read is what each of them read at most.
 */
export const FEEDS: Record<string, string> = { presence: 'presence-feed', 'channels-presence': 'presence-feed', 'channels-connections': 'connections-feed' };
export const readBy = (handed: Map<string, { partition: number; offset: number }[]>, name: string) => handed.get(name) ?? handed.get(FEEDS[name]);

/**
 * Whether the writers of these topics applied them up to their ends (a writer's close writes what it
 * applied, with its checkpoint): production mode, where writers shared among the instances do
 * (projections/projection-set.ts: presence history, stats), each topic's a consumer group handed
 * its partitions seconds after the start. A restart depends on them: the presence snapshot serves
 * only if presence history's store holds everything it covers (projections/presence: the reader's
 * tail keeps what the store lacks, and those entries need the member set as it was then), and the
 * stats reader, which shares a feed with the other projections reading the topic, resumes at the
 * stats store's checkpoint. The embedded mode's projections write themselves.
 */
export const writersCaughtUp = (s: Service, ends: [Topic, Map<number, number>][]): boolean => {
  const writers = (topic: Topic) => (topic === Topics.presence ? ['presence-writer', `stats-writer-${topic}`] : [`stats-writer-${topic}`]);
  return ends.every(([topic, end]) =>
    writers(topic).every((name) => {
      if (!s.runner.lag().has(name)) return true;
      const at = s.runner.consumer(name).positions();
      return [...end].every(([p, offset]) => (at.get(p) ?? 0) >= offset);
    }),
  );
};

