import { Decoder, Encoder } from '@msgpack/msgpack';

// One encoder and one decoder for the process: @msgpack's encode()/decode() build a new one per
// call, which showed up in the publish path's profile. Both are synchronous, so sharing is safe.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

// Small values are copied into a shared slab instead of each getting an ArrayBuffer of its own:
// allocating (and later collecting) one ArrayBuffer per log event was a fifth of the publish
// path's main-thread time. A slab region is written once and never reused; the slab is freed when
// no value in it is referenced any more. Same idea as Node's Buffer pool.
const SLAB_BYTES = 64 * 1024;
const POOLED_MAX = 4 * 1024;
let slab = new Uint8Array(SLAB_BYTES);
let slabUsed = 0;

/**
 * MessagePack bytes of a value (undefined fields left out): a view that is safe to keep and never
 * overwritten. Small values share their ArrayBuffer with others, so never transfer `.buffer` to
 * another thread.
 */
export function packValue(value: unknown): Uint8Array {
  const bytes = encoder.encodeSharedRef(value);
  if (bytes.byteLength > POOLED_MAX) return bytes.slice();
  if (slabUsed + bytes.byteLength > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const out = slab.subarray(slabUsed, slabUsed + bytes.byteLength);
  out.set(bytes);
  // 8-byte alignment keeps every view's offset a multiple of 8, as allocations are.
  slabUsed += (bytes.byteLength + 7) & ~7;
  return out;
}

export function unpackValue(bytes: Uint8Array): unknown {
  return decoder.decode(bytes);
}
