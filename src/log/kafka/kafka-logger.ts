import { logLevel, type logCreator } from 'kafkajs';

/** The part of a pino logger the Kafka adapter uses. */
export interface LoggerLike {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * What kafkajs logs as an error while a consumer group rebalances, which every instance starting or
 * stopping causes: a heartbeat or commit answered REBALANCE_IN_PROGRESS, the runner re-joining. Its
 * consumers re-join by themselves; an operator reading error lines for each one would look for a fault
 * that is not there. They are logged at info level.
 */
const REBALANCING = /rebalanc/i;

/**
 * What kafkajs logs as errors when a consumer fetches an offset the log deleted (retention): the
 * fetch's answer, and its start again at the log's start. The consumer tells what was lost itself,
 * once per range (src/log/lost-records.ts, at error): these are logged at warn level.
 */
const OUT_OF_RANGE = /offset out of range|not within the range of offsets/i;

/** Whether a kafkajs error line is a fetch of an offset the log deleted (see OUT_OF_RANGE). */
function isOutOfRange(message: string, extra: Record<string, unknown>): boolean {
  return OUT_OF_RANGE.test(message) || (typeof extra.error === 'string' && OUT_OF_RANGE.test(extra.error));
}

/** Whether a kafkajs error line is a group's ordinary rebalance (see REBALANCING). */
export function isRebalanceNoise(message: string, extra: Record<string, unknown>): boolean {
  return REBALANCING.test(message) || (typeof extra.error === 'string' && REBALANCING.test(extra.error));
}

/**
 * What kafkajs logs, at error, for each attempt to reach a broker that cannot be reached (refused,
 * reset, closed, timed out, unknown name): while Kafka is down, every client's every retry, some 50 lines a
 * second from one instance (408 in an 8-second outage). They are logged at most once a second, the
 * line carrying how many it stands for (`repeated`), as the HTTP layer does for its 503s.
 */
const UNREACHABLE = /ECONNREFUSED|ECONNRESET|Closed connection|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|Connection timeout|Failed to connect/i;
const UNREACHABLE_EVERY_MS = 1_000;

/**
 * kafkajs logs every retry and rebalance at info level; only its warnings and errors reach our
 * logger (a rebalance's "errors" at info; a broker that cannot be reached once a second, see
 * UNREACHABLE), and with no logger it is silent.
 */
export function kafkajsLogging(logger: LoggerLike | undefined, now: () => number = Date.now): { logLevel: logLevel; logCreator?: logCreator } {
  if (!logger) return { logLevel: logLevel.NOTHING };
  // Shared by every kafkajs client of this logger (producers, consumers, admin): one outage, one line a second.
  let unreachableLoggedAt = -Infinity;
  let unreachableSince = 0;
  return {
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ namespace, level, log }) => {
        const { message, timestamp: _timestamp, logger: _name, ...extra } = log;
        const fields = { kafkajs: namespace, ...extra };
        if (isRebalanceNoise(message, extra)) logger.info(fields, message);
        else if (level <= logLevel.ERROR && !isOutOfRange(message, extra)) {
          if (UNREACHABLE.test(message)) {
            unreachableSince++;
            const at = now();
            if (at - unreachableLoggedAt < UNREACHABLE_EVERY_MS) return;
            logger.error({ ...fields, repeated: unreachableSince }, message);
            unreachableLoggedAt = at;
            unreachableSince = 0;
          } else logger.error(fields, message);
        } else logger.warn(fields, message);
      },
  };
}
