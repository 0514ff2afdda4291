// The composition root: read the configuration, build the adapters and the service, listen,
// and close gracefully. Nothing else reads process.env.
import pino from 'pino';
import { ConfigError, modeOf, parseConfig } from './config.js';
import { adaptersFor, startService } from './service.js';
import { DataDirLockedError } from './log/embedded/data-dir-lock.js';

async function main(): Promise<void> {
  let config;
  try {
    config = parseConfig(process.env, process.argv.slice(2));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
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
  if (service.createdDefaultKey) {
    // Printed once, on the start that created it; it is kept in DATA_DIR/default-app.json.
    process.stdout.write(
      `\nCreated the default application. Its root key (keep it secret):\n\n  ${service.createdDefaultKey}\n\n` +
        `Publish: curl -u '${service.createdDefaultKey}' -H 'Content-Type: application/json' ` +
        `-d '{"name":"greeting","data":"hello"}' http://localhost:${config.port}/channels/test/messages\n\n`,
    );
  }
  await service.app.listen({ port: config.port, host: config.host });
  logger.info({ mode: modeOf(config), port: config.port, dataDir: config.dataDir, sandbox: config.sandbox }, 'service listening');

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    service.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err) => {
  // One line for what the operator must fix; a stack for anything else.
  const detail = err instanceof DataDirLockedError ? err.message : err instanceof Error ? err.stack : String(err);
  process.stderr.write(`failed to start: ${detail}\n`);
  process.exit(1);
});
