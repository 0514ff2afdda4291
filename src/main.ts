#!/usr/bin/env node
// The composition root: read the configuration (nothing else reads process.env) and run the service
// (src/run-service.ts: check what it names, build the adapters and the service, listen, and close
// gracefully within SHUTDOWN_TIMEOUT_MS).
// A start that cannot succeed ends with one line on stderr ("failed to start: ...") and exit code 1
// (2 for a bad configuration), never a stack trace or a retry for ever.
import { ConfigError, parseCommandLine, parseConfig, serviceUsage } from './config.js';
import { runService } from './run-service.js';
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
  await runService(config);
}

main().catch((err) => {
  process.stderr.write(`failed to start: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}\n`);
  process.exit(1);
});
