// What a graceful stop waits for in production mode (ProjectionRunner.stop with drainMs): the
// writers shared among the instances applying, of the partitions they hold, the log up to its end,
// so that their close writes to the stores what the stop's snapshots cover (README: A bounded start).
import type { Logger } from 'pino';
import type { Log, Subscription, Topic } from '../src/log/port.js';

export interface DrainedWriter {
  name: string;
  topic: Topic;
  subscription: Subscription;
}

/**
 * Waits, up to `ms`, for each writer to be handed its partitions (a consumer group forming right
 * after a start) and to have applied what the log holds of them up to its end as it is now (the
 * readers have stopped). Logs what it waits for and, past `ms`, what it gave up on; never throws
 * for a writer that did not get there.
 */
export async function drainWriters(log: Log, logger: Logger, writers: DrainedWriter[], ms: number): Promise<void> {
  const startedAt = Date.now();
  const deadline = startedAt + ms;
  const left = (): number => Math.max(0, deadline - Date.now());
  const topics = [...new Set(writers.map((w) => w.topic))];
  // The log's ends, as bounded as the rest (a broker gone meanwhile).
  let timer: NodeJS.Timeout | undefined;
  const asked = Promise.all(topics.map(async (topic) => [topic, await log.endOffsets(topic)] as const));
  const answered = await Promise.race([asked, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))]).finally(() => clearTimeout(timer));
  if (!answered) {
    asked.catch(() => undefined);
    logger.warn({ writers: writers.map((w) => w.name), drainMs: ms }, "stop: gave up on the shared writers: the log's end offsets did not come");
    return;
  }
  const ends = new Map<Topic, Map<number, number>>(answered);
  const joined = new Set<string>();
  for (const { name, subscription } of writers) void subscription.caughtUp.then(() => joined.add(name));
  /** Per writer not yet done: the records it lacks of the partitions it holds, or undefined while it waits for partitions. */
  const behind = (): Map<DrainedWriter, number | undefined> => {
    const lacking = new Map<DrainedWriter, number | undefined>();
    for (const writer of writers) {
      // The partitions it was handed and has started (their positions); until caughtUp, its group
      // may still be handing it some (Kafka: the first hand-over), and after it a rebalance during
      // the drain (other instances stopping) may hand it partitions whose start is being asked.
      const end = ends.get(writer.topic)!;
      let records = 0;
      for (const [p, at] of writer.subscription.positions()) records += Math.max(0, (end.get(p) ?? 0) - at);
      if (records > 0) lacking.set(writer, records);
      else if (!joined.has(writer.name) || (writer.subscription.starting?.().length ?? 0) > 0) lacking.set(writer, undefined);
    }
    return lacking;
  };
  const describe = (lacking: Map<DrainedWriter, number | undefined>) =>
    [...lacking].map(([{ name, topic }, records]) => ({ consumer: name, topic, ...(records === undefined ? { waitingForPartitions: true } : { recordsBehind: records }) }));
  // The caughtUp callbacks of the writers caught up already run first.
  await new Promise((resolve) => setImmediate(resolve));
  let lacking = behind();
  if (lacking.size === 0) return;
  logger.info({ writers: describe(lacking), drainMs: ms }, 'stop: waiting for the shared writers to apply the log up to its end before their stores are written');
  while (lacking.size > 0 && left() > 0) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(25, left())));
    lacking = behind();
  }
  if (lacking.size === 0) {
    logger.info({ ms: Date.now() - startedAt }, 'stop: the shared writers applied the log up to its end');
    return;
  }
  logger.warn({ writers: describe(lacking), drainMs: ms }, "stop: gave up waiting for the shared writers; the next start may not use this stop's snapshots (an older one, or a replay)");
}
