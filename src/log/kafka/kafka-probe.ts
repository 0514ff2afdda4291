import { Kafka, logLevel, type Admin } from 'kafkajs';
import { waitFor } from '../../startup.js';

export interface KafkaCluster {
  brokers: number;
  /** Whether the cluster names a controller among its brokers: the idempotent producer needs one. */
  controllerKnown: boolean;
}

/** Longest single try: a broker address that accepts connections but does not speak Kafka holds a request this long. */
const ATTEMPT_TIMEOUT_MS = 3000;

/**
 * Asks the brokers for the cluster's description, saying "waiting for Kafka at host:port" about
 * once a second while none answers (with a logger), and giving up after `timeoutMs` (the start
 * must end with one clear line, not retry for ever). kafkajs' own logging is off: a broker that
 * does not answer is said by these lines and the error.
 */
export async function probeKafka(
  brokers: string[],
  clientId: string,
  timeoutMs: number,
  logger?: { info(obj: object, msg?: string): void },
): Promise<KafkaCluster> {
  const attemptMs = Math.min(timeoutMs, ATTEMPT_TIMEOUT_MS);
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: attemptMs,
    authenticationTimeout: attemptMs,
    requestTimeout: attemptMs,
    retry: { retries: 0 }, // tried again by waitFor, until the time is up
  });
  let admin: Admin | undefined;
  let ok = false;
  try {
    const cluster = await waitFor(
      { what: 'Kafka', at: brokers.join(','), timeoutMs, logger, gaveUp: `no Kafka broker of KAFKA_BROKERS=${brokers.join(',')} answered within ${timeoutMs} ms` },
      async () => {
        admin ??= kafka.admin();
        try {
          await admin.connect();
          const described = await admin.describeCluster();
          return { brokers: described.brokers.length, controllerKnown: described.brokers.some((b) => b.nodeId === described.controller) };
        } catch (err) {
          // A fresh admin for the next try: one left half-connected keeps its request pending.
          const failed = admin;
          admin = undefined;
          void failed.disconnect().catch(() => {});
          throw err;
        }
      },
    );
    ok = true;
    return cluster;
  } finally {
    // After a success the admin disconnects at once; after giving up, a try may still hang on a
    // request: it is let go, not awaited (nothing may hold a start that has ended).
    const last = admin;
    if (ok) await last?.disconnect().catch(() => {});
    else void last?.disconnect().catch(() => {});
  }
}
