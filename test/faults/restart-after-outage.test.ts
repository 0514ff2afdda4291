// Issue 22, item 6: "runs with a ClickHouse or Kafka outage kept 0 to 526 of 2-4 thousand" messages
// of a channel without persistence after a production restart. Its two minutes of history live in
// memory (ARCHITECTURE, Retention) and must be rebuilt from Kafka at every start, whatever happened
// before it: here ClickHouse is killed and brought back, then the instance restarts gracefully;
// then Kafka goes down and up, and the instance restarts again. After each restart every message
// acknowledged on the plain channel (all within the window) is in its history, once, as on the
// persisted one.
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { PRIVATE_INFRA_NEEDS, startPrivateInfra } from './private-infra.js';
import { faultApp, startServiceProcess, unhandled, type ServiceProcess } from './service-process.js';
import { PublishLoad, reckon, report, sleep, until } from './publish-load.js';
import { readHistory, type Target } from '../helpers/server-process.js';

const infra = await startPrivateInfra();

describeWithInfra('fault tier: a production restart after a ClickHouse outage, and after a Kafka outage', 'Kafka and ClickHouse', infra, (found) => {
  it('the restarted instance serves the whole window of a channel without persistence, and of a persisted one', { timeout: 240_000 }, async () => {
    const app = faultApp('rsout');
    const env = { LOG_APPEND_TIMEOUT_MS: '2000' };
    let service: ServiceProcess = await startServiceProcess(found, app, env);
    const outputs: string[][] = [service.output];
    const targets = (): Target[] => [
      { port: service.port, key: app.key, channel: 'plain-rsout' },
      { port: service.port, key: app.key, channel: app.channel },
    ];
    const loads: PublishLoad[] = [];
    const runLoad = async (ms: number, during?: () => Promise<void>): Promise<void> => {
      const prefix = `l${loads.length}-`;
      const batch = targets().map((t) => new PublishLoad(t, { workers: 2, answerTimeoutMs: 10_000, pauseMs: 10, prefix }).start());
      loads.push(...batch);
      await sleep(ms / 2);
      await during?.();
      await sleep(ms / 2);
      await Promise.all(batch.map((l) => l.stop()));
    };
    const restart = async (): Promise<number> => {
      await service.stop();
      const startedAt = Date.now();
      service = await startServiceProcess(found, app, env);
      outputs.push(service.output);
      return Date.now() - startedAt;
    };
    /** Each channel's history once it holds every message acknowledged to it, or as it is after 30 s. */
    const reckonAll = async (label: string): Promise<{ channel: string; lost: number; doubled: number; acked: number }[]> => {
      const results = [];
      for (const target of targets()) {
        const mine = loads.filter((l) => l.target.channel === target.channel);
        const acked = new Set(mine.flatMap((l) => [...l.acked]));
        let history: string[] = [];
        await until(
          `every acknowledged message in ${target.channel}`,
          async () => {
            history = await readHistory(target).catch(() => []);
            const inHistory = new Set(history);
            return [...acked].every((d) => inHistory.has(d));
          },
          30_000,
          500,
        ).catch(() => undefined);
        // One reckoning over every load of the channel (each load's data carries its own prefix).
        const found = new Set(history);
        const lost = [...acked].filter((d) => !found.has(d));
        const doubled = history.length - found.size;
        results.push({ channel: target.channel, lost: lost.length, doubled, acked: acked.size });
        const merged = { acked: new Set(acked), sent: new Set(mine.flatMap((l) => [...l.sent])) } as unknown as PublishLoad;
        report(`${label}: ${target.channel}`, reckon(merged, history));
      }
      return results;
    };
    try {
      await runLoad(4_000);
      await runLoad(6_000, async () => {
        await found.clickhouseStop(true);
        await sleep(2_000);
        await found.clickhouseStart();
      });
      const afterClickHouse = await restart();
      const first = await reckonAll(`restart ${afterClickHouse} ms after a ClickHouse outage`);

      await runLoad(6_000, async () => {
        await found.kafkaDown();
        await sleep(2_000);
        await found.kafkaUp();
      });
      const afterKafka = await restart();
      const second = await reckonAll(`restart ${afterKafka} ms after a Kafka outage`);

      expect(first.filter((r) => r.lost > 0 || r.doubled > 0)).toEqual([]);
      expect(second.filter((r) => r.lost > 0 || r.doubled > 0)).toEqual([]);
      expect(first.every((r) => r.acked > 100)).toBe(true);
      expect(service.running()).toBe(true);
      expect(outputs.flatMap((o) => unhandled(o))).toEqual([]);
    } finally {
      await service.stop();
    }
  });
}, PRIVATE_INFRA_NEEDS);
