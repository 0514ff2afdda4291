// Issue 10, fault tier: ClickHouse stopped and restarted under publish load. Publishes need only
// Kafka, so they keep being acknowledged while ClickHouse is down; projections keep their rows and
// retry, and once ClickHouse is back they catch up: every acknowledged message of a persisted
// channel is in ClickHouse's history exactly once (reads use LIMIT 1 BY serial), and stats (read
// with FINAL) count each once. clickhouse-server is killed (SIGKILL, no shutdown) and started
// again on its own data by infra/local/clickhouse.sh.
import { expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { basic } from '../helpers/service.js';
import { PRIVATE_INFRA_NEEDS, startPrivateInfra } from './private-infra.js';
import { faultApp, startServiceProcess, unhandled } from './service-process.js';
import { PublishLoad, historyWithAcked, reckon, report, sleep, until } from './publish-load.js';
import { readHistory } from '../helpers/server-process.js';

const OUTAGE_MS = 5_000;
// History older than this comes from ClickHouse alone, so the final read proves what it holds.
const TAIL_MS = 1_000;


const infra = await startPrivateInfra();

describeWithInfra('fault tier: ClickHouse stopped and restarted under publish load', 'Kafka and ClickHouse', infra, (found) => {
  it('keeps accepting publishes while ClickHouse is down, then catches up: every acknowledged message in history once, counted once in stats', { timeout: 90_000 }, async () => {
    const app = faultApp('chout');
    // A small bound on the rows held for ClickHouse, so that the outage reaches it: the projection
    // then stops consuming until ClickHouse is back, and must still catch up with everything.
    const service = await startServiceProcess(found, app, { HISTORY_TAIL_MS: String(TAIL_MS), MAX_UNSTORED_ROWS: '1000' });
    try {
      const target = { port: service.port, key: app.key, channel: app.channel };
      const startedAt = Date.now();
      const load = new PublishLoad(target, { workers: 4, answerTimeoutMs: 10_000 }).start();
      await until('publishes acknowledged and in history before the outage', async () => load.acked.size >= 200 && (await readHistory(target)).length > 0, 30_000);

      await found.clickhouseStop(true);
      const downAt = Date.now();
      await sleep(OUTAGE_MS / 2);
      const readWhileDown = await fetch(`http://127.0.0.1:${service.port}/channels/${encodeURIComponent(app.channel)}/messages?limit=10`, {
        headers: { authorization: basic(app.key) },
      });
      const readWhileDownBody = (await readWhileDown.json()) as { error?: { code: number } };
      // A bad stats request is refused for what it is (400), not after waiting on this instance's
      // writes the stats projection cannot store now (504).
      const badStatsWhileDown = await fetch(`http://127.0.0.1:${service.port}/stats?unit=fortnight`, { headers: { authorization: basic(app.key) } });
      const badStatsWhileDownBody = (await badStatsWhileDown.json()) as { error?: { code: number } };
      await sleep(OUTAGE_MS / 2);
      const metricsWhileDown = await (await fetch(`http://127.0.0.1:${service.port}/metrics`)).text();
      const metric = (name: string, projection: string): number =>
        Number(new RegExp(`^${name}\\{projection="${projection}"\\} (\\d+)`, 'm').exec(metricsWhileDown)?.[1] ?? -1);
      const ackedBeforeRestart = load.acked.size;
      await found.clickhouseStart();
      const upAt = Date.now();
      await sleep(1_000);
      await load.stop();
      const during = load.sentBetween(downAt, upAt);

      // Past the in-memory window, history of the channel is what ClickHouse holds.
      await sleep(TAIL_MS + 500);
      let history: string[] = [];
      await until(
        'every acknowledged message in ClickHouse',
        async () => {
          history = await readHistory(target).catch(() => []);
          const inHistory = new Set(history);
          return [...load.acked].every((d) => inHistory.has(d));
        },
        30_000,
      ).catch(() => undefined); // what is missing is reported below
      const r = reckon(load, history);

      // Stats: each message counted once (published to a persisted channel: inbound and persisted).
      let inbound = 0;
      let persisted = 0;
      await until(
        'stats to count every message',
        async () => {
          const res = await fetch(`http://127.0.0.1:${service.port}/stats?unit=minute&start=${startedAt - 60_000}`, {
            headers: { authorization: basic(app.key), 'x-ably-version': '6' },
          });
          if (res.status !== 200) return false;
          const entries = (await res.json()) as { entries: Record<string, number> }[];
          const total = (name: string): number => entries.reduce((sum, e) => sum + (e.entries[name] ?? 0), 0);
          inbound = total('messages.inbound.rest.messages.count');
          // persisted = stored + read back (the test's history reads, counted as outbound too).
          persisted = total('messages.persisted.messages.count') - total('messages.outbound.rest.messages.count');
          return inbound >= r.found && persisted >= r.found;
        },
        30_000,
      ).catch(() => undefined);

      // Rows as stored: a write retried after ClickHouse came back may have stored some twice.
      const stored = (await (
        await fetch(found.clickhouseUrl, {
          method: 'POST',
          body: `SELECT count() AS rows, uniqExact(serial) AS serials FROM history_messages WHERE app_id = '${app.appId}' FORMAT JSONEachRow`,
        })
      ).json()) as { rows: string; serials: string };

      const refusals = service.output.join('').split('rows behind; the batch waits').length - 1;

      report(
        `ClickHouse killed for ${upAt - downAt} ms under load`,
        r,
        `${during.length} publishes sent during the outage, ${during.filter((o) => o.status === 201).length} acknowledged ` +
          `(${ackedBeforeRestart} acknowledged before the restart in all); ` +
          `the history projection refused ${refusals} batches to wait for ClickHouse; history_messages holds ${stored.rows} rows for ${stored.serials} serials; stats count ${inbound} inbound, ${persisted} stored as persisted`,
      );

      expect(service.running(), service.output.join('')).toBe(true);
      expect(unhandled(service.output)).toEqual([]);
      // Reading persisted history needs ClickHouse: while it is down, a 503 to retry, not a 500.
      expect({ status: readWhileDown.status, code: readWhileDownBody.error?.code }).toEqual({ status: 503, code: 50005 });
      expect({ status: badStatsWhileDown.status, code: badStatsWhileDownBody.error?.code }).toEqual({ status: 400, code: 40003 });
      // What an operator sees meanwhile (GET /metrics): the failed writes, and the rows held for ClickHouse.
      expect(metric('cm_store_write_failures_total', 'history')).toBeGreaterThan(0);
      expect(metric('cm_store_unstored_rows', 'history')).toBeGreaterThan(0);
      // Publishes need only Kafka.
      expect(load.outcomes.filter((o) => o.status !== 201).slice(0, 5)).toEqual([]);
      expect(during.length).toBeGreaterThan(0);
      expect(r.lost).toEqual([]);
      expect(r.doubled).toEqual([]);
      expect(r.phantom).toEqual([]);
      // Every message in the log counted once: no publish failed, so the log holds exactly those found.
      expect(inbound).toBe(r.found);
      expect(persisted).toBe(r.found);
    } finally {
      await service.stop();
    }
  });
}, PRIVATE_INFRA_NEEDS);
