// The realtime gateway's housekeeping, measured alone: N idle connections with a short
// maxIdleInterval (2 s), so HEARTBEATs and pings come due every 2 s, and the service's event-loop
// delay (p50, p99, max) over 10 s. The service runs in this process, the clients in a child.
// `npx tsx test/bench/housekeeping-stall.ts [N]` (default 8,000). Figures: test/bench/README.md, Realtime.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { removeDir, startTestService, listening } from '../helpers/service.js';

const N = Number(process.argv[2] ?? 8000);

if (process.argv[2] === 'clients') {
  const { WebSocket } = await import('ws');
  const [, , , port, key, n] = process.argv;
  const sockets: InstanceType<typeof WebSocket>[] = [];
  let open = 0;
  for (let i = 0; i < Number(n); i++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/?key=${encodeURIComponent(key)}&format=json&v=6&heartbeats=true`);
    ws.on('error', () => undefined);
    ws.once('open', () => {
      if (++open === Number(n)) process.send?.('ready');
    });
    sockets.push(ws);
    if (i % 200 === 199) await new Promise((r) => setTimeout(r, 10));
  }
} else {
  const ts = await startTestService({ REALTIME_MAX_IDLE_INTERVAL_MS: '2000', MAX_CONNECTIONS: String(N + 1000) });
  const port = await listening(ts);
  const child = fork(fileURLToPath(import.meta.url), ['clients', String(port), ts.key, String(N)], { execArgv: ['--import', 'tsx'] });
  process.stderr.write(`opening ${N} connections...\n`);
  await new Promise((r) => child.once('message', r));
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  process.stderr.write('measuring for 10 s...\n');
  await new Promise((r) => setTimeout(r, 10_000));
  delay.disable();
  const ms = (ns: number): string => (ns / 1e6).toFixed(1);
  console.log(`${N} idle connections, maxIdleInterval 2 s: event-loop delay over 10 s p50 ${ms(delay.percentile(50))} ms, p99 ${ms(delay.percentile(99))} ms, max ${ms(delay.max)} ms`);
  child.kill();
  await ts.close();
  removeDir(ts.dataDir);
}
