// The service as a process: check what the configuration names, build the adapters and the
// service, listen, and stop on SIGTERM or SIGINT: gracefully within SHUTDOWN_TIMEOUT_MS once it
// listens, or, during the start, closing what it made so far (src/main.ts reads the configuration).
// A start that cannot succeed ends with one line on stderr ("failed to start: ...") and exit code 1.
import pino from 'pino';
import { modeOf, type Config } from './config.js';
import { adaptersFor, type Adapters } from './adapters.js';
import { startService, type Service } from './service.js';
import { checkAppsFile, checkDataDir, listenError, shutdownSignals } from './startup.js';

/** How the process gets its adapters (adaptersFor; tests give theirs an isolation prefix). */
export type MakeAdapters = (config: Config, logger: pino.Logger) => Promise<Adapters>;

/** Runs the service until a signal stops it (the process exits then), or exits 1 when its start fails. */
export async function runService(config: Config, makeAdapters: MakeAdapters = adaptersFor): Promise<void> {
  await start(config, makeAdapters).catch((err: unknown) => {
    // One line for the operator; the stack only when asked for (LOG_LEVEL=debug).
    const verbose = ['debug', 'trace'].includes(config.logLevel) && err instanceof Error;
    process.stderr.write(`failed to start: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n${verbose ? `${(err as Error).stack}\n` : ''}`);
    process.exit(1);
  });
}

async function start(config: Config, makeAdapters: MakeAdapters): Promise<void> {
  if (config.appsFile) checkAppsFile(config.appsFile);
  checkDataDir(config.dataDir, { create: true });
  const logger = pino({ level: config.logLevel });
  // The last line of defence: every promise is meant to be handled where it is made. A rejection
  // nobody handled interrupted no code half-way (its async function had already unwound), so the
  // process keeps serving every other client, with the fault logged at fatal for someone to fix.
  // Node's default (exit) would lose nothing acknowledged but take the service down for all.
  process.on('unhandledRejection', (reason, promise) => {
    logger.fatal({ err: reason, promise: String(promise) }, 'unhandled promise rejection (a bug: the service keeps running)');
  });
  // A throw nobody caught left whatever it interrupted half-done: exit, and let the supervisor
  // start a clean process (the log holds everything acknowledged).
  process.on('uncaughtException', (err, origin) => {
    logger.fatal({ err, origin }, 'uncaught exception; exiting');
    process.exit(1);
  });
  // A signal during the start (waiting for Kafka or ClickHouse, its consumers joining their groups)
  // stops it: what it made so far is closed, its consumers leaving their groups (else the other
  // instances and the next start wait out their session timeout at the next rebalance), and the
  // process exits 0. Once the service is up, the graceful shutdown below.
  let adapters: Adapters | undefined;
  let service: Service | undefined;
  let stoppedDuringStart = false;
  const stopDuringStart = (signal: string): void => {
    stoppedDuringStart = true;
    const made = adapters;
    logger.info(
      { signal, deadlineMs: config.shutdownTimeoutMs },
      made ? 'stopping during the start: closing the Kafka consumers and producers made so far (the consumers leave their groups)' : 'stopping during the start: nothing connected yet',
    );
    const deadline = setTimeout(() => {
      logger.error({ deadlineMs: config.shutdownTimeoutMs }, 'the stop during the start did not finish within SHUTDOWN_TIMEOUT_MS; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    closeMade(made).then(
      (left) => {
        clearTimeout(deadline);
        logger.info({ signal, consumersLeft: left }, 'stopped during the start; the service did not start');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'the stop during the start failed');
        process.exit(1);
      },
    );
  };
  // A second signal (not the same one twice) forces the exit: shutdownSignals.
  let signalled = false;
  const begin = (signal: string): void => {
    signalled = true;
    if (service) stop(service, logger, signal);
    else stopDuringStart(signal);
  };
  const onSignal = shutdownSignals({ begin, force: () => process.exit(1), logger });
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  try {
    adapters = await makeAdapters(config, logger);
    // Adapters made after a stop began (the probes answered meanwhile) are closed by it.
    if (stoppedDuringStart) return await whileStopping(closeMade(adapters).then(() => undefined));
    const started = await startService(config, logger, adapters);
    if (stoppedDuringStart) return await whileStopping(Promise.resolve());
    service = started;
  } catch (err) {
    // What the stop closed under the start (the log) fails it: the stop goes on, and exits.
    if (stoppedDuringStart) return whileStopping(Promise.resolve());
    throw err;
  }
  try {
    await service.app.listen({ port: config.port, host: config.host });
  } catch (err) {
    // A signal between the start and the listen: the shutdown closed the listener; it exits.
    if (signalled) return whileStopping(Promise.resolve());
    await service.close().catch(() => {});
    throw listenError(err, config.host, config.port);
  }
  const address = service.app.server.address();
  const port = address && typeof address === 'object' ? address.port : config.port; // PORT=0: the one given
  if (service.createdDefaultKey) {
    // Printed once, on the start that created it, to the terminal (stderr), never into the JSON
    // log on stdout; it is kept in DATA_DIR/default-app.json.
    const key = service.createdDefaultKey;
    process.stderr.write(
      `\nCreated the default application. Its root key (keep it secret; also in ${config.dataDir}/default-app.json):\n\n  ${key}\n\n` +
        `Publish: curl -u '${key}' -H 'Content-Type: application/json' ` +
        `-d '{"name":"greeting","data":"hello"}' http://localhost:${port}/channels/test/messages\n\n`,
    );
    logger.info({ file: `${config.dataDir}/default-app.json` }, 'created the default application; its root key was printed on stderr and is in the file');
  } else if (!config.appsFile) {
    // Every later start says where the key is (never the key itself, which was shown once).
    process.stderr.write(`\nThe default application's root key is in ${config.dataDir}/default-app.json\n\n`);
    logger.info({ file: `${config.dataDir}/default-app.json` }, "the default application's root key is in the file");
  }
  logger.info({ mode: modeOf(config), port, host: config.host, dataDir: config.dataDir, sandbox: config.sandbox }, 'service listening');
}

/**
 * The graceful shutdown: /ready fails at once (load balancers stop sending), the listener stops
 * taking connections, requests in flight (publishes) are answered, consumers stop and projections
 * store their checkpoints, the log closes. Past SHUTDOWN_TIMEOUT_MS the process exits anyway (code
 * 1): what was acknowledged is in the log, and projections replay from their last checkpoint. A
 * second signal exits at once (code 1), the same reasons holding.
 */
function stop(service: Service, logger: pino.Logger, signal: string): void {
  const { config } = service;
  logger.info({ signal, deadlineMs: config.shutdownTimeoutMs }, 'shutting down');
  const deadline = setTimeout(() => {
    logger.error({ deadlineMs: config.shutdownTimeoutMs }, 'shutdown did not finish within SHUTDOWN_TIMEOUT_MS; exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs);
  service.close().then(
    () => {
      clearTimeout(deadline);
      logger.info('shut down');
      process.exit(0);
    },
    (err) => {
      logger.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

/**
 * What a start made before a signal stopped it: the log (its consumers leave their groups, its
 * producers disconnect), then the rest (ClickHouse, DATA_DIR's lock). Returns how many consumers left.
 */
async function closeMade(adapters: Adapters | undefined): Promise<number> {
  if (!adapters) return 0;
  try {
    if (adapters.log.closeAndLeave) return (await adapters.log.closeAndLeave()).consumers;
    await adapters.log.close();
    return 0;
  } finally {
    await adapters.close?.();
  }
}

/** The start, stopped by a signal: it waits for `closing`, and the stop exits the process. */
async function whileStopping(closing: Promise<void>): Promise<never> {
  await closing.catch(() => undefined);
  return new Promise<never>(() => undefined);
}

