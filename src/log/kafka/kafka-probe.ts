import { Kafka, logLevel } from 'kafkajs';

export interface KafkaCluster {
  brokers: number;
  /** Whether the cluster names a controller among its brokers: the idempotent producer needs one. */
  controllerKnown: boolean;
}

/**
 * Asks the brokers for the cluster's description, giving up after `timeoutMs` (the start must end
 * with one clear line, not retry for ever). kafkajs' own logging is off: a broker that does not
 * answer is said once, by the caller.
 */
export async function probeKafka(brokers: string[], clientId: string, timeoutMs: number): Promise<KafkaCluster> {
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: Math.min(timeoutMs, 3000),
    retry: { retries: 0 }, // tried again below, until the time is up
  });
  const admin = kafka.admin();
  let timer: NodeJS.Timeout | undefined;
  let last: unknown;
  let gaveUp = false;
  const attempt = async (): Promise<KafkaCluster> => {
    // Stops once given up: nothing may keep a process that is exiting alive.
    while (!gaveUp) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        return { brokers: cluster.brokers.length, controllerKnown: cluster.brokers.some((b) => b.nodeId === cluster.controller) };
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    throw new Error('given up');
  };
  const attempting = attempt();
  attempting.catch(() => {}); // settles after the race when given up
  try {
    return await Promise.race([
      attempting,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const why = last instanceof Error ? `: ${last.message}` : '';
          reject(new Error(`no Kafka broker of KAFKA_BROKERS=${brokers.join(',')} answered within ${timeoutMs} ms${why}`));
        }, timeoutMs);
      }),
    ]);
  } finally {
    gaveUp = true;
    clearTimeout(timer);
    await admin.disconnect().catch(() => {});
  }
}
