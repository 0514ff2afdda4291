// Several production instances on one Kafka, each signing its checkpoints with a key of its own
// (issue 27; README: Replay for audits, "Several instances, several keys"): --verify takes a
// keyring (a directory of PEM public keys, or a file of fingerprints), and a key rotated with
// AUDIT_PREVIOUS_KEY_FILE is followed from the retired key. The instances' logs sign through the
// service's own wiring (src/audit/checkpointing.ts: AUDIT_KEY_FILE, the endorsement, the witness).
import { mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { KafkaLog } from '../../src/log/kafka/kafka-log.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';
import { encodeEvent } from '../../src/log/event-codec.js';
import { parseConfig } from '../../src/config.js';
import { checkpointing } from '../../src/audit/checkpointing.js';
import { CheckpointSigner, decodeCheckpoint, fingerprintOf } from '../../src/audit/checkpoint.js';
import { loadKeyring } from '../../src/audit/keyring.js';
import { verifyKafkaLog } from '../../src/audit/kafka-verify.js';
import { partitionFor } from '../../src/log/partitioner.js';
import type { ScopeRequest } from '../../src/audit/replay-scope.js';
import type { WriterHead } from '../../src/log/kafka/kafka-chain.js';
import { describeWithInfra, findKafka } from '../helpers/infra.js';

const kafka = await findKafka();
const request: ScopeRequest = { appId: 'app1', channels: { kind: 'all' }, include: new Set(['messages']), from: 0, to: Number.MAX_SAFE_INTEGER };
const publish = (channel: string, n: number): AppendRecord => ({
  key: `app1:${channel}`,
  timestamp: 1_000 + n,
  value: encodeEvent({ type: 'messages.published', appId: 'app1', channel, transport: 'rest', keyName: 'app1.k1', messages: [{ id: `m${n}:0`, timestamp: 1_000 + n, name: 'e', data: `n${n}` }] }),
});

describeWithInfra('several instances, several keys, on the Kafka log (replay --verify --keyring)', 'Kafka', kafka, ({ brokers, mock }) => {
  const logs: KafkaLog[] = [];
  afterAll(async () => {
    await Promise.all(logs.map((l) => l.close()));
  });
  const base = mkdtempSync(join(tmpdir(), 'cm-kafka-keyring-'));
  const prefix = `kk-${randomBytes(4).toString('hex')}-`;

  /** A service instance's log: its own directory and AUDIT_KEY_FILE (made at first start), checkpoints when the test asks and at close. */
  const instance = (name: string, env: Record<string, string> = {}): KafkaLog => {
    const dir = join(base, name);
    mkdirSync(dir, { recursive: true });
    const config = parseConfig({ DATA_DIR: dir, AUDIT_KEY_FILE: join(dir, 'audit-key.pem'), AUDIT_CHECKPOINT_INTERVAL_MS: '3600000', ...env });
    const log = new KafkaLog({
      brokers,
      clientId: `keyring-${name}`,
      topicPrefix: prefix,
      idempotent: !mock,
      replicationFactor: mock ? undefined : 1,
      fetchMaxWaitMs: 100,
      sessionTimeoutMs: 6_000,
      checkpoints: checkpointing<WriterHead>(config),
    });
    logs.push(log);
    return log;
  };
  const publicKeyOf = (name: string): CheckpointSigner => CheckpointSigner.load(join(base, name, 'audit-key.pem'));
  /** The replay's reader: no checkpoints of its own. */
  const reader = (): KafkaLog => {
    const log = new KafkaLog({ brokers, clientId: 'keyring-replay', topicPrefix: prefix, idempotent: false });
    logs.push(log);
    return log;
  };

  it('two instances interleaved: a keyring directory with both public keys verifies; one key alone refuses the other\'s checkpoints; fingerprints do as keys', async () => {
    const a = instance('a');
    const b = instance('b');
    for (let i = 0; i < 5; i++) {
      await a.append(Topics.messages, [publish('x', i), publish('y', i)]);
      await b.append(Topics.messages, [publish('x', 100 + i), publish('y', 100 + i)]);
    }
    await a.checkpoint();
    await b.close(); // b stops (a graceful stop's checkpoint); a goes on
    await a.append(Topics.messages, [publish('x', 50)]);
    await a.checkpoint();
    const ring = join(base, 'ring');
    mkdirSync(ring);
    writeFileSync(join(ring, 'a.pem'), publicKeyOf('a').publicKeyPem());
    writeFileSync(join(ring, 'b.pub'), publicKeyOf('b').publicKeyPem());
    const log = reader();
    const both = await verifyKafkaLog(log, request, loadKeyring(ring));
    expect(both.problems).toEqual([]);
    expect(both.writerCount()).toBe(2);
    expect(both.headsMatched).toBeGreaterThanOrEqual(4);
    expect(both.unsigned()).toBe(0);

    const onlyA = join(base, 'only-a.pem');
    writeFileSync(onlyA, publicKeyOf('a').publicKeyPem());
    const refused = await verifyKafkaLog(log, request, loadKeyring(onlyA));
    expect(refused.problems.length).toBeGreaterThan(0);
    expect(refused.problems.every((m) => m.startsWith(`checkpoint signed by an untrusted key: `) && m.includes(`is signed by key ${publicKeyOf('b').fingerprint}, not a trusted one (${publicKeyOf('a').fingerprint})`)), refused.problems.join('\n')).toBe(true);

    const fingerprints = join(base, 'fingerprints.txt');
    writeFileSync(fingerprints, `# the operators' published fingerprints\nfingerprint ${publicKeyOf('a').fingerprint}\n${publicKeyOf('b').fingerprint}\n`);
    const byFingerprint = await verifyKafkaLog(log, request, loadKeyring(fingerprints));
    expect(byFingerprint.problems).toEqual([]);
  }, 120_000);

  it('an instance\'s key rotated (AUDIT_PREVIOUS_KEY_FILE): the keyring of the keys before verifies the new key\'s checkpoints through the endorsement, and its first checkpoint carries the heads it signed before', async () => {
    const bDir = join(base, 'b');
    const retiredFingerprint = publicKeyOf('b').fingerprint;
    mkdirSync(join(bDir, 'retired'));
    renameSync(join(bDir, 'audit-key.pem'), join(bDir, 'retired', 'audit-key.pem'));
    const b2 = instance('b', { AUDIT_PREVIOUS_KEY_FILE: join(bDir, 'retired', 'audit-key.pem') });
    await b2.append(Topics.messages, [publish('x', 200)]);
    await b2.checkpoint();
    await b2.close();
    const newFingerprint = publicKeyOf('b').fingerprint;
    expect(newFingerprint).not.toBe(retiredFingerprint);

    // The keyring as it was before the rotation: a's key and b's retired one.
    const ring = join(base, 'ring');
    const log = reader();
    const v = await verifyKafkaLog(log, request, loadKeyring(ring));
    expect(v.problems).toEqual([]);
    expect([...v.rotations].map(([key, by]) => [fingerprintOf(key), fingerprintOf(by)])).toEqual([[newFingerprint, retiredFingerprint]]);
    expect(v.summary()).toContain(`key ${newFingerprint} trusted as the successor of ${retiredFingerprint}`);
    expect(v.writerCount()).toBe(3);

    // b's first checkpoint after its restart names, as `previous`, the heads its run before signed last.
    const audit = await log.readChained(Topics.audit, partitionFor('checkpoint', await log.partitions(Topics.audit)), 0, 1000);
    const first = audit.map((r) => decodeCheckpoint(r.value)!).find((cp) => fingerprintOf(cp.publicKey) === newFingerprint)!;
    expect(first.endorsement && fingerprintOf(first.endorsement.publicKey)).toBe(retiredFingerprint);
    expect(first.previous?.length).toBeGreaterThan(0);
    expect(first.previous!.every((h) => h.writer !== undefined && !first.heads.some((n) => n.writer === h.writer))).toBe(true);

    // Without the retired key (only the new one) the checkpoints before the rotation are refused.
    const newOnly = join(base, 'new-only.txt');
    writeFileSync(newOnly, `${newFingerprint}\n${publicKeyOf('a').fingerprint}\n`);
    const refused = await verifyKafkaLog(log, request, loadKeyring(newOnly));
    expect(refused.problems.some((m) => m.includes(`is signed by key ${retiredFingerprint}, not a trusted one`))).toBe(true);
  }, 120_000);
});
