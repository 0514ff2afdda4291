import { Kafka, logLevel } from 'kafkajs';
import { readFileSync } from 'node:fs';
const pid = Number(process.env.INFRA_KAFKA_PID);
const cpu = () => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) * 10; }; // ms
const kafka = new Kafka({ brokers: process.env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING, clientId: 'bc' });
const topic = 'messages';
const producer = kafka.producer({ allowAutoTopicCreation: false });
await producer.connect();
const value = Buffer.alloc(300, 120);
for (const k of [1, 10, 50, 200]) {
  const reqs = k === 1 ? 4000 : Math.round(40000 / k);
  const c0 = cpu(); const t0 = Date.now();
  for (let i = 0; i < reqs; i++) await producer.send({ topic, acks: -1, messages: Array.from({ length: k }, (_, j) => ({ key: `app:ch-${j % 100}`, value })) });
  const c1 = cpu();
  console.log(`produce k=${k}: ${reqs} requests, broker ${(c1 - c0)} ms CPU: ${((c1 - c0) * 1000 / reqs).toFixed(1)} µs/request, ${((c1 - c0) * 1000 / reqs / k).toFixed(2)} µs/record, ${Date.now() - t0} ms`);
}
// fetches: a consumer reading the topic from the beginning
const consumer = kafka.consumer({ groupId: `bc-${Date.now()}`, maxWaitTimeInMs: 100 });
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
let n = 0, batches = 0; const c0 = cpu(); const t0 = Date.now();
await new Promise<void>((resolve) => { consumer.run({ eachBatch: async ({ batch }) => { n += batch.messages.length; batches++; if (Date.now() - t0 > 8000) resolve(); } }); setTimeout(resolve, 8000); });
const c1 = cpu();
console.log(`fetch: ${n} records in ${batches} batches, broker ${c1 - c0} ms CPU: ${((c1 - c0) * 1000 / batches).toFixed(1)} µs/batch, ${((c1 - c0) * 1000 / n).toFixed(2)} µs/record`);
await consumer.disconnect(); await producer.disconnect();
