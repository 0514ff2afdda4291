// The heads a Kafka writer signs (src/log/kafka/kafka-chain.ts ProducerChains): a produce request
// that fails ends its partitions' chains and the writer goes on under a new id; the ended chain's
// last acknowledged head must still be signed by the next checkpoint, beside the new chain's, or its
// last records stay unsigned for good (a graceful stop signs everything, README: On Kafka).
import { describe, expect, it } from 'vitest';
import { ProducerChains } from '../../src/log/kafka/kafka-chain.js';
import { Topics, type AppendRecord } from '../../src/log/port.js';

const record = (n: number): AppendRecord => ({ key: 'app1:x', timestamp: 1_000 + n, value: new Uint8Array([n]) });

describe('ProducerChains: the heads to sign', () => {
  it('a chain ended by a failed request keeps its acknowledged head until a checkpoint signs it, beside the new writer\'s', () => {
    const chains = new ProducerChains();
    const before = chains.writerId;
    const first = chains.headersFor(Topics.messages, [{ record: record(1), partition: 0 }, { record: record(2), partition: 0 }]);
    chains.acknowledged(Topics.messages, first.heads, new Map([[0, 1]]));
    chains.headersFor(Topics.messages, [{ record: record(3), partition: 0 }]);
    chains.failed(Topics.messages, [0]); // that request failed: a new writer id from now on
    const after = chains.writerId;
    expect(after).not.toBe(before);
    const third = chains.headersFor(Topics.messages, [{ record: record(4), partition: 0 }]);
    chains.acknowledged(Topics.messages, third.heads, new Map([[0, 3]]));

    const heads = chains.headsToSign(Topics.audit);
    expect(heads.map((h) => [h.writer, h.seq, h.offset]).sort()).toEqual([
      [after, 0, 3],
      [before, 1, 1],
    ].sort());
    chains.markSigned(heads);
    expect(chains.headsToSign(Topics.audit)).toEqual([]);

    const fourth = chains.headersFor(Topics.messages, [{ record: record(5), partition: 0 }]);
    chains.acknowledged(Topics.messages, fourth.heads, new Map([[0, 4]]));
    expect(chains.headsToSign(Topics.audit).map((h) => [h.writer, h.seq, h.offset])).toEqual([[after, 1, 4]]);
  });
});
