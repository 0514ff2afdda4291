// The values this process appended, found again when its consumers read them back. An appended
// value carries the event it was encoded from (event-codec.ts), so a consumer handed that same
// value decodes nothing; a value read from Kafka is a new Buffer that each consumer of this process
// (the projections' feed, the writers) decoded again: two MessagePack decodings per publish on
// `messages`, the most common record, that the instance had in hand already.
//
// A record is found by its chain header (kafka-chain.ts): its link is a SHA-256 over the record's
// content and its place in the writer's chain, known before the request is sent, so a record is
// found whether the consumer fetches it before or after the produce's answer. The bytes are compared
// too, so that the value handed on is always exactly the one read.
import { CHAIN_HEADER, CHAIN_LINK_AT } from './kafka-chain.js';
import type { IHeaders } from 'kafkajs';

/**
 * A value is kept until each consumer of this process that holds its partition has read it, so that
 * it dies young (kept longer, a value and its event outlive a few scavenges and are copied into the
 * old generation: the embedded log's lesson, embedded-log.ts `recent`). At most this many per
 * topic, the newest, for the consumers that never come to read one (a partition handed over
 * meanwhile, a consumer far behind): more than they lag behind the producers while they keep up.
 */
const KEPT_PER_TOPIC = 4_096;
/**
 * Bytes of the link that name a record here, read as a number (no string made per record): two
 * records of this process with the same first six bytes of their links only make one of them read
 * as it was before, since the bytes themselves are compared on a hit.
 */
const KEY_BYTES = 6;

const keyOf = (header: Buffer): number | undefined => (header.length >= CHAIN_LINK_AT + KEY_BYTES ? header.readUIntBE(CHAIN_LINK_AT, KEY_BYTES) : undefined);

/** A value and how many consumers of this process are still to read it. */
interface Kept {
  value: Uint8Array;
  readers: number;
}

export class OwnValues {
  private readonly byTopic = new Map<string, Map<number, Kept>>();

  /** `readers`: how many consumers of this process read a topic's partition. */
  constructor(private readonly readers: (kafkaTopic: string, partition: number) => number) {}

  /**
   * Keeps the values of records about to be sent to `kafkaTopic`, by their chain headers, for the
   * consumers of this process that will read them (none: nothing is kept).
   */
  sent(kafkaTopic: string, records: readonly { record: { value: Uint8Array }; partition: number }[], headers: readonly IHeaders[]): void {
    let kept = this.byTopic.get(kafkaTopic);
    const counts = new Map<number, number>();
    for (let i = 0; i < records.length; i++) {
      const { record: { value }, partition } = records[i];
      let n = counts.get(partition);
      if (n === undefined) counts.set(partition, (n = this.readers(kafkaTopic, partition)));
      if (n === 0) continue;
      const header = headers[i]?.[CHAIN_HEADER];
      const key = Buffer.isBuffer(header) ? keyOf(header) : undefined;
      if (key === undefined) continue;
      if (!kept) this.byTopic.set(kafkaTopic, (kept = new Map()));
      kept.set(key, { value, readers: n });
    }
    if (!kept) return;
    // Oldest first (a Map keeps insertion order).
    for (const key of kept.keys()) {
      if (kept.size <= KEPT_PER_TOPIC) break;
      kept.delete(key);
    }
  }

  /** The appended value equal to `read`, a record of `kafkaTopic` with these headers; else `read`. */
  valueOf(kafkaTopic: string, headers: IHeaders | undefined, read: Buffer): Uint8Array {
    const kept = this.byTopic.get(kafkaTopic);
    const header = headers?.[CHAIN_HEADER];
    if (!kept || !Buffer.isBuffer(header)) return read;
    const key = keyOf(header);
    const own = key === undefined ? undefined : kept.get(key);
    if (!own || own.value.byteLength !== read.length || !read.equals(own.value)) return read;
    if (--own.readers <= 0) kept.delete(key!);
    return own.value;
  }
}
