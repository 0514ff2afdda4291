// The embedded log's writer thread chains each packed segment with chainSegment (chain.mjs), which
// writes its hashes into reused buffers; replay --verify recomputes the chain record by record with
// recordDigest and nextLink. Both must give the same bytes (README: Replay for audits), for small
// records, records larger than chainSegment's scratch buffer (64 KiB), and offsets past 2^32.
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { chainSegment, nextLink, recordDigest, LINK_BYTES, ZERO_LINK } from '../../src/log/embedded/chain.mjs';
import { packSegment } from '../../src/log/embedded/segment.js';

/** The chain as the spec in chain.mjs states it, one record at a time. */
function plainChain(prev: Uint8Array, packed: Uint8Array, firstOffset: number, count: number): Buffer {
  const b = Buffer.from(packed.buffer, packed.byteOffset, packed.byteLength);
  const links: Buffer[] = [Buffer.from(prev)];
  let pos = 5;
  for (let i = 0; i < count; i++) {
    const keyEnd = pos + 6 + b.readUInt32BE(pos + 2);
    const end = keyEnd + 14 + b.readUInt32BE(keyEnd + 10);
    links.push(nextLink(links[links.length - 1], recordDigest(firstOffset + i, b, pos, end)));
    pos = end;
  }
  return Buffer.concat(links);
}

const records = (sizes: number[]) => sizes.map((size, i) => ({ key: `app:channel-${i}`, timestamp: 1_700_000_000_000 + i, value: randomBytes(size) }));

describe('chainSegment', () => {
  it.each([
    ['one small record', [10]],
    ['ten records of a publish', [250, 251, 180, 300, 250, 1, 0, 90, 250, 400]],
    ['records larger than the scratch buffer among small ones', [100, 70_000, 5, 200_000, 64 * 1024]],
  ])('gives the links recordDigest and nextLink give: %s', (_name, sizes) => {
    const packed = packSegment(records(sizes));
    for (const firstOffset of [0, 7, 2 ** 32 + 3]) {
      for (const prev of [ZERO_LINK, randomBytes(LINK_BYTES)]) {
        const chain = chainSegment(prev, packed, firstOffset);
        expect(chain.length).toBe((sizes.length + 1) * LINK_BYTES);
        expect(chain.equals(plainChain(prev, packed, firstOffset, sizes.length))).toBe(true);
      }
    }
  });

  it('hashes as SHA-256 of the offset and the record, then of the link and the digest', () => {
    const packed = packSegment(records([42]));
    const b = Buffer.from(packed.buffer, packed.byteOffset, packed.byteLength);
    const offset = Buffer.alloc(8);
    offset.writeUInt32BE(9, 4);
    const digest = createHash('sha256').update(offset).update(b.subarray(5)).digest();
    const link = createHash('sha256').update(ZERO_LINK).update(digest).digest();
    expect(chainSegment(ZERO_LINK, packed, 9).subarray(LINK_BYTES).equals(link)).toBe(true);
  });
});
