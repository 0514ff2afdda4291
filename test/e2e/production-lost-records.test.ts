// Records the log deleted before this instance's consumers applied them (README: Records the log
// deleted before they were applied): Kafka's retention deleting what a lagging consumer had yet to
// read. librdkafka's mock broker keeps ~5 MiB of a partition and deletes the oldest records past
// that, read or not: one publish of 8 MiB empties its partition at once, before any consumer reads
// it. Before, kafkajs started again at the log's start, where nothing followed, so no batch came:
// the history projection's position stayed before the lost records for good, every history read
// of the instance answered 504 (read-your-writes waited for them), /ready said the consumers were
// behind, and a stop waited its whole drain for the shared writers. Now the consumers go on from
// the log's start, what was lost counts as applied, and the loss is logged (once per partition and
// range) and counted (cm_log_records_lost_total). A Kafka cluster refuses an 8 MiB record
// (message.max.bytes) and deletes only by retention's schedule: the file runs on the mock broker.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown, statsWritersFormed } from '../helpers/production.js';
import { basic } from '../helpers/service.js';
import { startService, type Service } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';
import { Topics } from '../../src/log/port.js';

const infra = await findProductionInfra();
const KEY = 'lostapp.k1:lost-secret-lost-secret';
const MiB = 1024 * 1024;
const { services, until } = productionTeardown();

// A Kafka cluster (not the mock) found: nothing here deletes records.
const onCluster = infra !== undefined && !infra.mock;
if (onCluster) describe('records the log deleted before the consumers applied them', () => it.skip('needs librdkafka\'s mock broker (infra/local), which keeps ~5 MiB of a partition'));

if (!onCluster) describeWithInfra('production mode: records the log deleted before the consumers applied them (the mock broker\'s 5 MiB a partition)', 'Kafka and ClickHouse', infra, (found) => {
  const tag = randomBytes(3).toString('hex');
  /** An instance of the app, its topics and tables (the same at every start), its log lines in `lines`. */
  const start = async (lines: Record<string, unknown>[]): Promise<{ service: Service; port: number }> => {
    const { config } = productionConfig(found, [{ appId: 'lostapp', keys: [{ key: KEY }] }], {
      INSTANCE_ID: `lost-${tag}`,
      MAX_MESSAGE_SIZE: String(2 * MiB),
      MAX_PUBLISH_BYTES: String(9 * MiB),
      MAX_BODY_BYTES: String(10 * MiB),
    });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink);
    const service: Service = await startService(config, logger, await productionAdapters(config, logger, { topicPrefix: `lost-${tag}-`, tablePrefix: `lost_${tag}_` }));
    services.push(service);
    await service.app.listen({ port: 0, host: '127.0.0.1' });
    return { service, port: (service.app.server.address() as AddressInfo).port };
  };
  const lostTotal = async (port: number): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/^cm_log_records_lost_total\{topic="messages"\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  /** Messages published (REST) in the app's stats of the last hour; undefined: GET /stats did not answer 200. */
  const statsCount = async (port: number): Promise<number | undefined> => {
    const res = await fetch(`http://127.0.0.1:${port}/stats?unit=minute&direction=forwards&limit=100&start=${Date.now() - 3_600_000}`, { headers: { authorization: basic(KEY), 'x-ably-version': '6' } });
    if (res.status !== 200) return undefined;
    const records = (await res.json()) as { entries?: Record<string, number> }[];
    return records.reduce((n, r) => n + (r.entries?.['messages.inbound.rest.messages.count'] ?? 0), 0);
  };
  const toldOfLoss = (lines: Record<string, unknown>[]): Record<string, unknown>[] => lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('log records were deleted'));
  /** What the first instance's stats counted, once they had what followed the loss. */
  let countedBefore: number | undefined;

  it('the consumers go on from the log\'s start: history answers, /ready passes, the loss is logged once and counted, and a stop does not wait for it', async () => {
    const lines: Record<string, unknown>[] = [];
    const { service, port } = await start(lines);
    const channel = `persisted:lost-${tag}`;
    const partition = partitionFor(channelKey('lostapp', channel), await service.log.partitions(Topics.messages));
    const url = `http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`;
    const auth = { authorization: basic(KEY) };
    const publish = async (body: unknown): Promise<void> => {
      const res = await fetch(url, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).toBe(201);
    };
    const history = async (): Promise<{ status: number; names: string[] }> => {
      const res = await fetch(`${url}?direction=forwards`, { headers: auth });
      const body = (await res.json()) as { name?: string }[] | { error: unknown };
      return { status: res.status, names: Array.isArray(body) ? body.map((m) => m.name ?? '') : [] };
    };

    await publish({ name: 'before', data: 'b' });
    expect(await history()).toEqual({ status: 200, names: ['before'] });
    // The stats writers have applied and written it (GET /stats waits for the instance's own
    // writes): its sample is open (a minute), holding a record from before the loss.
    expect(await statsCount(port)).toBe(1);
    // 8 MiB in one record: the mock keeps none of the partition's records after it (nor, as it
    // counts, the next small one).
    await publish(Array.from({ length: 8 }, () => ({ name: 'large', data: 'x'.repeat(MiB) })));
    const ends = await service.log.endOffsets(Topics.messages);
    expect((await service.log.lowOffsets!(Topics.messages)).get(partition)).toBe(ends.get(partition));

    // The instance acknowledged a write the log no longer holds: its reads answer, without it.
    expect(await history()).toEqual({ status: 200, names: ['before'] });
    // And the consumers go on from the log's start: what is published after is read.
    for (const name of ['after-1', 'after-2', 'after-3']) await publish({ name, data: name });
    const after = await history();
    expect(after.status).toBe(200);
    expect(after.names[0]).toBe('before');
    expect(after.names.at(-1)).toBe('after-3');
    expect(after.names.every((name) => ['before', 'after-1', 'after-2', 'after-3'].includes(name))).toBe(true);
    const end = (await service.log.endOffsets(Topics.messages)).get(partition)!;

    // Counted once however many consumers met it (the readers, the writers, realtime delivery), and logged once per range.
    await until('the loss counted', async () => (await lostTotal(port)) >= 1);
    await until('/ready passes', async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200);
    await until('every consumer at the log\'s end', () => [...service.runner.lag().values()].every((lag) => lag === 0));
    const told = toldOfLoss(lines);
    expect(told.length).toBeGreaterThan(0);
    for (const l of told) expect(l).toMatchObject({ level: 50, topic: `lost-${tag}-messages`, partition, records: expect.any(Number), from: expect.any(Number), to: expect.any(Number) });
    const counted = told.reduce((n, l) => n + (l.records as number), 0);
    expect(await lostTotal(port)).toBe(counted);
    // Ranges told of do not overlap: each record once.
    const ranges = told.map((l) => [l.from as number, l.to as number]).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < ranges.length; i++) expect(ranges[i][0]).toBeGreaterThanOrEqual(ranges[i - 1][1]);
    // The large record at least (and 'before' too where the shared writers, whose group joins some
    // 3 s after the start, had not applied it yet), and never what followed the loss.
    expect(ranges.some(([from, to]) => from <= ends.get(partition)! - 1 && to >= ends.get(partition)!)).toBe(true);
    expect(ranges.at(-1)![1]).toBeLessThan(end);

    // The stats writers went on too (GET /stats waits for the instance's own writes): 'before' and
    // what followed the loss are counted ('after-1' where the mock kept it).
    countedBefore = await statsCount(port);
    expect([3, 4]).toContain(countedBefore);

    // The shared writers do not wait for what never comes: the stop's drain ends with the log's end reached.
    services.splice(services.indexOf(service), 1);
    await service.close();
    expect(lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('stop: gave up waiting for the shared writers'))).toEqual([]);
  }, 120_000);

  // The stores' checkpoints (history, presence history, stats) moved past the loss: a start after it
  // reads nothing from before the log's start, so it does not meet the loss again. Before, the stats
  // writers' checkpoints stayed where the sample open at the loss began ('before'): every start read
  // from there and logged and counted the loss again.
  it('a start after the loss neither logs nor counts it again, and the stats answer as before it, and go on', async () => {
    expect(countedBefore).toBeDefined();
    const lines: Record<string, unknown>[] = [];
    const { service, port } = await start(lines);
    await until('/ready passes', async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200, 60_000);
    // The writers hold the partitions again, each from its checkpoint in the store.
    await statsWritersFormed([service]);
    await until('every consumer at the log\'s end', () => [...service.runner.lag().values()].every((lag) => lag === 0), 60_000);
    // Nothing read from before the log's start: the loss is not met again.
    expect(toldOfLoss(lines)).toEqual([]);
    expect(await lostTotal(port)).toBe(0);
    // The rows written before the stop stand (none replaced by a sample rebuilt without 'before').
    expect(await statsCount(port)).toBe(countedBefore);
    const url = `http://127.0.0.1:${port}/channels/${encodeURIComponent(`persisted:lost-${tag}`)}/messages`;
    const res = await fetch(url, { method: 'POST', headers: { authorization: basic(KEY), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'restarted', data: 'r' }) });
    expect(res.status).toBe(201);
    // GET /stats waits for the rows the writer of its partition writes: it read past the loss's place.
    expect(await statsCount(port)).toBe(countedBefore! + 1);
    expect(toldOfLoss(lines)).toEqual([]);
    services.splice(services.indexOf(service), 1);
    await service.close();
  }, 120_000);
});
