// Webhook delivery against the publish rate, in the same run: N messages published over REST
// (real HTTP, 50 a request, 20 channels at once) while a batch rule posts them to a receiver in
// this process. Prints messages/s published (first publish to the last acknowledged) beside
// messages/s delivered (first publish to the last message at the receiver), and the requests.
//   npx tsx test/bench/webhooks-bench.ts                                       embedded
//   source /work/infra-<name>.env && TEST_SERVICE_MODE=production npx tsx test/bench/webhooks-bench.ts
// WEBHOOK_BENCH_MESSAGES (default 20000); the service's WEBHOOK_BATCH_SIZE (default 100).
import { startTestService, listening, testServiceMode } from '../helpers/service.js';
import { startReceiver, until } from '../helpers/webhook-receiver.js';

const total = Number(process.env.WEBHOOK_BENCH_MESSAGES ?? 20_000);
const CHANNELS = 20;
const PER_PUBLISH = 50;

async function main(): Promise<void> {
  const ts = await startTestService({ WEBHOOKS_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_BATCH_SIZE: process.env.WEBHOOK_BATCH_SIZE ?? '100' });
  const receiver = await startReceiver();
  try {
    const port = await listening(ts);
    const appId = ts.key.slice(0, ts.key.indexOf('.'));
    const rule = { ruleType: 'http', requestMode: 'batch', source: { type: 'channel.message', channelFilter: '^wb-' }, target: { url: receiver.url, enveloped: true, format: 'json' } };
    const added = await fetch(`http://127.0.0.1:${port}/apps/${appId}/rules`, { method: 'POST', headers: { authorization: ts.auth, 'content-type': 'application/json' }, body: JSON.stringify(rule) });
    if (added.status !== 201) throw new Error(`rule not added: ${added.status} ${await added.text()}`);
    const delivered = (): number => receiver.items.reduce((n, i) => n + (i.data.messages?.length ?? 0), 0);
    // Timed once the rule delivers (on Kafka, once its consumer group has formed): one message first.
    await fetch(`http://127.0.0.1:${port}/channels/wb-warm/messages`, { method: 'POST', headers: { authorization: ts.auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'm', data: 'warm' }) });
    await until('the warm-up message', () => delivered() >= 1, 120_000);
    receiver.items.length = 0;
    receiver.requests = 0;
    const perChannel = Math.ceil(total / CHANNELS);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CHANNELS }, async (_, c) => {
        for (let i = 0; i < perChannel; i += PER_PUBLISH) {
          const body = JSON.stringify(Array.from({ length: Math.min(PER_PUBLISH, perChannel - i) }, (_, j) => ({ name: 'm', data: `wb-${c}#${i + j}` })));
          const res = await fetch(`http://127.0.0.1:${port}/channels/wb-${c}/messages`, { method: 'POST', headers: { authorization: ts.auth, 'content-type': 'application/json' }, body });
          if (res.status !== 201) throw new Error(`publish answered ${res.status}`);
        }
      }),
    );
    const published = performance.now() - started;
    await until('every message delivered', () => delivered() >= perChannel * CHANNELS, 600_000);
    const all = performance.now() - started;
    const n = perChannel * CHANNELS;
    console.log(`webhooks (${testServiceMode}), ${n} messages, ${CHANNELS} channels, ${PER_PUBLISH} a publish, batch rule`);
    console.log(`| publish (REST) | ${Math.round(n / (published / 1000))} msg/s | ${(published / 1000).toFixed(2)} s |`);
    console.log(`| webhook delivered | ${Math.round(n / (all / 1000))} msg/s | ${(all / 1000).toFixed(2)} s | ${receiver.items.length} items in ${receiver.requests} requests |`);
    console.log(`| delivery / publish | ${(published / all).toFixed(2)} |`);
  } finally {
    await receiver.stop();
    await ts.close();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
