// Records on the service's Kafka topics that it did not write (README: Records that are not the
// service's): another producer's garbage bytes, a MessagePack value cut short, a valid MessagePack
// value of another shape, an event type this version does not know, an empty value, a large one.
// Each is left out by every consumer, logged once with its topic, partition and offset, and
// counted in GET /metrics; the service's own records around it are applied in order, and reads
// waiting for their positions (read-your-writes) answer at once. Before, a projection handed one
// threw, the log handed the batch again for ever: history, presence and stats stalled behind it.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Kafka, Partitioners, type Producer } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithInfra } from '../helpers/infra.js';
import { findProductionInfra, productionConfig, productionTeardown } from '../helpers/production.js';
import { basic } from '../helpers/service.js';
import { startService } from '../../src/service.js';
import { productionAdapters } from '../../src/production-adapters.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { packValue } from '../../src/codec/msgpack.js';
import { channelKey, partitionFor } from '../../src/log/partitioner.js';
import { verifyKafkaLog } from '../../src/audit/kafka-verify.js';
import { replayNdjson } from '../../src/audit/ndjson.js';
import { rebuild, type RebuildProgress } from '../../src/cli/rebuild.js';
import type { ScopeProgress } from '../../src/audit/replay-scope.js';
import { Topics } from '../../src/log/port.js';
import { Actions, RawClient } from '../helpers/raw-realtime.js';

/** A publish of the service's shape whose message's extras are `levels` lists one in the other (made by hand: the encoder recurses). */
function deepPublish(channel: string, levels: number): Buffer {
  const marker = 'DEEP-EXTRAS-MARKER';
  const bytes = Buffer.from(packValue({ type: 'messages.published', appId: 'frapp', channel, transport: 'rest', messages: [{ id: 'deep:0', timestamp: Date.now(), name: 'deep', extras: marker }] }));
  const at = bytes.indexOf(marker) - 1; // its fixstr head
  return Buffer.concat([bytes.subarray(0, at), Buffer.alloc(levels, 0x91), Buffer.from([0xc0]), bytes.subarray(at + 1 + marker.length)]);
}

const infra = await findProductionInfra();
const KEY = 'frapp.k1:foreign-secret-foreign';
const { services, until } = productionTeardown();

describeWithInfra('production mode: records on the topics that are not the service\'s', 'Kafka and ClickHouse', infra, (found) => {
  const tag = randomBytes(3).toString('hex');
  const prefix = `foreign-${tag}-`;
  const lines: Record<string, unknown>[] = [];
  let port = 0;
  let raw: Producer;
  let partitions = 4;

  beforeAll(async () => {
    const { config } = productionConfig(found, [{ appId: 'frapp', keys: [{ key: KEY }] }], { INSTANCE_ID: `foreign-${tag}`, SANDBOX: '1' });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink);
    const service = await startService(config, logger, await productionAdapters(config, logger, { topicPrefix: prefix, tablePrefix: `foreign_${tag}_` }));
    services.push(service);
    await service.app.listen({ port: 0, host: '127.0.0.1' });
    port = (service.app.server.address() as AddressInfo).port;
    partitions = await service.log.partitions(Topics.messages);
    raw = new Kafka({ clientId: 'someone-else', brokers: found.brokers, logLevel: 0 }).producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await raw.connect();
  }, 120_000);
  afterAll(async () => {
    await raw?.disconnect();
  });

  const publish = async (channel: string, name: string): Promise<void> => {
    const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages`, {
      method: 'POST',
      headers: { authorization: basic(KEY), 'content-type': 'application/json' },
      body: JSON.stringify({ name, data: name }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
  };
  const history = async (channel: string): Promise<string[]> => {
    const res = await fetch(`http://127.0.0.1:${port}/channels/${encodeURIComponent(channel)}/messages?direction=forwards`, { headers: { authorization: basic(KEY) } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { name: string }[]).map((m) => m.name);
  };
  const skipped = async (): Promise<Map<string, number>> => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const counts = new Map<string, number>();
    for (const m of text.matchAll(/^cm_log_records_skipped_total\{topic="([^"]+)",reason="([^"]+)"\} (\d+)/gm)) counts.set(`${m[1]} ${m[2]}`, Number(m[3]));
    return counts;
  };

  it('garbage, a cut value, another shape, an unknown type (told of once per type, at warn), an empty and a large value are each left out once, logged and counted; the records around them are applied in order and read at once', async () => {
    const channel = `persisted:foreign-${tag}`;
    const key = channelKey('frapp', channel);
    const partition = partitionFor(key, partitions);
    await publish(channel, 'before');
    const valid = encodeEvent({ type: 'messages.published', appId: 'frapp', channel, transport: 'rest', messages: [{ id: 'x:0', timestamp: Date.now(), name: 'forged' }] });
    const foreign: [string, Buffer | null][] = [
      ['garbage', Buffer.from('\xc1\xc1 these are not MessagePack bytes', 'latin1')],
      ['cut', Buffer.from(valid.subarray(0, Math.floor(valid.length / 2)))],
      ['shape', Buffer.from(packValue({ type: 'messages.published', appId: 'frapp', channel, transport: 'rest', messages: 'none' }))],
      ['list', Buffer.from(packValue([1, 2, 3]))],
      ['unknown', Buffer.from(packValue({ type: 'messages.edited', appId: 'frapp', channel, serial: 1 }))],
      // A newer version's type again (a rolling upgrade): counted, told of once per type.
      ['unknown again', Buffer.from(packValue({ type: 'messages.edited', appId: 'frapp', channel, serial: 2 }))],
      ['empty', null],
      ['large', Buffer.concat([Buffer.from([0xc1]), randomBytes(256 * 1024)])],
      // Of the shape, its extras lists nested 15,000 deep: writing it again (a history row, a
      // delivery, a replay line) ran out of stack; more than the consumers take (RECORD_MAX_DEPTH).
      ['deep', deepPublish(channel, 15_000)],
    ];
    const sent = await raw.send({ topic: `${prefix}messages`, acks: -1, messages: foreign.map(([, value]) => ({ key, value, partition })) });
    const first = Number(sent[0].baseOffset);
    // Events of the service's shape written by another: a key naming another app, a channel name
    // far over the limits, a malformed chain header. Applied as what they say (README): no stall.
    const long = 'x'.repeat(20_000);
    const odd = (channelName: string) => Buffer.from(encodeEvent({ type: 'messages.published', appId: 'frapp', channel: channelName, transport: 'rest', messages: [{ id: `odd-${channelName.length}:0`, timestamp: Date.now(), name: 'odd' }] }));
    await raw.send({
      topic: `${prefix}messages`,
      acks: -1,
      messages: [
        { key: 'otherapp:elsewhere', value: odd(long), partition },
        { key, value: odd(channel), partition, headers: { 'cm-chain': Buffer.from([1, 2, 3]) } },
      ],
    });
    // Other topics too: each of their projections reads them.
    for (const topic of ['presence', 'usage', 'apps', 'connections']) {
      await raw.send({ topic: `${prefix}${topic}`, acks: -1, messages: [{ key: 'frapp', value: Buffer.from('not an event'), partition: 0 }] });
    }
    // Apps whose keys or namespaces are not ones: applied, the apps projection threw on them for ever
    // (a start never ended), or every publish of the app did (its persistence is read from them).
    const app = { appId: 'forged', accountId: 'x', keys: [{ keyName: 'forged.k', keySecret: 's', capability: '{"*":["*"]}' }], namespaces: [], source: 'sandbox' };
    for (const forged of [{ ...app, keys: [null] }, { ...app, namespaces: undefined }, { ...app, namespaces: [null] }]) {
      await raw.send({ topic: `${prefix}apps`, acks: -1, messages: [{ key: 'forged', value: Buffer.from(packValue({ type: 'app.created', app: forged })), partition: 0 }] });
    }
    await publish(channel, 'after');
    // Read-your-writes: the publish after the foreign records is in history as soon as it was acknowledged.
    expect(await history(channel)).toEqual(['before', 'odd', 'after']);

    await until('every foreign record counted', async () => [...(await skipped()).values()].reduce((a, b) => a + b, 0) === foreign.length + 7);
    const counts = await skipped();
    expect(Object.fromEntries(counts)).toEqual({
      'messages undecodable': 4, // garbage, cut, empty, large
      'messages shape': 3, // shape, list, deep
      'messages unknown-type': 2,
      'presence undecodable': 1,
      'usage undecodable': 1,
      'apps undecodable': 1,
      'apps shape': 3,
      'connections undecodable': 1,
    });
    // One line per record, however many consumers read it, naming where it lies.
    const told = lines.filter((l) => l.topic === `${prefix}messages` && typeof l.reason === 'string');
    // An unknown type once per type, at warn (a newer version's, during a rolling upgrade); the rest at error.
    expect(told.map((l) => [l.partition, l.offset, l.reason, l.level]).sort((a, b) => (a[1] as number) - (b[1] as number))).toEqual(
      foreign.flatMap(([what], i) =>
        what === 'unknown again' ? [] : [[partition, first + i, what === 'shape' || what === 'list' || what === 'deep' ? 'shape' : what === 'unknown' ? 'unknown-type' : 'undecodable', what === 'unknown' ? 40 : 50]],
      ),
    );
    // Every consumer is past them (none stalled: no lag, none retrying a batch).
    const service = services[0];
    await until('no consumer behind', () => [...service.runner.lag().values()].every((lag) => lag === 0));
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).not.toMatch(/^cm_consumer_batch_failures_total\{/m);
    // And the channel goes on.
    await publish(channel, 'later');
    expect(await history(channel)).toEqual(['before', 'odd', 'after', 'later']);
  }, 120_000);

  it('a resume whose backlog (read from the log) holds a foreign record keyed like the channel gets the channel\'s messages, the foreign one left out', async () => {
    const channel = `foreign-rt-${tag}`;
    const key = channelKey('frapp', channel);
    const probe = await RawClient.connect(port, { key: KEY });
    const serial = String((await probe.attach(channel)).channelSerial);
    probe.close();
    // A subscriber that stays: once it has the last message, delivery is past them all, and the resume reads them from the log.
    const watcher = await RawClient.connect(port, { key: KEY });
    await watcher.attach(channel);
    const watched = watcher.next((pm) => pm.action === Actions.MESSAGE && pm.channel === channel && (pm.messages as { data: unknown }[]).some((m) => m.data === 'missed-2'));
    await publish(channel, 'missed-1');
    await raw.send({ topic: `${prefix}messages`, acks: -1, messages: [{ key, value: Buffer.from('\xc1 not an event', 'latin1'), partition: partitionFor(key, partitions) }] });
    await publish(channel, 'missed-2');
    await watched;
    watcher.close();
    const resumer = await RawClient.connect(port, { key: KEY });
    const got = resumer.next((pm) => pm.action === Actions.MESSAGE && pm.channel === channel && (pm.messages as { data: unknown }[]).some((m) => m.data === 'missed-2'));
    const reply = await resumer.attach(channel, { channelSerial: serial, flags: 32 /* RESUME */ });
    expect(reply.action, JSON.stringify(reply)).toBe(Actions.ATTACHED);
    expect(reply.error, JSON.stringify(reply)).toBeUndefined();
    expect(Number(reply.flags) & 4, 'RESUMED').toBe(4);
    await got;
    const data = resumer.frames.filter((pm) => pm.action === Actions.MESSAGE && pm.channel === channel).flatMap((pm) => (pm.messages as { data: unknown }[]).map((m) => m.data));
    expect(data).toEqual(['missed-1', 'missed-2']);
    resumer.close();
  }, 60_000);

  it('replay leaves the foreign records of the scope out, counted, and gives the service\'s own', async () => {
    const service = services[0];
    let progress: ScopeProgress | undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of replayNdjson(service.log, { appId: 'frapp', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER }, (p) => (progress = { ...p }))) chunks.push(Buffer.from(chunk));
    const names = Buffer.concat(chunks).toString('utf8').trim().split('\n').map((l) => (JSON.parse(l) as { event: { channel: string; messages: { name: string }[] } }).event).filter((e) => e.channel === `persisted:foreign-${tag}`).map((e) => e.messages[0].name);
    expect(names).toEqual(['before', 'odd', 'after', 'later']);
    // The nine of the first test and the resume's one, all keyed like a channel of the app.
    expect(progress?.foreign).toBe(10);
  }, 60_000);

  it('a rebuild of history and of stats from the log goes past them, the foreign ones left out (and counted by history\'s)', async () => {
    const { config } = productionConfig(found, [{ appId: 'frapp', keys: [{ key: KEY }] }], { INSTANCE_ID: `foreign-rebuild-${tag}` });
    const logger = pino({ level: 'silent' });
    const beside = await productionAdapters(config, logger, { topicPrefix: prefix, tablePrefix: `foreign_${tag}_rebuilt_`, consumerPrefix: 'rebuild-', readOnlyLog: true });
    try {
      let last: RebuildProgress | undefined;
      await rebuild('history', { config, adapters: beside }, (p) => (last = p));
      expect(last?.foreign).toBe(10);
      expect(await rebuild('stats', { config, adapters: beside })).toBeGreaterThan(0);
    } finally {
      await beside.statsStore.close();
      await beside.log.close();
      await beside.close?.();
    }
  }, 120_000);

  it('replay --verify still names each foreign record as not appended by the service', async () => {
    const service = services[0];
    const verifier = await verifyKafkaLog(service.log as unknown as Parameters<typeof verifyKafkaLog>[0], { appId: 'frapp', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER }, new Set());
    const notChained = verifier.problems.filter((p) => p.startsWith('record not chained: messages/'));
    expect(notChained.length).toBe(11);
    // The one with a malformed chain header is named as such.
    expect(verifier.problems.filter((p) => /^record changed: messages\/\d+ offset \d+ carries chain headers that are not well formed/.test(p)).length).toBe(1);
  }, 60_000);
});
