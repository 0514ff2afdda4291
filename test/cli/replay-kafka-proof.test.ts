// An export of a Kafka-mode replay that carries its proof (issue 27, item 3): `replay --with-proof`
// on the local Kafka writes each record's chain headers (writer, seq, prev, link), the scope's
// records in full and the others as digests, and the signed checkpoints of the audit topic;
// `replay --verify-file` checks it with no broker, and reports a line edited, a line removed and a
// checkpoint altered with exit 4. REQUIRE_INFRA=1 with infra/local/start.sh's KAFKA_BROKERS.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { CheckpointSigner } from '../../src/audit/checkpoint.js';
import { packValue, unpackValue } from '../../src/codec/msgpack.js';
import { exportKafkaWithProof } from '../../src/audit/kafka-proof.js';
import type { ScopeRequest } from '../../src/audit/replay-scope.js';
import { partitionFor } from '../../src/log/partitioner.js';
import { ROOT, runToEnd } from '../helpers/spawn-service.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const dir = mkdtempSync(join(tmpdir(), 'cm-kafka-proof-'));
const signer = CheckpointSigner.loadOrCreate(join(dir, 'audit-key.pem'));
const replay = (args: string[], env: Record<string, string> = { KAFKA_BROKERS: '', CLICKHOUSE_URL: '' }) => runToEnd(['--import', 'tsx', join(ROOT, 'src/cli/replay.ts'), ...args], env);

const publish = (appId: string, channel: string, n: number): AppendRecord => ({
  key: `${appId}:${channel}`,
  timestamp: 1_000 + n,
  value: encodeEvent({ type: 'messages.published', appId, channel, transport: 'rest', keyName: `${appId}.k1`, messages: [{ id: `m${n}:0`, timestamp: 1_000 + n, name: 'e', data: `payload ${n}`, clientId: 'ann' }] }),
});

interface Line {
  topic: string;
  partition: number;
  offset: number;
  value?: string;
  digest?: string;
  writer?: string;
  seq?: number;
  checkpoint?: unknown;
}

describeWithInfra('replay --with-proof and --verify-file on Kafka: an export verified without the service', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  afterAll(async () => {
    await Promise.all(logs.map((l) => l.close()));
  });
  const writer = (topicPrefix: string): KafkaLog => {
    const log = new KafkaLog({
      brokers,
      clientId: 'kafka-proof',
      topicPrefix,
      idempotent: !mock,
      replicationFactor: mock ? undefined : 1,
      fetchMaxWaitMs: 100,
      sessionTimeoutMs: 6_000,
      checkpoints: { sign: (heads) => signer.encode(heads), intervalMs: 3_600_000 },
    });
    logs.push(log);
    return log;
  };

  it('a clean export verifies alone; an edited line, an edited value, a removed line and an altered checkpoint are caught (exit 4)', async () => {
    const prefix = `kp-${randomBytes(4).toString('hex')}-`;
    const a = writer(prefix);
    const b = writer(prefix);
    // A channel out of the scope in the scope's partition: its records are in the export as digests.
    const neighbour = Array.from({ length: 50 }, (_, i) => `y${i}`).find((c) => partitionFor(`app1:${c}`, 4) === partitionFor('app1:x', 4))!;
    for (let i = 0; i < 5; i++) {
      await a.append(Topics.messages, [publish('app1', 'x', i), publish('app1', neighbour, i), publish('app2', 'x', i)]);
      await b.append(Topics.messages, [publish('app1', 'x', 100 + i)]);
    }
    await a.checkpoint();
    await b.checkpoint();
    await a.append(Topics.messages, [publish('app1', 'x', 50)]);
    const request: ScopeRequest = { appId: 'app1', channels: { kind: 'channel', name: 'x' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
    let text = '';
    let found = 0;
    for await (const chunk of exportKafkaWithProof(a, request, (p) => (found = p.found))) text += chunk;
    expect(found).toBe(11);
    const lines = text.trim().split('\n');
    const header = JSON.parse(lines[0]).export;
    expect(header).toMatchObject({ version: 1, log: 'kafka', appId: 'app1', publicKeys: [signer.publicKey] });
    const records = lines.slice(1).map((l) => JSON.parse(l) as Line);
    // The scope's records in full with their writer's chain; another app's in the same partition as digests; the checkpoints first.
    expect(records.filter((r) => r.topic === Topics.messages && r.value !== undefined)).toHaveLength(11);
    expect(records.some((r) => r.topic === Topics.messages && r.digest !== undefined && typeof r.writer === 'string')).toBe(true);
    const lastCheckpoint = records.length - 1 - [...records].reverse().findIndex((r) => r.checkpoint !== undefined);
    expect(records.findIndex((r) => r.topic === Topics.messages)).toBeGreaterThan(lastCheckpoint);
    const file = join(dir, 'export.ndjson');
    writeFileSync(file, text);

    const clean = await replay(['--verify-file', file]);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    expect(clean.stderr).toMatch(/^replay: verified .*export\.ndjson: \d+ records, 2 checkpoints \(2 heads matched\)/m);
    expect(clean.stderr).toContain('1 records after the newest checkpoint');
    const trusted = join(dir, 'operator.pub');
    writeFileSync(trusted, signer.publicKeyPem());
    expect((await replay(['--verify-file', file, '--trust-key', trusted])).code).toBe(0);

    const variant = async (name: string, edit: (lines: string[]) => string[]) => {
      const path = join(dir, `${name}.ndjson`);
      writeFileSync(path, `${edit([...lines]).join('\n')}\n`);
      return replay(['--verify-file', path]);
    };
    const at = lines.findIndex((l) => l.includes('"payload 3"') && l.includes('"channel":"x"'));
    const target = JSON.parse(lines[at]) as Line;
    const place = `messages/${target.partition} offset ${target.offset}`;

    // The event as printed changed.
    const edited = await variant('edited', (ls) => ls.map((l, i) => (i === at ? l.replace('"payload 3"', '"payload 3, amended"') : l)));
    expect(edited.code).toBe(4);
    expect(edited.stdout.trim().split('\n')).toEqual([`record changed: ${place}: its event or credential as printed is not what its value holds`]);

    // The value replaced (and its line made to match): the chain headers no longer agree.
    const forgedValue = Buffer.from(publish('app1', 'x', 666).value).toString('base64');
    const valued = await variant('valued', (ls) => ls.map((l, i) => (i === at ? JSON.stringify({ ...JSON.parse(l), value: forgedValue }) : l)));
    expect(valued.code).toBe(4);
    expect(valued.stdout).toContain(`record changed: ${place} (writer ${target.writer} seq ${target.seq}) does not give the link its headers carry`);

    // The line removed.
    const removed = await variant('removed', (ls) => ls.filter((_, i) => i !== at));
    expect(removed.code).toBe(4);
    expect(removed.stdout).toContain(`records missing: messages/${target.partition} offsets ${target.offset} to ${target.offset}`);
    expect(removed.stdout).toContain(`records missing: writer ${target.writer}'s seqs ${target.seq} to ${target.seq} in messages/${target.partition}`);

    // The last line of the export removed: its partition ends before the header says.
    const last = JSON.parse(lines[lines.length - 1]) as Line;
    const cut = await variant('cut', (ls) => ls.slice(0, -1));
    expect(cut.code).toBe(4);
    expect(cut.stdout).toContain(`records missing: the export declares messages/${last.partition} up to offset ${last.offset}, its lines end at offset ${last.offset - 1}`);

    // The first lines of a partition left out, the header's first offset raised to match: as retention
    // would leave it, so it verifies, but the summary says where the partition starts.
    const headCut = await variant('head-cut', (ls) => {
      const ofPartition = ls.map((l, i) => [l, i] as const).filter(([l, i]) => i > 0 && (JSON.parse(l) as Line).topic === Topics.messages && (JSON.parse(l) as Line).partition === target.partition);
      const dropped = new Set(ofPartition.slice(0, 3).map(([, i]) => i));
      const low = (JSON.parse(ofPartition[3][0]) as Line).offset;
      const head = JSON.parse(ls[0]) as { export: { partitions: { topic: string; partition: number; low?: number }[] } };
      for (const p of head.export.partitions) if (p.topic === Topics.messages && p.partition === target.partition) p.low = low;
      return [JSON.stringify(head), ...ls.slice(1).filter((_, i) => !dropped.has(i + 1))];
    });
    expect(headCut.code, headCut.stdout).toBe(0);
    expect(headCut.stderr).toMatch(new RegExp(`partitions read from past offset 0: messages/${target.partition} from offset 3( \\(\\d+ checkpoint heads name records before it, not checked\\))?; the records before are not there`));

    // A checkpoint's head altered in its value: its signature no longer holds.
    const cpAt = lines.findIndex((l) => l.includes('"checkpoint":'));
    const cpLine = JSON.parse(lines[cpAt]) as Line & { value: string };
    const cp = unpackValue(Buffer.from(cpLine.value, 'base64')) as { heads: { seq: number }[] };
    cp.heads[0].seq -= 1;
    const altered = await variant('altered', (ls) => ls.map((l, i) => (i === cpAt ? JSON.stringify({ ...cpLine, value: Buffer.from(packValue(cp)).toString('base64') }) : l)));
    expect(altered.code).toBe(4);
    expect(altered.stdout).toMatch(/^checkpoint altered: the signature of the checkpoint at audit\/\d offset \d+ .* does not match its heads/m);
    // Only its printed form changed: caught too.
    const printed = await variant('printed', (ls) => ls.map((l, i) => (i === cpAt ? JSON.stringify({ ...cpLine, checkpoint: cp }) : l)));
    expect(printed.code).toBe(4);
    expect(printed.stdout).toMatch(/^checkpoint altered: the checkpoint at audit\/\d offset \d+ as printed is not what its value holds$/m);
  }, 90_000);

  it('the command writes the export from Kafka (--with-proof) and it verifies with no broker', async () => {
    // The command reads the service's topics (no prefix): an app of its own there.
    const appId = `kp${randomBytes(4).toString('hex')}`;
    const log = writer('');
    await log.append(Topics.apps, [{ key: appId, timestamp: 1, value: encodeEvent({ type: 'key.revoked', appId, keyName: `${appId}.k0`, modified: 1 }) }]);
    await log.append(Topics.messages, [publish(appId, 'x', 1), publish(appId, 'x', 2)]);
    await log.checkpoint();
    const exported = await replay(['--app', appId, '--channel', 'x', '--with-proof'], { KAFKA_BROKERS: brokers.join(','), CLICKHOUSE_URL: process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123' });
    expect(exported.code, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout.split('\n')[0]).export).toMatchObject({ log: 'kafka', appId });
    expect(exported.stdout.split('\n').filter((l) => l.includes(`"appId":"${appId}"`) && l.includes('"value":'))).toHaveLength(2);
    const file = join(dir, 'command.ndjson');
    writeFileSync(file, exported.stdout);
    const verified = await replay(['--verify-file', file]);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  }, 90_000);
});
