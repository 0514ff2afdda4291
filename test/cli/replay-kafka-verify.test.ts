// Tamper evidence on Kafka (issue 27, items 3 and 4): every record the KafkaLog appends carries its
// place in its writer's hash chain in its headers, and checkpoints signed with AUDIT_KEY_FILE's key
// on the `audit` topic name each writer's heads. Kafka cannot edit a record in place, so tampering is
// what an intruder with produce rights can do: forged, duplicated, re-ordered or unchained records,
// a writer's sequence with a record left out (a deletion, as a verifier sees it), a checkpoint
// altered or signed by another key. Each is caught with its message by `replay --verify`'s check
// (verifyKafkaLog) against the local Kafka; a clean log with two writers interleaved verifies.
import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, Partitioners, type IHeaders, type Producer } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { partitionFor } from '../../src/log/partitioner.js';
import { CHAIN_HEADER, CHAIN_HEADERS_V0, chainDigest, encodeChainHeader, genesisLink, type ChainHeaders } from '../../src/log/kafka/kafka-chain.js';
import { nextLink } from '../../src/log/embedded/chain.mjs';
import { CheckpointSigner, decodeCheckpoint } from '../../src/audit/checkpoint.js';
import { packValue } from '../../src/codec/msgpack.js';
import { verifyKafkaLog } from '../../src/audit/kafka-verify.js';
import type { ScopeRequest } from '../../src/audit/replay-scope.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const keyDir = mkdtempSync(join(tmpdir(), 'cm-kafka-audit-'));
const signer = CheckpointSigner.loadOrCreate(join(keyDir, 'audit-key.pem'));
const rotated = CheckpointSigner.loadOrCreate(join(keyDir, 'rotated-key.pem'));
const stranger = CheckpointSigner.loadOrCreate(join(keyDir, 'stranger-key.pem'));
const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };

/** Both formats of a record's chain headers: one cm-chain header (written today), four of earlier versions (read still). */
type Format = 'one header' | 'four headers';
const headersOf = ({ writer, seq, prev, link }: ChainHeaders, format: Format = 'one header'): IHeaders =>
  format === 'one header'
    ? { [CHAIN_HEADER]: encodeChainHeader(Buffer.from(writer), seq, prev, link) }
    : { [CHAIN_HEADERS_V0.writer]: writer, [CHAIN_HEADERS_V0.seq]: String(seq), [CHAIN_HEADERS_V0.prev]: prev, [CHAIN_HEADERS_V0.link]: link };

const publish = (channel: string, n: number): AppendRecord => ({
  key: `app1:${channel}`,
  timestamp: 1_000 + n,
  value: encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${n}:0`, timestamp: 1_000 + n, name: 'e', data: `n${n}` }] }),
});

describeWithInfra('tamper evidence on the Kafka log (replay --verify)', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  let raw: Producer;
  beforeAll(async () => {
    raw = new Kafka({ clientId: 'intruder', brokers, logLevel: 0 }).producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: true });
    await raw.connect();
  });
  afterAll(async () => {
    await Promise.all(logs.map((l) => l.close()));
    await raw.disconnect();
  });

  /** A writer (a service instance's log) in topics of the test's own, signing with `key`. */
  const writer = (prefix: string, key = signer): KafkaLog => {
    const log = new KafkaLog({
      brokers,
      clientId: 'audit-kafka',
      topicPrefix: prefix,
      idempotent: !mock,
      replicationFactor: mock ? undefined : 1,
      fetchMaxWaitMs: 100,
      sessionTimeoutMs: 6_000,
      // Checkpoints are asked for by the test (checkpoint()), never on a timer here.
      checkpoints: { sign: (heads) => key.encode(heads), intervalMs: 3_600_000 },
    });
    logs.push(log);
    return log;
  };
  const prefix = (): string => `kv-${randomBytes(4).toString('hex')}-`;
  const verify = (log: KafkaLog, trusted: CheckpointSigner[] = [signer]) => verifyKafkaLog(log, request, new Set(trusted.map((s) => s.publicKey)));
  const problemsOf = async (log: KafkaLog, trusted?: CheckpointSigner[]) => (await verify(log, trusted)).problems;

  /** Produces records as a forged writer would, headers as given, into `key`'s partition. */
  const forge = async (p: string, topic: string, records: { record: AppendRecord; headers?: IHeaders }[]): Promise<void> => {
    await raw.send({
      topic: p + topic,
      acks: -1,
      messages: records.map(({ record, headers }) => ({ key: record.key, value: Buffer.from(record.value), timestamp: String(record.timestamp), partition: partitionFor(record.key, 4), headers })),
    });
  };
  /** The chain headers a forger that knows the scheme gives records[0..n) as seqs 0..n of writer `writerId`. */
  const chainOf = (writerId: string, topic: string, records: AppendRecord[], format?: Format): IHeaders[] => {
    let link = genesisLink(writerId, topic, partitionFor(records[0].key, 4));
    return records.map((record, seq) => {
      const prev = link;
      link = nextLink(prev, chainDigest(seq, record));
      return headersOf({ writer: writerId, seq, prev, link }, format);
    });
  };

  it('a clean log of two writers interleaved in the same partitions verifies, records after the last checkpoint reported as chained but not signed', async () => {
    const p = prefix();
    const a = writer(p);
    const b = writer(p);
    for (let i = 0; i < 6; i++) {
      await a.append(Topics.messages, [publish('x', i), publish('y', i)]);
      await b.append(Topics.messages, [publish('x', 100 + i), publish('y', 100 + i)]);
    }
    await a.checkpoint();
    await b.checkpoint();
    await a.append(Topics.messages, [publish('x', 50)]);
    const v = await verify(a);
    expect(v.problems).toEqual([]);
    expect(v.records).toBeGreaterThanOrEqual(25);
    expect(v.writerCount()).toBe(2);
    expect(v.headsMatched).toBeGreaterThanOrEqual(2);
    expect(v.unsigned()).toBe(1);
    expect(v.summary()).toContain('1 records after the newest checkpoint');
    // The checkpoint names each writer's head: its id, its sequence and the link.
    const [checkpoint] = (await a.readChained(Topics.audit, partitionFor('checkpoint', 4), 0, 10)).map((r) => decodeCheckpoint(r.value)!);
    expect(checkpoint.heads.every((h) => typeof h.writer === 'string' && typeof h.seq === 'number' && h.link.length === 64)).toBe(true);
    // The records of the request's own scope are counted (replay --verify --channel of a channel with none exits 3).
    expect(v.inScope).toBe(25);
    const trusted = new Set([signer.publicKey]);
    expect((await verifyKafkaLog(a, { ...request, channels: { kind: 'channel', name: 'x' } }, trusted)).inScope).toBe(13);
    expect((await verifyKafkaLog(a, { ...request, channels: { kind: 'channel', name: 'no-such-channel' } }, trusted)).inScope).toBe(0);
  }, 60_000);

  it('records forged under a writer id of their own pass the chain checks, but are named apart: of a writer no signed checkpoint names at all', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1), publish('x', 2)]);
    await a.checkpoint();
    // Anyone with produce rights who knows the scheme can chain records of their own, from seq 0.
    const forged = [publish('x', 666)];
    await forge(p, 'messages', forged.map((record, i) => ({ record, headers: chainOf('w0000deadbeef', 'messages', forged)[i] })));
    await a.append(Topics.messages, [publish('x', 3)]);
    await a.checkpoint(); // signed records after the forged one: it is not at the end
    const v = await verify(a);
    expect(v.problems).toEqual([]);
    const partition = partitionFor('app1:x', 4);
    expect(v.unsignedTails()).toEqual([{ chain: `messages/${partition}/w0000deadbeef`, count: 1, from: 0, to: 0, unit: 'seqs', neverSigned: true }]);
    expect(v.summary()).toContain('1 records after the newest checkpoint of their partition (chained, not signed yet: verify again after the next checkpoint); 1 of them of writers no signed checkpoint names at all');
  }, 60_000);

  it('a forged record (a legitimate record\'s headers, another value) is caught as changed', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1), publish('x', 2)]);
    await a.checkpoint();
    const [, second] = await a.readChained(Topics.messages, partitionFor('app1:x', 4), 0, 10);
    const chain = second.chain as { writer: string; seq: number; prev: Buffer; link: Buffer };
    await forge(p, 'messages', [{ record: publish('x', 666), headers: headersOf(chain) }]);
    const problems = await problemsOf(a);
    expect(problems.some((m) => m.startsWith(`record changed: messages/${second.partition} offset 2 (writer ${chain.writer} seq 1) does not give the link its headers carry`)), problems.join('\n')).toBe(true);
  }, 60_000);

  it('a record copied again (duplicated) and a record with no chain headers among chained ones are caught', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1), publish('x', 2)]);
    await a.checkpoint();
    const [, second] = await a.readChained(Topics.messages, partitionFor('app1:x', 4), 0, 10);
    const chain = second.chain as { writer: string; seq: number; prev: Buffer; link: Buffer };
    await forge(p, 'messages', [
      { record: second, headers: headersOf(chain) },
      { record: publish('x', 3) },
    ]);
    const problems = await problemsOf(a);
    expect(problems).toEqual([
      `record duplicated: messages/${second.partition} offset 2 repeats writer ${chain.writer} seq 1 of offset 1 (a forged copy, or a produce retried without an idempotent producer)`,
      `record not chained: messages/${second.partition} offset 3 carries no chain headers, after records that do (it was not appended by the service)`,
    ]);
  }, 60_000);

  it.each(['one header', 'four headers'] as const)('a record left out of a writer\'s sequence (a deletion) and records re-ordered are caught, chains in %s', async (format) => {
    const p = prefix();
    const records = [0, 1, 2, 3].map((n) => publish('x', n));
    // seq 2 never produced: 0, 1, 3; then another writer's 0, 2, 1.
    const gap = chainOf('w00000000a9a0', 'messages', records, format);
    await forge(p, 'messages', [0, 1, 3].map((seq) => ({ record: records[seq], headers: gap[seq] })));
    const swapped = chainOf('w00000000b5b0', 'messages', records, format);
    await forge(p, 'messages', [0, 2, 1].map((seq) => ({ record: records[seq], headers: swapped[seq] })));
    const problems = await problemsOf(writer(p));
    const partition = partitionFor('app1:x', 4);
    expect(problems).toEqual([
      `records missing: writer w00000000a9a0's seqs 2 to 2 in messages/${partition} (between offsets 1 and 2)`,
      `records missing: writer w00000000b5b0's seqs 1 to 1 in messages/${partition} (between offsets 3 and 4)`,
      `records out of order: messages/${partition} offset 5 is writer w00000000b5b0 seq 1, after its seq 2 at offset 4 (re-ordered or forged)`,
    ]);
  }, 60_000);

  it('a log written with four chain headers per record (earlier versions) verifies, its checkpoint matched; a record changed in it is caught', async () => {
    const p = prefix();
    const records = [0, 1, 2, 3].map((n) => publish('x', n));
    const partition = partitionFor('app1:x', 4);
    const headers = chainOf('w000000000000', 'messages', records, 'four headers');
    await forge(p, 'messages', records.map((record, seq) => ({ record, headers: headers[seq] })));
    // Its writer's checkpoint of seq 3, itself chained in the audit topic as that writer wrote it.
    const head = headers[3][CHAIN_HEADERS_V0.link] as Buffer;
    const checkpoint = { key: 'checkpoint', timestamp: Date.now(), value: signer.encode([{ topic: 'messages', partition, offset: 3, link: head, writer: 'w000000000000', seq: 3 }]) };
    await forge(p, 'audit', [{ record: checkpoint, headers: chainOf('w000000000000', 'audit', [checkpoint], 'four headers')[0] }]);
    const a = writer(p);
    const v = await verify(a);
    expect(v.problems).toEqual([]);
    expect(v.records).toBe(5); // the four and the checkpoint
    expect(v.headsMatched).toBe(1);
    expect(v.unsigned()).toBe(0);
    // Read back as the service reads it: the same chain either way.
    const read = await a.readChained(Topics.messages, partition, 0, 10);
    expect(read.map((r) => r.chain !== undefined && r.chain !== 'malformed' && [r.chain.writer, r.chain.seq, r.chain.link.equals(headers[r.offset][CHAIN_HEADERS_V0.link] as Buffer)])).toEqual([0, 1, 2, 3].map((seq) => ['w000000000000', seq, true]));
    // seq 3's headers on another value.
    await forge(p, 'messages', [{ record: publish('x', 666), headers: headers[3] }]);
    const problems = await problemsOf(a);
    expect(problems.some((m) => m.startsWith(`record changed: messages/${partition} offset 4 (writer w000000000000 seq 3) does not give the link its headers carry`)), problems.join('\n')).toBe(true);
  }, 60_000);

  it('chain headers not well formed (a cm-chain cut short, too long, of an unknown format, not naming a writer id, or beside the four headers; a seq not in decimal) are caught as changed records', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1)]);
    const [first] = await a.readChained(Topics.messages, partitionFor('app1:x', 4), 0, 10);
    const chain = first.chain as ChainHeaders;
    const one = headersOf(chain)[CHAIN_HEADER] as Buffer;
    const unknownFormat = Buffer.from(one);
    unknownFormat[0] = 2;
    const notAWriterId = Buffer.from(one);
    notAWriterId[notAWriterId.length - 1] = 0xff;
    await forge(p, 'messages', [
      { record: publish('x', 2), headers: { [CHAIN_HEADER]: one.subarray(0, 60) } },
      { record: publish('x', 3), headers: { [CHAIN_HEADER]: unknownFormat } },
      { record: publish('x', 4), headers: { ...headersOf(chain), ...headersOf(chain, 'four headers') } },
      { record: publish('x', 5), headers: { [CHAIN_HEADER]: notAWriterId } },
      { record: publish('x', 6), headers: { [CHAIN_HEADER]: Buffer.concat([one, Buffer.alloc(1_000, 0x61)]) } },
      { record: publish('x', 7), headers: { ...headersOf(chain, 'four headers'), [CHAIN_HEADERS_V0.seq]: '0x0' } },
    ]);
    const problems = await problemsOf(a);
    expect(problems).toEqual([1, 2, 3, 4, 5, 6].map((offset) => `record changed: messages/${first.partition} offset ${offset} carries chain headers that are not well formed`));
  }, 60_000);

  it('records missing at the end of a writer\'s chain (past what a checkpoint signed) are caught', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1), publish('x', 2)]);
    const [, second] = await a.readChained(Topics.messages, partitionFor('app1:x', 4), 0, 10);
    const chain = second.chain as { writer: string; seq: number; link: Buffer };
    // A checkpoint of the service's key that names seq 5 of the writer, which the partition does not hold.
    await forge(p, 'audit', [{ record: { key: 'checkpoint', timestamp: Date.now(), value: signer.encode([{ topic: 'messages', partition: second.partition, offset: 5, link: chain.link, writer: chain.writer, seq: 5 }]) } }]);
    const problems = await problemsOf(a);
    expect(problems.some((m) => m.startsWith('records missing: the checkpoint at audit/') && m.includes(`names writer ${chain.writer} seq 5 in messages/${second.partition}, but its chain there ends at seq 1 (offset 1)`)), problems.join('\n')).toBe(true);
  }, 60_000);

  it('a checkpoint altered, or whose heads the records do not give, is caught', async () => {
    const p = prefix();
    const a = writer(p);
    await a.append(Topics.messages, [publish('x', 1), publish('x', 2)]);
    await a.checkpoint();
    const checkpoints = await a.readChained(Topics.audit, partitionFor('checkpoint', 4), 0, 10);
    const cp = decodeCheckpoint(checkpoints[0].value)!;
    // Its head's link changed, the signature kept.
    const altered = { ...cp, heads: cp.heads.map((h) => ({ ...h, link: 'ab'.repeat(32) })) };
    // A checkpoint signed right, by the service's key, of a link the records do not give (links rewritten).
    const head = cp.heads[0];
    const mismatched = signer.encode([{ ...head, link: Buffer.alloc(32, 7) }]);
    await forge(p, 'audit', [
      { record: { key: 'checkpoint', timestamp: Date.now(), value: packValue(altered) } },
      { record: { key: 'checkpoint', timestamp: Date.now(), value: mismatched } },
    ]);
    const problems = await problemsOf(a);
    expect(problems.filter((m) => /^checkpoint altered: the signature of the checkpoint at audit\/\d offset 1 .* does not match its heads$/.test(m))).toHaveLength(1);
    expect(problems.filter((m) => m.startsWith('checkpoint does not match: the checkpoint at audit/') && m.includes(`gives writer ${head.writer} seq 1`) && m.includes('the link 0707070707070707…'))).toHaveLength(1);
    // And the forged records in the audit topic carry no chain: caught too.
    expect(problems.some((m) => m.startsWith('record not chained: audit/'))).toBe(true);
  }, 60_000);

  it('a key rotated: the retired key\'s checkpoints verify when it is trusted beside the new one; an unknown key\'s never do', async () => {
    const p = prefix();
    const before = writer(p, signer);
    await before.append(Topics.messages, [publish('x', 1)]);
    await before.close();
    // The service restarted with a new AUDIT_KEY_FILE: a new writer, its checkpoints signed by the new key.
    const after = writer(p, rotated);
    await after.append(Topics.messages, [publish('x', 2)]);
    await after.checkpoint();
    const onlyNew = await problemsOf(after, [rotated]);
    expect(onlyNew).toHaveLength(1);
    expect(onlyNew[0]).toMatch(/^checkpoint signed by an untrusted key: .* is signed by key [0-9a-f:]+, not a trusted one \([0-9a-f:]+\); add the instance's public key or fingerprint to the keyring \(--keyring, --trust-key\), or the retired key of a rotation$/);
    const both = await verify(after, [signer, rotated]);
    expect(both.problems).toEqual([]);
    expect(both.headsMatched).toBe(2);
    expect(both.writerCount()).toBe(2);
    // A checkpoint of a key nobody trusts is reported, whatever it says.
    await forge(p, 'audit', [{ record: { key: 'checkpoint', timestamp: Date.now(), value: stranger.encode([]) } }]);
    const withStranger = await problemsOf(after, [signer, rotated]);
    expect(withStranger.some((m) => m.startsWith('checkpoint signed by an untrusted key:'))).toBe(true);
  }, 60_000);
});
