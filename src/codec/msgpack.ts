import { Decoder, Encoder } from '@msgpack/msgpack';

// One encoder and one decoder for the process: @msgpack's encode()/decode() build a new one per
// call, which showed up in the publish path's profile. Both are synchronous, so sharing is safe.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

/** MessagePack bytes of a value (undefined fields left out); a copy, safe to keep. */
export function packValue(value: unknown): Uint8Array {
  return encoder.encode(value);
}

export function unpackValue(bytes: Uint8Array): unknown {
  return decoder.decode(bytes);
}
