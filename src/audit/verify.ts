// Verifying the log's hash chains and signed checkpoints (tamper evidence), from the log itself
// (`replay --verify`) or from an export (`replay --verify-file`): both feed a ChainVerifier each
// partition's records in offset order, after the checkpoints.
import { nextLink, recordDigest, ZERO_LINK } from '../log/embedded/chain.mjs';
import { packedBound, packSegmentInto } from '../log/embedded/segment.js';
import { endorsementHolds, fingerprintOf, signatureHolds, type AuditCheckpoint, type CheckpointHead } from './checkpoint.js';
import { trusts, type Keyring } from './keyring.js';

/** One record's place in its partition's chain: its digest, the link stored with it and, for a row's first, the link before. */
export interface ChainEntry {
  topic: string;
  partition: number;
  offset: number;
  digest: Buffer;
  link?: Buffer;
  prev?: Buffer;
  /** the log's row holding it does not decode: its content is gone */
  unreadable?: boolean;
}

/** The digest of a record from its key, timestamp and value (its canonical form: chain.mjs). */
export function digestOf(offset: number, key: string, timestamp: number, value: Uint8Array): Buffer {
  const records = [{ key, timestamp, value }];
  const bound = packedBound(records);
  if (bound > packScratch.length) packScratch = Buffer.allocUnsafe(bound);
  const end = packSegmentInto(records, packScratch, 0);
  return recordDigest(offset, packScratch, 5, end);
}

/** where digestOf packs a record (grown for a larger one) */
let packScratch = Buffer.allocUnsafe(64 * 1024);

const MAX_PROBLEMS_SHOWN = 50;

interface PartitionState {
  /** the last offset seen */
  last?: number;
  /** the link stored with the last record */
  stored?: Buffer;
  /** the chain as computed from the records, from the first anchor on */
  computed?: Buffer;
  /** the first offset seen */
  first?: number;
  /** a record with a link was seen: the log links every record it appends from then on */
  chained?: boolean;
  /** the record before carried no link (appended before the log kept a chain) */
  afterUnlinked?: boolean;
}

/** Records of a chain after its newest signed head: `from` to `to` (offsets, or a Kafka writer's seqs). */
export interface UnsignedTail {
  chain: string;
  count: number;
  from: number;
  to: number;
  unit: 'offsets' | 'seqs';
  /**
   * Kafka: no trusted checkpoint names the writer's chain at all. An instance that stopped before its
   * first checkpoint leaves such a chain, and so does anyone with produce rights who makes up a
   * writer id of their own: its records pass every check but a signature.
   */
  neverSigned?: boolean;
}

const where = (topic: string, partition: number, offset: number): string => `${topic}/${partition} offset ${offset}`;

export class ChainVerifier {
  readonly problems: string[] = [];
  private problemCount = 0;
  records = 0;
  /** records of the request's own scope among them (its app and channels: a --channel that names none is unknown) */
  inScope = 0;
  /** records with no link (appended before the log kept a chain) */
  unchained = 0;
  checkpoints = 0;
  /** checkpoint heads compared with the chain */
  headsMatched = 0;
  protected readonly partitions = new Map<string, PartitionState>();
  /** per partition (Kafka: per writer's chain in a partition), offset (Kafka: sequence) → the heads checkpoints give it */
  protected readonly wanted = new Map<string, Map<number, { link: string; checkpoint: string }[]>>();

  /** keys a trusted key endorsed (rotations followed): new key -> the key that endorsed it */
  readonly rotations = new Map<string, string>();
  private readonly ring: Keyring;

  /** `trusted`: public keys (base64 DER) whose checkpoints are believed, or a keyring (keys and fingerprints). */
  constructor(trusted: Set<string> | Keyring) {
    this.ring = trusted instanceof Set ? { keys: trusted, fingerprints: new Set() } : trusted;
  }

  /** A key the keyring holds, or one a trusted key endorsed (a rotation) in a checkpoint seen before or now. */
  private trustedKey(cp: AuditCheckpoint): boolean {
    if (trusts(this.ring, cp.publicKey)) return true;
    const by = cp.endorsement?.publicKey;
    if (by === undefined || !trusts(this.ring, by) || !endorsementHolds(cp)) return false;
    // The rotation is followed from here on: the new key joins the ring.
    this.ring.keys.add(cp.publicKey);
    this.rotations.set(cp.publicKey, by);
    return true;
  }

  private wantHead(h: CheckpointHead, checkpoint: string): void {
    // Kafka's heads are a writer's (src/log/kafka/kafka-chain.ts): its chain in the partition, at a sequence.
    const kafka = h.writer !== undefined && typeof h.seq === 'number';
    const id = kafka ? `${h.topic}/${h.partition}/${h.writer}` : `${h.topic}/${h.partition}`;
    const at = kafka ? h.seq! : h.offset;
    let offsets = this.wanted.get(id);
    if (!offsets) this.wanted.set(id, (offsets = new Map()));
    const list = offsets.get(at) ?? [];
    list.push({ link: h.link, checkpoint });
    offsets.set(at, list);
  }

  /** Records a problem (the first MAX_PROBLEMS_SHOWN are kept to show; all are counted). */
  report(message: string): void {
    this.problemCount++;
    if (this.problems.length < MAX_PROBLEMS_SHOWN) this.problems.push(message);
  }

  get problemTotal(): number {
    return this.problemCount;
  }

  /** A checkpoint found at `at` (its place in the audit topic): its signature and key, and the heads to compare. */
  checkpoint(cp: AuditCheckpoint, at: string): void {
    this.checkpoints++;
    const name = `the checkpoint at ${at} (${new Date(cp.at).toISOString()})`;
    if (!signatureHolds(cp)) {
      this.report(`checkpoint altered: the signature of ${name} does not match its heads`);
      return;
    }
    if (!this.trustedKey(cp)) {
      const trusted = [...new Set([...[...this.ring.keys].map(fingerprintOf), ...this.ring.fingerprints])].join(', ') || 'none';
      const endorsed = cp.endorsement ? `; it carries an endorsement by key ${fingerprintOf(cp.endorsement.publicKey)}, ${endorsementHolds(cp) ? 'not a trusted one either' : 'whose signature does not hold'}` : '';
      this.report(
        `checkpoint signed by an untrusted key: ${name} is signed by key ${fingerprintOf(cp.publicKey)}, not a trusted one (${trusted})${endorsed}; add the instance's public key or fingerprint to the keyring (--keyring, --trust-key), or the retired key of a rotation`,
      );
      return;
    }
    for (const h of cp.heads) this.wantHead(h, name);
    // The heads the run before signed last (witness.ts): a tail cut while the service was down shows here.
    if (Array.isArray(cp.previous)) for (const h of cp.previous) this.wantHead(h, `the heads the run before signed last, as ${name} recalls them,`);
  }

  entry(e: ChainEntry): void {
    this.records++;
    const id = `${e.topic}/${e.partition}`;
    let s = this.partitions.get(id);
    if (!s) this.partitions.set(id, (s = { first: e.offset }));
    if (s.last !== undefined && e.offset !== s.last + 1) {
      if (e.offset <= s.last) {
        this.report(`records out of order: ${where(e.topic, e.partition, e.offset)} after offset ${s.last}`);
        return;
      }
      this.report(`records missing: ${e.topic}/${e.partition} offsets ${s.last + 1} to ${e.offset - 1} (the log goes from offset ${s.last} to ${e.offset})`);
      s.stored = s.computed = undefined;
    }
    s.last = e.offset;
    const heads = this.wanted.get(id)?.get(e.offset);
    if (e.unreadable) {
      this.report(`record changed: ${where(e.topic, e.partition, e.offset)}: the row holding it is not records the log writes (its bytes were overwritten)`);
      for (const h of heads ?? []) this.report(`checkpoint does not match: ${h.checkpoint} gives ${where(e.topic, e.partition, e.offset)} the link ${h.link.slice(0, 16)}…, the record there cannot be read`);
      s.stored = s.computed = undefined;
      return;
    }
    if (!e.link) {
      // Only records appended before the log kept a chain have none, and they all come before the
      // first that has one: a link removed later (a row's chain column emptied) hides an edit.
      if (s.chained) this.report(`record not chained: ${where(e.topic, e.partition, e.offset)} carries no link, after records that do (its link was removed: the log links every record it appends)`);
      else this.unchained++;
      for (const h of heads ?? []) this.report(`checkpoint does not match: ${h.checkpoint} gives ${where(e.topic, e.partition, e.offset)} the link ${h.link.slice(0, 16)}…, the record there carries no link (its link was removed)`);
      s.stored = s.computed = undefined;
      s.afterUnlinked = true;
      return;
    }
    if (s.afterUnlinked && !s.chained && !(e.prev ?? ZERO_LINK).equals(ZERO_LINK)) {
      // The log's first link after records with none starts a chain (it follows 32 zero bytes).
      this.report(`chain broken: ${where(e.topic, e.partition, e.offset)} is the first record with a link after records with none, but does not start a chain: the links of the records before it were removed`);
    }
    s.chained = true;
    s.afterUnlinked = false;
    if (s.stored && e.prev && !s.stored.equals(e.prev)) {
      this.report(`chain broken: ${where(e.topic, e.partition, e.offset)} follows a link that is not the one stored with the record before it (a record before it was changed or removed)`);
    }
    const storedPrev = s.stored ?? e.prev;
    if (storedPrev && !nextLink(storedPrev, e.digest).equals(e.link)) {
      this.report(`record changed: ${where(e.topic, e.partition, e.offset)} does not give the link stored with it (its key, time or value was altered)`);
    }
    const computedPrev = s.computed ?? e.prev;
    s.computed = computedPrev ? nextLink(computedPrev, e.digest) : undefined;
    s.stored = e.link;
    if (heads) {
      const got = s.computed?.toString('hex');
      for (const h of heads) {
        if (got === undefined) this.report(`checkpoint does not match: ${h.checkpoint} gives ${where(e.topic, e.partition, e.offset)} the link ${h.link.slice(0, 16)}…, the records do not give one there (no link before it to follow)`);
        else if (h.link === got) this.headsMatched++;
        else this.report(`checkpoint does not match: ${h.checkpoint} gives ${where(e.topic, e.partition, e.offset)} the link ${h.link.slice(0, 16)}…, the records give ${got.slice(0, 16)}… (records up to it were changed, or their links rewritten)`);
      }
    }
  }

  /** The partition ended at `end` (its next offset): checkpoint heads past its last record mean records missing at its end. */
  end(topic: string, partition: number, end: number): void {
    const offsets = this.wanted.get(`${topic}/${partition}`);
    if (!offsets) return;
    for (const [offset, heads] of offsets) {
      if (offset >= end) this.report(`records missing: ${heads[0].checkpoint} names ${where(topic, partition, offset)}, but ${topic}/${partition} ends before it (at offset ${end})`);
    }
  }

  /** The partitions seen, for the ends of an export (each one's last offset + 1). */
  seen(): { topic: string; partition: number; end: number }[] {
    return [...this.partitions].map(([id, s]) => {
      const at = id.lastIndexOf('/');
      return { topic: id.slice(0, at), partition: Number(id.slice(at + 1)), end: (s.last ?? -1) + 1 };
    });
  }

  /**
   * Records after the newest checkpoint of their partition: chained, so an edit among them still
   * shows as a broken link, but no signature covers them yet (links rewritten there would pass,
   * and the tail cut would leave no trace). Per chain: how many, and from which offset to which.
   */
  unsignedTails(): UnsignedTail[] {
    const out: UnsignedTail[] = [];
    for (const [id, s] of this.partitions) {
      if (id.startsWith('audit/') || s.last === undefined) continue;
      const signed = Math.max(-1, ...(this.wanted.get(id)?.keys() ?? []));
      const from = Math.max(signed + 1, s.first ?? 0);
      if (s.last >= from) out.push({ chain: id, count: s.last - from + 1, from, to: s.last, unit: 'offsets' });
    }
    return out;
  }

  /**
   * Partitions whose first record is past offset 0: retention deletes a partition's oldest rows, and
   * the chain, anchored at the first record held, cannot tell that from a cut of its head; how many
   * checkpoint heads name records before it (the oldest checkpoints retention left name some).
   */
  laterStarts(): { chain: string; first: number; heads: number }[] {
    const out: { chain: string; first: number; heads: number }[] = [];
    for (const [id, s] of this.partitions) {
      if (s.first === undefined || s.first === 0) continue;
      let heads = 0;
      for (const [offset, list] of this.wanted.get(id) ?? []) if (offset < s.first) heads += list.length;
      out.push({ chain: id, first: s.first, heads });
    }
    return out;
  }

  unsigned(): number {
    return this.unsignedTails().reduce((n, t) => n + t.count, 0);
  }

  summary(): string {
    const lines = [`${this.records} records, ${this.checkpoints} checkpoints (${this.headsMatched} heads matched)`];
    const unsigned = this.unsigned();
    if (unsigned > 0) lines.push(`${unsigned} records after the newest checkpoint of their partition (chained, not signed yet: verify again after the next checkpoint)`);
    for (const [key, by] of this.rotations) lines.push(`key ${fingerprintOf(key)} trusted as the successor of ${fingerprintOf(by)} (its checkpoints carry that key's endorsement)`);
    if (this.unchained > 0) lines.push(`${this.unchained} records carry no link (appended before the log kept a chain): not verified`);
    const starts = this.laterStarts();
    if (starts.length > 0) {
      const list = starts.map((s) => `${s.chain} from offset ${s.first}${s.heads > 0 ? ` (${s.heads} checkpoint heads name records before it, not checked)` : ''}`).join(', ');
      lines.push(`partitions read from past offset 0: ${list}; the records before are not there (deleted by retention, or cut: the chain cannot tell)`);
    }
    if (this.problemCount > this.problems.length) lines.push(`${this.problemCount - this.problems.length} more problems not shown`);
    return lines.join('; ');
  }
}
