// Issue 10, fault tier: kill -9 of an instance in production mode mid-stream (the embedded mode's
// version is test/e2e/durability-kill9.test.ts). Every publish answered 201 before the SIGKILL is
// in history after a restart, once; the restarted instance resumes its projections from their
// ClickHouse checkpoints, so rows written after the last checkpoint are replayed (stored again, read
// once: LIMIT 1 BY serial) and stats count every message once (FINAL). History reads do not wait for
// the killed instance's partitions to reach a writer again: the reader's tail answers meanwhile.
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { basic } from '../helpers/service.js';
import { PRIVATE_INFRA_NEEDS, startPrivateInfra } from './private-infra.js';
import { faultApp, startServiceProcess, unhandled, type ServiceProcess } from './service-process.js';
import { PublishLoad, historyWithAcked, reckon, report, sleep, until } from './publish-load.js';
import { readHistory } from '../helpers/server-process.js';

const WORKERS = 4;
// History older than this comes from ClickHouse alone, so the final read proves what it holds.
const TAIL_MS = 1_000;


const infra = await startPrivateInfra();

describeWithInfra('fault tier: kill -9 of a production instance mid-stream', 'Kafka and ClickHouse', infra, (found) => {
  it('every publish answered 201 before SIGKILL is in history once after a restart, and counted once in stats', { timeout: 90_000 }, async () => {
    const app = faultApp('kill9prod');
    // The killed instance's writers keep their partitions until the group's session times out
    // (10 s here): meanwhile what they had not written comes from the new instance's in-memory
    // tail, which keeps what the store does not hold however old, and stats answer from the store.
    const env = { HISTORY_TAIL_MS: String(TAIL_MS), KAFKA_SESSION_TIMEOUT_MS: '10000' };
    const services: ServiceProcess[] = [];
    try {
      const first = await startServiceProcess(found, app, env);
      services.push(first);
      const startedAt = Date.now();
      const load = new PublishLoad({ port: first.port, key: app.key, channel: app.channel }, { workers: WORKERS, answerTimeoutMs: 10_000 }).start();
      // Mid-stream: projections have written to ClickHouse, and publishes are in flight.
      await until('publishes acknowledged and in history', async () => load.acked.size >= 2_000 && (await readHistory({ ...first, ...app })).length > 0, 30_000);
      const stopped = load.stop(); // no publish starts after the kill; those in flight get their answer or none
      process.kill(first.child.pid!, 'SIGKILL');
      const ackedAtKill = load.acked.size;
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
      await stopped;
      const beforeKill = load.outcomes.filter((o) => o.status !== 201 && o.status !== 0);
      // Answers read after the kill were sent before it; the rest got no answer.
      const unanswered = load.outcomes.filter((o) => o.status === 0).length;

      const second = await startServiceProcess(found, app, env);
      services.push(second);
      const target = { port: second.port, key: app.key, channel: app.channel };
      await sleep(TAIL_MS + 500);
      const history = await historyWithAcked(load, target);
      const r = reckon(load, history);

      let inbound = 0;
      await until(
        'stats to count every message',
        async () => {
          const res = await fetch(`http://127.0.0.1:${second.port}/stats?unit=minute&start=${startedAt - 60_000}`, {
            headers: { authorization: basic(app.key), 'x-ably-version': '6' },
          });
          if (res.status !== 200) return false;
          const entries = (await res.json()) as { entries: Record<string, number> }[];
          inbound = entries.reduce((sum, e) => sum + (e.entries['messages.inbound.rest.messages.count'] ?? 0), 0);
          return inbound >= r.found;
        },
        30_000,
      ).catch(() => undefined);
      const stored = (await (
        await fetch(found.clickhouseUrl, {
          method: 'POST',
          body: `SELECT count() AS rows, uniqExact(serial) AS serials FROM history_messages WHERE app_id = '${app.appId}' FORMAT JSONEachRow`,
        })
      ).json()) as { rows: string; serials: string };

      report(
        'kill -9 of a production instance mid-stream, then a restart',
        r,
        `${ackedAtKill} acknowledged when the signal was sent, ${unanswered} sent without an answer; ` +
          `history_messages holds ${stored.rows} rows for ${stored.serials} serials; stats count ${inbound} messages`,
      );

      expect(beforeKill.slice(0, 5)).toEqual([]);
      expect(r.acknowledged).toBeGreaterThan(0);
      expect(r.lost).toEqual([]);
      expect(r.doubled).toEqual([]);
      expect(r.phantom).toEqual([]);
      expect(inbound).toBe(r.found);
      // Per publisher, order is kept and nothing is skipped before the last acknowledged message.
      for (let w = 0; w < WORKERS; w++) {
        const seqs = history.filter((d) => d.startsWith(`${w}:`)).map((d) => Number(d.split(':')[1]));
        expect(seqs).toEqual(seqs.map((_, i) => i));
      }
      expect(second.running(), second.output.join('')).toBe(true);
      expect(unhandled(second.output)).toEqual([]);
    } finally {
      for (const s of services) await s.stop();
    }
  });
}, PRIVATE_INFRA_NEEDS);
