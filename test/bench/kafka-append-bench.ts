// The Kafka log alone, without the service: CPU of this process per append (issue 23 item 3), so that
// a change to what each record carries (its chain header: kafka-chain.ts) is measured without the
// HTTP route around it. Rounds of APPENDERS concurrent appends of one record each (as publishes
// arrive), then one read of what they wrote (an audit's read: each record's chain decoded).
// Prints CPU µs per append (user + system of the process) and the main thread's busy µs per append
// (event loop utilisation), and the same per record read. No baseline of its own: run it from two
// trees, one after the other, on the same infrastructure.
//   source /work/infra-<name>.env && npx tsx test/bench/kafka-append-bench.ts
// KAFKA_BENCH_APPENDERS (64), KAFKA_BENCH_ROUNDS (150), KAFKA_BENCH_WARMUP (30).
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';

const numberOf = (name: string, fallback: number): number => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, not ${process.env[name]}`);
  return v;
};
const appenders = numberOf('KAFKA_BENCH_APPENDERS', 64);
const rounds = numberOf('KAFKA_BENCH_ROUNDS', 150);
const warmup = numberOf('KAFKA_BENCH_WARMUP', 30);
const brokers = process.env.KAFKA_BROKERS?.split(',').filter(Boolean) ?? [];
if (brokers.length === 0) throw new Error('KAFKA_BROKERS is not set: source the env file of infra/local/start.sh');
const mock = process.env.KAFKA_MOCK === '1';

let n = 0;
const publish = (): AppendRecord => {
  const i = n++;
  const channel = `ch${i % 50}`;
  return {
    key: `app1:${channel}`,
    timestamp: Date.now(),
    value: encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${i}:0`, timestamp: Date.now(), name: 'e', data: `payload ${i} ${'x'.repeat(64)}` }] }),
  };
};

const log = new KafkaLog({ brokers, clientId: 'kafka-append-bench', topicPrefix: `kab-${randomBytes(4).toString('hex')}-`, idempotent: !mock, replicationFactor: mock ? undefined : 1 });

const round = (): Promise<unknown> => Promise.all(Array.from({ length: appenders }, () => log.append(Topics.messages, [publish()])));

/** CPU and main-thread busy time of `work`, in µs. */
async function measure(work: () => Promise<void>): Promise<{ cpuUs: number; busyUs: number; wallMs: number }> {
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await work();
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  return { cpuUs: used.user + used.system, busyUs: busy.active * 1000, wallMs };
}

try {
  for (let i = 0; i < warmup; i++) await round();
  const appends = await measure(async () => {
    for (let i = 0; i < rounds; i++) await round();
  });
  const count = rounds * appenders;
  const partitions = await log.partitions(Topics.messages);
  let read = 0;
  const reads = await measure(async () => {
    for (let p = 0; p < partitions; p++) {
      for (let offset = 0; ; ) {
        const records = await log.readChained(Topics.messages, p, offset, 2_000);
        if (records.length === 0) break;
        for (const r of records) if (!r.chain || r.chain === 'malformed') throw new Error(`record ${p}/${r.offset} carries no chain`);
        read += records.length;
        offset = records[records.length - 1].offset + 1;
      }
    }
  });
  const f = (x: number): string => x.toFixed(1);
  console.log(
    `kafka append: ${count} appends (${appenders} at a time × ${rounds} rounds, after ${warmup} warm-up rounds): ` +
      `CPU ${f(appends.cpuUs / count)} µs/append, main thread busy ${f(appends.busyUs / count)} µs/append, ${Math.round((count / appends.wallMs) * 1000)} appends/s; ` +
      `read ${read} records: CPU ${f(reads.cpuUs / read)} µs/record, busy ${f(reads.busyUs / read)} µs/record; load ${loadavg()[0].toFixed(2)}`,
  );
} finally {
  await log.close();
}
