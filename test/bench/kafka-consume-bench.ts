// The Kafka log's consumers alone, without the service: CPU of this process per record consumed
// (issue 23 item 3), so that a change to how records are fetched and decoded is measured without
// the HTTP route and the producer around it. Appends RECORDS records in rounds of 64 appends of one
// record (as publishes arrive: one produce request's records are one batch a fetch returns), then
// starts CONSUMERS subscriptions of the topic from offset 0 and measures, from their start to the
// moment all have delivered every record, the process's CPU (user + system) and the main thread's
// busy time per record delivered. No baseline of its own: run it from two trees, alternately.
//   source /work/infra-<name>.env && npx tsx test/bench/kafka-consume-bench.ts
// KAFKA_BENCH_PHASE=live: the consumers start first and read while the records are appended (as
// the service's feed and writers read its publishes), each decoding every event as a projection
// does; CPU and busy time per record appended, appends and consumption together.
// KAFKA_BENCH_RECORDS (20000), KAFKA_BENCH_CONSUMERS (2).
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { decodeEvent, encodeEvent } from '../../src/log/event-codec.js';

const numberOf = (name: string, fallback: number): number => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, not ${process.env[name]}`);
  return v;
};
const total = numberOf('KAFKA_BENCH_RECORDS', 20_000);
const consumers = numberOf('KAFKA_BENCH_CONSUMERS', 2);
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

// KAFKA_BENCH_PREFIX: consume what an earlier run with KAFKA_BENCH_PHASE=produce wrote under that prefix
// (so that a CPU profile of the consuming process holds only consuming).
const phase = process.env.KAFKA_BENCH_PHASE ?? 'both';
const prefix = process.env.KAFKA_BENCH_PREFIX ?? `kcb-${randomBytes(4).toString('hex')}-`;
const log = new KafkaLog({ brokers, clientId: 'kafka-consume-bench', topicPrefix: prefix, idempotent: !mock, replicationFactor: mock ? undefined : 1, fetchMaxWaitMs: 100 });

try {
  if (phase === 'live') await live();
  else if (phase !== 'consume') while (n < total) await Promise.all(Array.from({ length: Math.min(64, total - n) }, () => log.append(Topics.messages, [publish()])));
  if (phase === 'live') {
    // measured in live()
  } else if (phase === 'produce') {
    console.log(`kafka consume: ${total} records appended under KAFKA_BENCH_PREFIX=${prefix}`);
  } else await consumeAll();
} finally {
  await log.close();
}

async function consumeAll(): Promise<void> {
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  let delivered = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const subs = Array.from({ length: consumers }, (_, i) =>
    log.consume({
      topic: Topics.messages,
      consumer: `kcb-${randomBytes(4).toString('hex')}-${i}`,
      from: new Map(),
      handle: async (records) => {
        delivered += records.length;
        if (delivered >= total * consumers) done();
      },
    }),
  );
  await all;
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  await Promise.all(subs.map((s) => s.stop()));
  const f = (x: number): string => x.toFixed(1);
  console.log(
    `kafka consume: ${consumers} consumers × ${total} records: CPU ${f((used.user + used.system) / delivered)} µs/record, ` +
      `main thread busy ${f((busy.active * 1000) / delivered)} µs/record, ${Math.round(wallMs)} ms (group joins included); load ${loadavg()[0].toFixed(2)}`,
  );
}

async function live(): Promise<void> {
  let delivered = 0;
  let decoded = 0;
  const subs = Array.from({ length: consumers }, (_, i) =>
    log.consume({
      topic: Topics.messages,
      consumer: `kcb-${randomBytes(4).toString('hex')}-${i}`,
      from: new Map(),
      handle: async (records) => {
        for (const r of records) if (decodeEvent(r.value).type === 'messages.published') decoded++;
        delivered += records.length;
      },
    }),
  );
  await Promise.all(subs.map((s) => s.caughtUp));
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  while (n < total) await Promise.all(Array.from({ length: Math.min(64, total - n) }, () => log.append(Topics.messages, [publish()])));
  while (delivered < total * consumers) await new Promise((r) => setTimeout(r, 5));
  const wallMs = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  await Promise.all(subs.map((s) => s.stop()));
  if (decoded !== delivered) throw new Error(`decoded ${decoded} of ${delivered}`);
  const f = (x: number): string => x.toFixed(1);
  console.log(
    `kafka live: ${total} appends read by ${consumers} consumers: CPU ${f((used.user + used.system) / total)} µs/append, ` +
      `main thread busy ${f((busy.active * 1000) / total)} µs/append, ${Math.round(wallMs)} ms; load ${loadavg()[0].toFixed(2)}`,
  );
}
