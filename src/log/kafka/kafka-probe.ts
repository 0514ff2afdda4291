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
    retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 250, maxRetryTime: 1000 },
  });
  const admin = kafka.admin();
  let timer: NodeJS.Timeout | undefined;
  let last: unknown;
  const attempt = async (): Promise<KafkaCluster> => {
    for (;;) {
      try {
        await admin.connect();
        const cluster = await admin.describeCluster();
        return { brokers: cluster.brokers.length, controllerKnown: cluster.brokers.some((b) => b.nodeId === cluster.controller) };
      } catch (err) {
        last = err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  };
  try {
    return await Promise.race([
      attempt(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const why = last instanceof Error ? `: ${last.message}` : '';
          reject(new Error(`no Kafka broker of KAFKA_BROKERS=${brokers.join(',')} answered within ${timeoutMs} ms${why}`));
        }, timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await admin.disconnect().catch(() => {});
  }
}
