import { logLevel, type logCreator } from 'kafkajs';

/** The part of a pino logger the Kafka adapter uses. */
export interface LoggerLike {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * kafkajs logs every retry and rebalance at info level; only its warnings and errors reach our
 * logger, and with no logger it is silent.
 */
export function kafkajsLogging(logger: LoggerLike | undefined): { logLevel: logLevel; logCreator?: logCreator } {
  if (!logger) return { logLevel: logLevel.NOTHING };
  return {
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ namespace, level, log }) => {
        const { message, timestamp: _timestamp, logger: _name, ...extra } = log;
        const fields = { kafkajs: namespace, ...extra };
        if (level <= logLevel.ERROR) logger.error(fields, message);
        else logger.warn(fields, message);
      },
  };
}
