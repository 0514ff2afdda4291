// The log's hash chain (tamper evidence, README: Replay for audits), one per topic partition:
//   digest(n) = SHA-256(offset n as 8 bytes big-endian, the record in its canonical form)
//   link(n)   = SHA-256(link(n - 1), digest(n)), link(-1) = 32 zero bytes
// The canonical form of a record is how a packed segment holds it (segment.ts packSegmentInto):
// fixarray 3, str 32 key, uint 64 timestamp, bin 32 value. Plain JavaScript: the embedded log's
// writer thread (sqlite-writer.worker.mjs) computes the chain where commits are in order.
//
// Optimised for the writer thread's CPU per record (chainSegment): each hash is asked for as a
// latin1 string (32 one-byte characters) and written into reused buffers, instead of a new Buffer
// per hash (a backing store each, allocated and freed outside V8's heap). Measured 2026-11-28: two
// hashes a record 1.2 to 1.4 µs against 1.8 to 2.8 µs; the embedded publish bench's writer thread
// (test/bench/HISTORY.md, 2026-11-28). The plain shape it replaced, still the one of recordDigest and
// nextLink and of the fallback below: link = nextLink(link, recordDigest(offset, bytes, start, end)).
import crypto, { createHash } from 'node:crypto';

export const LINK_BYTES = 32;
export const ZERO_LINK = Buffer.alloc(LINK_BYTES);

// crypto.hash (Node 20.12 and later): one call, no Hash object, about two thirds of createHash's
// CPU for a record; the bytes are the same either way.
const hasOneShot = typeof crypto.hash === 'function';
const oneShot = hasOneShot ? (bytes) => crypto.hash('sha256', bytes, 'buffer') : (bytes) => createHash('sha256').update(bytes).digest();

/** offset (8 bytes) and the record, one after the other, for one hash: grown when a record does not fit */
const scratch = Buffer.alloc(64 * 1024);
const pair = Buffer.alloc(2 * LINK_BYTES);

/** digest(offset) of a record whose canonical bytes are bytes[start, end). */
export function recordDigest(offset, bytes, start, end) {
  const length = 8 + end - start;
  if (length > scratch.length) return createHash('sha256').update(offsetOf(offset)).update(bytes.subarray(start, end)).digest();
  scratch.writeUInt32BE(Math.floor(offset / 0x1_0000_0000), 0);
  scratch.writeUInt32BE(offset >>> 0, 4);
  scratch.set(bytes.subarray(start, end), 8);
  return oneShot(scratch.subarray(0, length));
}

function offsetOf(offset) {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(Math.floor(offset / 0x1_0000_0000), 0);
  b.writeUInt32BE(offset >>> 0, 4);
  return b;
}

export function nextLink(prev, digest) {
  pair.set(prev, 0);
  pair.set(digest, LINK_BYTES);
  return oneShot(pair);
}

/**
 * The chain of a packed segment (array 32 of canonical records) whose first record is
 * `firstOffset`, after `prev`: prev then each record's link, (count + 1) * 32 bytes.
 */
export function chainSegment(prev, packed, firstOffset) {
  const b = packed;
  const u32 = (p) => ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
  if (b[0] !== 0xdd) throw new Error('a segment not in the packed form cannot be chained');
  const count = u32(1);
  const out = Buffer.allocUnsafe((count + 1) * LINK_BYTES);
  out.set(prev, 0);
  let pos = 5;
  // `pair` holds the link so far, then each record's digest: one hash gives the next link.
  if (hasOneShot) pair.set(prev, 0);
  for (let i = 0; i < count; i++) {
    const keyEnd = pos + 6 + u32(pos + 2);
    const end = keyEnd + 14 + u32(keyEnd + 10);
    const length = 8 + end - pos;
    if (hasOneShot && length <= scratch.length) {
      const offset = firstOffset + i;
      scratch.writeUInt32BE(Math.floor(offset / 0x1_0000_0000), 0);
      scratch.writeUInt32BE(offset >>> 0, 4);
      scratch.set(b.subarray(pos, end), 8);
      pair.write(crypto.hash('sha256', scratch.subarray(0, length), 'latin1'), LINK_BYTES, 'latin1');
      const next = crypto.hash('sha256', pair, 'latin1');
      pair.write(next, 0, 'latin1');
      out.write(next, (i + 1) * LINK_BYTES, 'latin1');
    } else {
      // A record larger than the scratch buffer (or no crypto.hash): the plain shape.
      const link = nextLink(out.subarray(i * LINK_BYTES, (i + 1) * LINK_BYTES), recordDigest(firstOffset + i, b, pos, end));
      link.copy(out, (i + 1) * LINK_BYTES);
      if (hasOneShot) pair.set(link, 0);
    }
    pos = end;
  }
  return out;
}

/** The last link of a stored chain column (undefined when the row has none: written before chains). */
export function lastLink(chain) {
  if (!chain || chain.length < LINK_BYTES) return undefined;
  return chain.subarray(chain.length - LINK_BYTES);
}
