import { Encoder } from '@msgpack/msgpack';

// A snapshot's state encoded without holding the event loop for all of it (README: A bounded
// start, Cost): at REALTIME_MAX_PRESENCE_MEMBERS (1,000,000) one encode() of the member set held it
// 2.7 s, once a minute. The bytes are encode(state, { ignoreUndefined: true })'s, made in slices.

/** Values encoded between two turns of the event loop. */
const VALUES_PER_SLICE = 2000;

/**
 * Encodes `state` as MessagePack, giving the event loop a turn every VALUES_PER_SLICE values: its
 * arrays, at any depth, and the top-level object's fields are walked; anything else (a presence
 * member, a channel's record) is one value, encoded whole. The caller passes a state no one changes
 * meanwhile (each projection's take() makes its lists afresh of values it never changes in place).
 */
export async function encodeInSlices(state: unknown): Promise<Uint8Array> {
  const encoder = new Encoder({ ignoreUndefined: true });
  const parts: Uint8Array[] = [];
  let pending: Uint8Array[] = [];
  let values = 0;
  const header = (size: number, fix: number, tag16: number, tag32: number): void => {
    if (size < 16) pending.push(Uint8Array.of(fix + size));
    else if (size < 0x10000) pending.push(Uint8Array.of(tag16, size >>> 8, size & 0xff));
    else pending.push(Uint8Array.of(tag32, size >>> 24, (size >>> 16) & 0xff, (size >>> 8) & 0xff, size & 0xff));
  };
  function* walk(value: unknown, top: boolean): Generator<void> {
    if (Array.isArray(value)) {
      header(value.length, 0x90, 0xdc, 0xdd);
      for (const item of value) yield* walk(item, false);
      return;
    }
    if (top && isPlainObject(value)) {
      const keys = Object.keys(value).filter((k) => value[k] !== undefined);
      header(keys.length, 0x80, 0xde, 0xdf);
      for (const key of keys) {
        pending.push(encoder.encode(key));
        yield* walk(value[key], false);
      }
      return;
    }
    pending.push(encoder.encode(value));
    if (++values % VALUES_PER_SLICE === 0) yield;
  }
  for (const _ of walk(state, true)) {
    parts.push(Buffer.concat(pending));
    pending = [];
    await new Promise((resolve) => setImmediate(resolve));
  }
  parts.push(Buffer.concat(pending));
  return Buffer.concat(parts);
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && Object.getPrototypeOf(value) === Object.prototype;
