// A graceful stop while Kafka cannot be reached: the process still exits, within
// SHUTDOWN_TIMEOUT_MS (its consumers cannot leave their groups, and the wait for them is bounded),
// with no unhandled rejection, saying in its log what it waited for; and nothing it acknowledged
// before is lost: once Kafka is back, a new start answers history with every acknowledged message.
// Publishes still in flight when Kafka went down are answered (201 or 503), never left hanging.
// Kafka here is librdkafka's mock broker, taken down and up in place (it keeps its data).
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { PRIVATE_INFRA_NEEDS, startPrivateInfra } from './private-infra.js';
import { faultApp, startServiceProcess, unhandled } from './service-process.js';
import { PublishLoad, historyWithAcked, reckon, report, until } from './publish-load.js';

const SHUTDOWN_TIMEOUT_MS = 8_000;
const APPEND_TIMEOUT_MS = 2_000;
// The process exits by its own deadline at the latest; the margin is for the signal's delivery and
// the process's exit on a loaded machine, not for the service.
const EXIT_MARGIN_MS = 10_000;

const infra = await startPrivateInfra();

describeWithInfra(
  'fault tier: a graceful stop while Kafka is down',
  'Kafka and ClickHouse',
  infra,
  (found) => {
    it('exits within SHUTDOWN_TIMEOUT_MS with nothing unhandled, and a new start after Kafka is back has every acknowledged message', { timeout: 150_000 }, async () => {
      const app = faultApp('stopdown');
      const env = { LOG_APPEND_TIMEOUT_MS: String(APPEND_TIMEOUT_MS), SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), LOG_LEVEL: 'info' };
      const target = { port: 0, key: app.key, channel: app.channel };
      const first = await startServiceProcess(found, app, env);
      let load: PublishLoad | undefined;
      try {
        target.port = first.port;
        load = new PublishLoad(target, { workers: 4, answerTimeoutMs: 2 * APPEND_TIMEOUT_MS + SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS }).start();
        await until('100 publishes acknowledged', () => load!.acked.size >= 100, 30_000, 50);
        await found.kafkaDown();

        const stopAt = Date.now();
        first.child.kill('SIGTERM');
        const exited = await first.exited;
        const stopMs = Date.now() - stopAt;
        await load.stop();
        const output = first.output.join('');
        const lines = output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; kafkajs?: string; level: number });

        expect(unhandled(first.output)).toEqual([]);
        expect(stopMs, output.slice(-4000)).toBeLessThan(SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS);
        // Exit 0 when the stop finished in its time, 1 when the deadline ended it: either way it
        // said so, and it did not die of a signal or a crash.
        expect(exited.signal, output.slice(-4000)).toBeNull();
        expect([0, 1]).toContain(exited.code);
        expect(lines.some((l) => l.msg === 'shutting down')).toBe(true);
        expect(lines.some((l) => l.msg === 'shut down' || l.msg === 'shutdown did not finish within SHUTDOWN_TIMEOUT_MS; exiting'), output.slice(-4000)).toBe(true);
        // Every publish was answered: acknowledged, or refused in the spec's format (503, or the
        // connection closed by the stop), none left without an answer until the client gave up.
        const hung = load.outcomes.filter((o) => o.status === 0 && /aborted|timeout/i.test(o.error ?? ''));
        expect(hung.slice(0, 5)).toEqual([]);
        expect(load.outcomes.filter((o) => o.status !== 0 && o.status !== 201 && o.status !== 503).slice(0, 5)).toEqual([]);
        // With Kafka gone nothing can catch up: the projections stopped meanwhile say so.
        const afterStop = lines.slice(lines.findIndex((l) => l.msg === 'shutting down'));
        expect(afterStop.filter((l) => l.msg === 'projection caught up with the log')).toEqual([]);
        // kafkajs's retries against the broker that is gone (some 50 a second) are logged once a
        // second each way, not each one (src/log/kafka/kafka-logger.ts).
        const kafkajsErrors = lines.filter((l) => l.kafkajs && l.level >= 50);
        expect(kafkajsErrors.length, kafkajsErrors.slice(0, 20).map((l) => l.msg).join('\n')).toBeLessThanOrEqual(Math.ceil(stopMs / 1000) + 2);
        console.log(`[faults] stop with Kafka down: exited ${exited.code} after ${stopMs} ms (SHUTDOWN_TIMEOUT_MS ${SHUTDOWN_TIMEOUT_MS}), ${kafkajsErrors.length} kafkajs error lines`);
      } finally {
        await load?.stop();
        await first.stop();
        await found.kafkaUp();
      }

      // Kafka is back: a new start reads the log and has everything the first acknowledged.
      const second = await startServiceProcess(found, app, env);
      try {
        target.port = second.port;
        const history = await historyWithAcked(load!, target, 60_000);
        const r = reckon(load!, history);
        report(`a graceful stop while Kafka was down (SHUTDOWN_TIMEOUT_MS ${SHUTDOWN_TIMEOUT_MS})`, r);
        expect(r.lost).toEqual([]);
        expect(r.doubled).toEqual([]);
        expect(r.phantom).toEqual([]);
        expect(unhandled(second.output)).toEqual([]);
      } finally {
        await second.stop();
      }
    });
  },
  PRIVATE_INFRA_NEEDS,
);
