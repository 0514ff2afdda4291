// A production service at rest: its CPU and the Kafka broker's over IDLE_SECONDS (20) with no
// traffic, after 8 s to settle. What its consumers' polling and its clients' timers cost with
// nothing to do. The broker's CPU is read from /proc when INFRA_KAFKA_PID is set (infra/local).
//   source /work/infra-<name>.env && npx tsx test/bench/idle-cpu.ts
import { readFileSync } from 'node:fs';
import { startServiceChild } from './service-child.js';
import { productionEnv } from './production-env.js';
import { ROOT } from './servers.js';

const seconds = Number(process.env.IDLE_SECONDS ?? 20);
const found = await productionEnv(process.env, ROOT);
if ('skipped' in found) throw new Error(found.skipped);
const brokerPid = Number(process.env.INFRA_KAFKA_PID ?? 0);
/** utime + stime of a process, in ms (ticks of 10 ms). */
const cpuMs = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const service = await startServiceChild('idle', found.env);
try {
  await new Promise((resolve) => setTimeout(resolve, 8_000));
  const s0 = service.server.cpuMs() ?? 0;
  const b0 = brokerPid ? cpuMs(brokerPid) : 0;
  await new Promise((resolve) => setTimeout(resolve, seconds * 1_000));
  const s1 = service.server.cpuMs() ?? 0;
  const b1 = brokerPid ? cpuMs(brokerPid) : 0;
  const broker = brokerPid ? `, broker CPU ${((b1 - b0) / seconds).toFixed(1)} ms/s` : '';
  console.log(`idle ${seconds} s: service CPU ${((s1 - s0) / seconds).toFixed(1)} ms/s${broker}`);
} finally {
  await service.stop();
}
