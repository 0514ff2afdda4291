#!/usr/bin/env node
// The composition root: read the configuration, check what it names, build the adapters and the
// service, listen, and close gracefully within SHUTDOWN_TIMEOUT_MS. Nothing else reads process.env.
// A start that cannot succeed ends with one line on stderr ("failed to start: ...") and exit code 1
// (2 for a bad configuration), never a stack trace or a retry for ever.
import pino from 'pino';
import { ConfigError, modeOf, parseCommandLine, parseConfig, serviceUsage } from './config.js';
import { adaptersFor } from './adapters.js';
import { startService } from './service.js';
import { checkAppsFile, checkDataDir, listenError, shutdownSignals } from './startup.js';
import { commandAsTyped } from './cli/command.js';

async function main(): Promise<void> {
  let config;
  try {
    if (parseCommandLine(process.argv.slice(2)).help) {
      process.stdout.write(serviceUsage(commandAsTyped('channel-messaging')));
      return;
    }
    config = parseConfig(process.env, process.argv.slice(2));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  await start(config).catch((err: unknown) => {
    // One line for the operator; the stack only when asked for (LOG_LEVEL=debug).
    const verbose = ['debug', 'trace'].includes(config.logLevel) && err instanceof Error;
    process.stderr.write(`failed to start: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n${verbose ? `${(err as Error).stack}\n` : ''}`);
    process.exit(1);
  });
}

async function start(config: ReturnType<typeof parseConfig>): Promise<void> {
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
  const adapters = await adaptersFor(config, logger);
  const service = await startService(config, logger, adapters);
  try {
    await service.app.listen({ port: config.port, host: config.host });
  } catch (err) {
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

  // Graceful shutdown: /ready fails at once (load balancers stop sending), the listener stops taking
  // connections, requests in flight (publishes) are answered, consumers stop and projections store
  // their checkpoints, the log closes. Past SHUTDOWN_TIMEOUT_MS the process exits anyway (code 1):
  // what was acknowledged is in the log, and projections replay from their last checkpoint. A
  // second signal exits at once (code 1), the same reasons holding.
  const stop = (signal: string): void => {
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
  };
  // A second signal (not the same one twice) forces the exit: shutdownSignals.
  const onSignal = shutdownSignals({ begin: stop, force: () => process.exit(1), logger });
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
}

main().catch((err) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
  process.exit(1);
});
