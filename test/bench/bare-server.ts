// The baseline: the same fastify, logger off, one route that takes a JSON body and answers 201.
import { performance } from 'node:perf_hooks';
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/bare', async (_request, reply) => reply.code(201).send());

await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
// The bench asks for the main thread's event loop time (servers.ts, ChildServer.eventLoop), as of the service.
process.on('message', (m: unknown) => {
  if (m === 'event-loop') process.send?.({ eventLoop: performance.eventLoopUtilization() });
});
process.channel?.unref();
process.once('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
