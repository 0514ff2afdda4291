// The service in a bench child, composed as src/main.ts composes it (parseConfig, adapters,
// startService, listen, close on SIGTERM), except that in production mode its Kafka topics and
// ClickHouse tables carry a prefix unique to the run (BENCH_RUN_PREFIX): runs on the same
// infrastructure never replay each other's data.
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { modeOf, parseConfig } from '../../src/config.js';
import { embeddedAdapters, startService, type Adapters } from '../../src/service.js';

try {
  const config = parseConfig(process.env);
  const logger = pino({ level: config.logLevel });
  const prefix = process.env.BENCH_RUN_PREFIX ?? '';
  let adapters: Adapters;
  if (modeOf(config) === 'embedded') {
    adapters = embeddedAdapters(config);
  } else {
    const { productionAdapters } = await import('../../src/production-adapters.js');
    adapters = await productionAdapters(config, logger, { topicPrefix: prefix.replaceAll('_', '-'), tablePrefix: prefix });
  }
  const service = await startService(config, logger, adapters);
  await service.app.listen({ port: config.port, host: config.host });
  // The bench asks for the heap over IPC (the soak samples it); RSS it reads from /proc itself.
  // 'memory-gc' (BENCH_SOAK_GC=1, which starts this child with --expose-gc): after a full GC.
  // 'event-loop': the main thread's event loop time so far (servers.ts, ChildServer.eventLoop).
  process.on('message', (m: unknown) => {
    if (m === 'memory-gc') (globalThis as { gc?: () => void }).gc?.();
    if (m === 'memory' || m === 'memory-gc') process.send?.({ memory: process.memoryUsage() });
    if (m === 'event-loop') process.send?.({ eventLoop: performance.eventLoopUtilization() });
  });
  // A 'message' listener holds the channel open; the child must still exit when asked to.
  process.channel?.unref();
  process.once('SIGTERM', () => {
    service.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
} catch (err) {
  process.stderr.write(`failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
}
